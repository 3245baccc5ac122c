"""The serial and process-pool executors: same values in the same order; a failing or dying
task costs only its own outcome."""

from __future__ import annotations

import pytest
from tests.distributed import tasks

from servecap.distributed import EXECUTORS, make_executor
from servecap.distributed.executor import WORKER_DIED
from servecap.errors import ServecapError
from servecap.progress import Progress


@pytest.mark.parametrize("kind", ["serial", "process"])
def test_values_in_item_order(kind: str) -> None:
    ex = make_executor(kind, workers=2)
    seen: list[Progress] = []
    out = ex.map(tasks.square, list(range(7)), progress=seen.append)
    assert [o.value for o in out] == [0, 1, 4, 9, 16, 25, 36]
    assert [o.index for o in out] == list(range(7))
    assert all(o.ok for o in out)
    assert seen[-1].done == 7 and seen[-1].total == 7 and seen[-1].unit == "tasks"


@pytest.mark.parametrize("kind", ["serial", "process"])
def test_an_exception_is_that_items_outcome(kind: str) -> None:
    out = make_executor(kind, workers=2).map(tasks.fail_on_three, [1, 2, 3, 4])
    assert [o.value for o in out] == [1, 4, None, 16]
    assert out[2].error == "ValueError: bad item 3"


def test_a_dying_worker_costs_only_its_item() -> None:
    out = make_executor("process", workers=2, max_retries=1).map(tasks.die_on_three, [1, 2, 3, 4, 5])
    assert [o.value for o in out] == [1, 4, None, 16, 25]
    assert out[2].error == WORKER_DIED
    assert out[2].attempts >= 2  # retried before it was given up


def test_empty_sweep() -> None:
    assert make_executor("process").map(tasks.square, []) == []


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(ServecapError, match=r"executor='dask': unknown executor"):
        make_executor("dask")
    with pytest.raises(ServecapError, match=r"workers=0"):
        make_executor("process", workers=0)
    with pytest.raises(ServecapError, match=r"max_retries=-1"):
        make_executor("process", max_retries=-1)
    assert set(EXECUTORS) == {"serial", "process", "ray"}


def test_a_persistent_pool_serves_several_maps_and_recovers_from_a_death() -> None:
    ex = make_executor("process", workers=2, persistent=True)
    try:
        assert [o.value for o in ex.map(tasks.square, [1, 2, 3])] == [1, 4, 9]
        out = ex.map(tasks.die_on_three, [2, 3, 4])
        assert [o.value for o in out] == [4, None, 16] and out[1].error == WORKER_DIED
        assert [o.value for o in ex.map(tasks.square, [5])] == [25]  # a fresh pool after the break
    finally:
        ex.close()
        ex.close()  # idempotent
