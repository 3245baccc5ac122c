"""``bench`` replays a block-hash trace against the emulator with prompts synthesised to the
trace's block structure (each 512-token block opens with its hash id's marker,
``measure.payload.prompt_text_from_hashes``): the emulator's prefix cache, which hashes the text
it receives, finds what the simulator finds from the ids alone: its own ``/metrics`` counters
(``vllm:prefix_cache_queries``/``hits``, read as ``monitor`` reads them) over the run equal the
simulated hit rate within 5 points."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli
from servecap.emulator.server import ServerProcess
from servecap.measure.payload import prompt_text_from_hashes
from servecap.monitor.cache_hits import PREFIX_CACHE, cache_hits
from servecap.monitor.snapshot import Snapshot, parse_exposition

DEPLOYMENT = ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "32768"]
WORKLOAD = {"arrival": {"kind": "trace", "path": "sample:agentic", "time_scale": 0.1}, "num_requests": 40}


@pytest.fixture(scope="module")
def emulator() -> Iterator[ServerProcess]:
    with ServerProcess([*DEPLOYMENT, "--served-model-name", "llama"]) as srv:
        yield srv


def test_prompts_share_text_exactly_as_far_as_their_ids() -> None:
    a = prompt_text_from_hashes(1100, [0, 1, 2], 512, unique="x", tag="n")
    b = prompt_text_from_hashes(1300, [0, 1, 3], 512, unique="y", tag="n")
    assert len(a) == 4 * 1100 and len(b) == 4 * 1300  # 4 characters a token (the emulator's count)
    assert a[: 4 * 1024] == b[: 4 * 1024] and a[: 4 * 1026] != b[: 4 * 1026]  # block 2 opens with id 2 vs 3
    assert prompt_text_from_hashes(1100, [0, 1, 2], 512, unique="x", tag="m")[:40] != a[:40]  # per-run tag


def _scrape(url: str, time_s: float) -> Snapshot:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        return parse_exposition(resp.read().decode(), url=url, time_s=time_s)


def test_bench_hit_rate_equals_the_simulated_one(emulator: ServerProcess, tmp_path: Path) -> None:
    before = _scrape(emulator.url, 0.0)
    wl = tmp_path / "trace.json"
    wl.write_text(json.dumps(WORKLOAD))
    res = CliRunner().invoke(
        cli, ["bench", emulator.url, "--workload", str(wl), "--db", str(tmp_path / "r.sqlite"), "--json"]
    )
    assert res.exit_code == 0, res.output
    run = json.loads(res.stdout)["runs"][0]
    assert run["summary"]["completed"] == 40
    assert {c["name"]: c["ok"] for c in run["checks"]}["prefix_cache"] is True  # the trace's own sharing
    sim = CliRunner().invoke(cli, ["simulate", *DEPLOYMENT, "--workload", str(wl), "--json"])
    assert sim.exit_code == 0, sim.output
    simulated = json.loads(sim.stdout)["prefix_cache_hit_rate"]
    assert simulated > 0.4  # agent turns resend their context
    assert run["prefix_cache_hit_rate"] == pytest.approx(simulated, abs=0.05)
    # the server's own prefix-cache counters over the run (what `monitor` fits its hit rate from)
    served = cache_hits(before, _scrape(emulator.url, 1.0))
    assert served is not None and served.source == PREFIX_CACHE and served.query_tokens > 0
    assert served.hit_rate == pytest.approx(simulated, abs=0.05)
