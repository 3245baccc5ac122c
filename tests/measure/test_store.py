from __future__ import annotations

from pathlib import Path

import pytest

from servecap.errors import ServecapError
from servecap.measure.store import RunStore, export_csv, export_json
from servecap.measure.trace import Trace


def test_round_trip_every_field(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    t1 = Trace("0", 0.0, 10, 3, sent_s=0.001, first_token_s=0.05, end_s=0.07,
               token_times_s=[0.05, 0.06, 0.07], usage_prompt_tokens=11, usage_output_tokens=3, chunks=3)
    t2 = Trace("1", 0.1, 10, 3, sent_s=0.1, end_s=0.2, error="http_503", error_detail="busy", http_status=503,
               trimmed=True)
    store.save_run(run_id="r1", url="http://x", model="m", mode="open", settings={"seed": 1},
                   traces=[t1, t2], summary={"num_requests": 2}, checks=[], client={}, wall_duration_s=0.2)
    assert store.resolve("r") == "r1" and store.resolve("last") == "r1"
    back = store.get_traces("r1")
    assert back[0].token_times_s == [0.05, 0.06, 0.07] and back[0].usage_prompt_tokens == 11
    assert back[1].error == "http_503" and back[1].trimmed is True
    row = store.get_run("r1")
    assert row.num_errors == 1 and row.settings == {"seed": 1}
    assert '"token_times_s": [' in export_json(row, back)
    assert export_csv(back).splitlines()[1].endswith("0.050000 0.060000 0.070000")
    with pytest.raises(ServecapError, match="no such run"):
        store.resolve("zzz")


def test_not_a_database(tmp_path: Path) -> None:
    bad = tmp_path / "x.sqlite"
    bad.write_text("hello, not sqlite" * 100)
    with pytest.raises(ServecapError, match="db="):
        RunStore(bad)
