"""The Ray executor on a local Ray instance (2 CPUs; the one the Ray tests share, tests/conftest.py):
the same values as the serial executor, and a failing or dying task costs only its own outcome."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.distributed import tasks

from servecap.distributed import make_executor
from servecap.distributed.executor import WORKER_DIED

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("local_ray")]  # the shared instance: tests/conftest.py


@pytest.fixture(scope="module")
def ray_executor() -> Iterator[object]:
    from ray import cloudpickle  # Ray ships it; send the test module's functions by value

    cloudpickle.register_pickle_by_value(tasks)
    ex = make_executor("ray", workers=2, max_retries=1)
    try:
        yield ex
    finally:
        ex.close()
        cloudpickle.unregister_pickle_by_value(tasks)


def test_ray_matches_serial(ray_executor) -> None:  # type: ignore[no-untyped-def]
    items = list(range(12))
    serial = make_executor("serial").map(tasks.square, items)
    remote = ray_executor.map(tasks.square, items)
    assert [o.value for o in remote] == [o.value for o in serial]
    assert ray.cluster_resources().get("CPU") == 2


def test_ray_keeps_partial_results(ray_executor) -> None:  # type: ignore[no-untyped-def]
    failing = ray_executor.map(tasks.fail_on_three, [1, 2, 3, 4])
    assert [o.value for o in failing] == [1, 4, None, 16]
    assert failing[2].error is not None and "bad item 3" in failing[2].error
    dying = ray_executor.map(tasks.die_on_three, [1, 2, 3, 4])
    assert [o.value for o in dying] == [1, 4, None, 16]
    assert dying[2].error == WORKER_DIED


def test_fleet_sweep_on_ray_matches_serial(ray_executor) -> None:  # type: ignore[no-untyped-def]
    """`servecap sweep --executor ray`: the same rows and records as in this process."""
    from servecap.app.fleet_sweep import run_sweep, sweep_from_dict, sweep_points

    sweep = {
        "fleet": {"pools": [{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 4096, "replicas": 2}]},
        "workload": {
            "arrival": {"kind": "poisson", "rate_per_s": 10},
            "prompt_tokens": 256,
            "output_tokens": 32,
            "num_requests": 100,
        },
        "axes": {"fleet.router": ["round-robin", "least-outstanding"]},
    }
    points = sweep_points(sweep_from_dict(sweep))
    serial = run_sweep(points, make_executor("serial"))
    remote = run_sweep(points, ray_executor)
    assert not remote.errors
    for a, b in zip(serial.results, remote.results, strict=True):
        assert a is not None and b is not None
        assert (a.row, a.records) == (b.row, b.records)


def test_fleet_sweep_seeds_on_ray_merge_as_serial(ray_executor) -> None:  # type: ignore[no-untyped-def]
    """Streamed points with two seeds each: Ray workers ship their sketches back and the merged
    points and sweep equal those of this process."""
    from servecap.app.fleet_sweep import merge_points, run_sweep, sweep_from_dict, sweep_points

    sweep = {
        "fleet": {"pools": [{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 4096, "replicas": 2}]},
        "workload": {
            "arrival": {"kind": "poisson", "rate_per_s": 10},
            "prompt_tokens": 256,
            "output_tokens": 32,
            "num_requests": 100,
        },
        "seeds": 2,
        "axes": {"fleet.router": ["round-robin", "least-outstanding"]},
    }
    points = sweep_points(sweep_from_dict(sweep))
    serial = run_sweep(points, make_executor("serial"))
    remote = run_sweep(points, ray_executor)
    assert not remote.errors
    for a, b in zip(serial.results, remote.results, strict=True):
        assert a is not None and b is not None and a.sketches is not None
        assert (a.row, a.sketches) == (b.row, b.sketches) and a.row["requests"] == 200
    merged = merge_points(serial)
    assert merged is not None and merged == merge_points(remote)
