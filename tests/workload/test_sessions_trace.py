"""Session traces with parent/child edges and tool-call gaps: a child is issued ``delay_s`` after
the last of its parents ended, on one replica and on a fleet; bad graphs are named by line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.core.defaults import build_deployment
from servecap.core.plan import plan
from servecap.errors import ServecapError
from servecap.sim import EngineSetup, engine_setup_from_plan
from servecap.sim.simulate import simulate
from servecap.specs import RequestShape
from servecap.workload import workload_from_dict
from servecap.workload.sessions import load_sessions

GRAPH = """\
{"session_id": "a", "request_id": "a1", "arrival_s": 0.0, "prompt_tokens": 3000, "output_tokens": 50, "hash_ids": [0, 1, 2, 3, 4, 5]}
{"request_id": "a2", "parent_id": "a1", "delay_s": 2.0, "prompt_tokens": 3600, "output_tokens": 40, "hash_ids": [0, 1, 2, 3, 4, 6, 7, 8]}
{"request_id": "a3", "parent_id": "a1", "delay_s": 0.5, "prompt_tokens": 2600, "output_tokens": 30}
{"request_id": "a4", "parent_id": ["a2", "a3"], "delay_s": 1.0, "prompt_tokens": 4200, "output_tokens": 60}
{"session_id": "b", "request_id": "b1", "arrival_s": 1.0, "prompt_tokens": 2100, "output_tokens": 20}
"""


def _setup() -> EngineSetup:
    dep = build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100"), max_model_len=8192)
    return engine_setup_from_plan(plan(dep, request=RequestShape(512, 128)))


def test_children_wait_for_their_parents_plus_the_gap(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(GRAPH)
    w = workload_from_dict({"arrival": {"kind": "trace", "path": str(path), "format": "sessions", "time_scale": 2.0}})
    setup = _setup()
    result = simulate(setup, w, np.random.default_rng(0))
    recs = {(r.prompt_tokens, r.output_tokens): r for r in result.records()}
    assert len(recs) == 5 and all(r.error is None for r in recs.values())
    a1, a2, a3, a4, b1 = (recs[k] for k in ((3000, 50), (3600, 40), (2600, 30), (4200, 60), (2100, 20)))
    over = setup.efficiency.request_overhead_s
    assert a1.end_s is not None and a2.end_s is not None and a3.end_s is not None
    assert a1.arrival_s == 0.0 and b1.arrival_s == 2.0  # roots at their (scaled) times
    # records' ends include the request overhead; a child reaches the engine the overhead after
    # its parent's engine end, plus the scaled gap
    assert a2.arrival_s == pytest.approx(a1.end_s + 4.0, abs=1e-9)
    assert a3.arrival_s == pytest.approx(a1.end_s + 1.0, abs=1e-9)
    assert a4.arrival_s == pytest.approx(max(a2.end_s, a3.end_s) + 2.0, abs=1e-9)  # the join
    assert over >= 0
    assert a2.cached_prompt_tokens == 5 * 512  # a1's five full trace blocks (ids 0..4); id 5 differs


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (
            '{"request_id": "x", "parent_id": "nope", "prompt_tokens": 5, "output_tokens": 1}',
            r"s\.jsonl:2\.parent_id='nope'",
        ),
        (
            '{"request_id": "r", "arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1}',
            r"s\.jsonl:2\.request_id='r'.*repeats",
        ),
        (
            '{"request_id": "x", "prompt_tokens": 5, "output_tokens": 1}',
            r"s\.jsonl:2=.arrival_s.: a request without a parent",
        ),
        (
            '{"request_id": "x", "parent_id": "r", "delay_s": -1, "prompt_tokens": 5, "output_tokens": 1}',
            r"s\.jsonl:2\.delay_s=-1",
        ),
        (
            '{"request_id": "x", "parent_id": "r", "delay_s": 1e300, "prompt_tokens": 5, "output_tokens": 1}',
            r"s\.jsonl:2\.delay_s",
        ),
        (
            '{"request_id": "x", "parent_id": "r", "arrival_s": 3, "prompt_tokens": 5, "output_tokens": 1}',
            r"s\.jsonl:2\.arrival_s=3",
        ),
        (
            '{"request_id": "x", "parent_id": "r", "prompt_tokens": 0, "output_tokens": 1}',
            r"s\.jsonl:2\.prompt_tokens=0",
        ),
        (
            '{"request_id": "x", "parent_id": "r", "prompt_tokens": 5, "output_tokens": 1, "tool": 1}',
            r"s\.jsonl:2='tool'",
        ),
    ],
)
def test_a_bad_graph_line_is_named(tmp_path: Path, line: str, match: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"request_id": "r", "arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1}\n' + line + "\n")
    with pytest.raises(ServecapError, match=match):
        load_sessions(path)


def test_auto_format_replays_a_sessions_file_as_sessions(tmp_path: Path) -> None:
    """``format: auto`` tells a sessions file by its first line (request_id with parent_id or
    session_id) and replays the graph as ``format: sessions`` does."""
    path = tmp_path / "s.jsonl"
    path.write_text(GRAPH)

    def arrivals(**fmt: str) -> list[float]:
        w = workload_from_dict({"arrival": {"kind": "trace", "path": str(path), **fmt}})
        return sorted(r.arrival_s for r in simulate(_setup(), w, np.random.default_rng(0)).records())

    assert arrivals() == arrivals(format="sessions")
    assert len(arrivals()) == 5
