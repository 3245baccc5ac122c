"""``fleet plan`` on a sessions trace (parent/child edges, tool gaps) as on the open-loop traces:
the window reads the graph's nominal times (by hand below), every simulation replays the graph
closed loop, ``format: auto`` tells the file apart; where the plan runs KV tiers its text shows
the prompt tokens each tier found, for the chosen fleet and in the lever rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli
from servecap.fleet.plan_window import session_arrays
from servecap.workload import workload_from_dict

BASE = ["fleet", "plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100"]


def _sessions(tmp_path: Path) -> Path:
    """Six sessions 2 s apart, each a root, a child 0.5 s after it, a grandchild 1 s after that;
    every prompt grows the one before it (the same leading block hashes)."""
    rows = []
    for s in range(6):
        rows += [
            {"session_id": s, "request_id": f"{s}-0", "arrival_s": 2.0 * s, "prompt_tokens": 2048,
             "output_tokens": 64, "hash_ids": [0, 1, 2, 100 + s]},
            {"session_id": s, "request_id": f"{s}-1", "parent_id": f"{s}-0", "delay_s": 0.5, "prompt_tokens": 2600,
             "output_tokens": 64, "hash_ids": [0, 1, 2, 100 + s, 200 + s]},
            {"session_id": s, "request_id": f"{s}-2", "parent_id": f"{s}-1", "delay_s": 1.0, "prompt_tokens": 3100,
             "output_tokens": 32, "hash_ids": [0, 1, 2, 100 + s, 200 + s, 300 + s]},
        ]  # fmt: skip
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_nominal_times_by_hand(tmp_path: Path) -> None:
    spec = workload_from_dict({"arrival": {"kind": "trace", "path": str(_sessions(tmp_path))}})
    a = session_arrays(spec)
    assert a is not None and len(a) == 18
    # session s: root at 2s, child at 2s + 0.5, grandchild at 2s + 0.5 + 1.0
    want = sorted(t for s in range(6) for t in (2.0 * s, 2.0 * s + 0.5, 2.0 * s + 1.5))
    assert a.arrival_s.tolist() == pytest.approx(want)
    assert a.prompt_tokens.tolist()[:3] == [2048, 2600, 3100]
    assert session_arrays(workload_from_dict({"arrival": {"kind": "trace", "path": "sample:agentic"}})) is None


def test_fleet_plan_replays_a_sessions_trace_and_shows_the_tiers_hits(tmp_path: Path) -> None:
    path = str(_sessions(tmp_path))
    out = CliRunner().invoke(cli, [*BASE, "--trace", path, "--levers", "cpu-tier", "--json"])
    assert out.exit_code == 0, out.output
    r = json.loads(out.stdout)
    # 18 requests, nominal times from 0 to 11.5 s (under a minute): 18 / 11.5 req/s
    assert r["window"]["scored_requests"] == 18
    assert r["peak_rps"] == pytest.approx(18 / 11.5)
    assert r["fleet"]["requests"] == 18  # every request of the graph replayed and scored
    assert r["fleet"]["prefix_cache_hit_rate"] > 0.5  # each turn resends the one before it
    (tier,) = [lv for lv in r["levers"] if lv["name"] == "cpu-tier"]
    assert set(tier["hit_rates"]) == {"gpu", "cpu"}
    text = CliRunner().invoke(cli, [*BASE, "--trace", path, "--levers", "cpu-tier"], terminal_width=250)
    assert text.exit_code == 0, text.output
    gpu = f"gpu {r['fleet']['prefix_cache_hit_rate']:.0%}"
    assert f"prompt tokens found (chosen fleet): {gpu}" in text.stdout
    assert "prompt tokens found" in text.stdout.split("levers (each re-simulated)")[1]
    assert f"{gpu}, cpu " in text.stdout  # the lever row's cell


def test_a_plan_without_tiers_keeps_its_table() -> None:
    from servecap.report.fleet_plan_text import LEVER_HEADER

    out = CliRunner().invoke(cli, [*BASE, "--trace", "sample:azure-code-2023", "--levers", "none"])
    assert out.exit_code == 0, out.output
    assert "prompt tokens found" not in out.stdout and LEVER_HEADER[-1] in out.stdout
