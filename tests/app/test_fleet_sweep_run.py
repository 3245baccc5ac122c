"""The sweep's typed answer (servecap.app.fleet_sweep_run)."""

from __future__ import annotations

import json

from servecap.app.fleet_sweep import SweepPoint, SweepRun
from servecap.app.fleet_sweep_run import SweepRequest, sweep_response


def test_a_failed_point_is_its_index_values_and_error_only() -> None:
    point = SweepPoint(0, {"fleet.router": "round-robin"}, {"pools": []}, {}, 0, None)
    run = SweepRun([point], [None], {0: "boom"}, "serial")
    answer = json.loads(sweep_response(run).to_json())
    assert answer == {
        "executor": "serial",
        "points": [{"index": 0, "values": {"fleet.router": "round-robin"}, "error": "boom"}],
        "merged": None,
    }


def test_the_request_defaults_to_a_process_pool_on_the_files_seeds() -> None:
    request = SweepRequest(sweep_file="s.yaml")
    assert (request.executor, request.workers, request.seeds, request.sketch) == ("process", None, None, False)
