"""The fleet page asks and answers what ``fleet simulate`` answers on a P/D fleet and at the
cache-replay fidelity: the "disaggregated prefill/decode" rows with the CLI's labels and figures,
each P/D replica's load against its role's capacity, and a trace sample's cache replay with the
CLI's line and latency table. One page load and one job each."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from click.testing import CliRunner
from pydantic import TypeAdapter
from tests.web.conftest import Page, run_from_link

from servecap.cli.main import cli
from servecap.fleet.pd.stats import PdStats, pd_rows

pytestmark = pytest.mark.browser


def _cli(*args: str) -> dict[str, Any]:
    out = CliRunner().invoke(cli, ["fleet", "simulate", *args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_a_pd_fleet_via_the_store_shows_the_clis_pd_section_and_role_capacities(desktop: Page, server_url: str) -> None:
    query = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM", "max_model_len": "8192",
             "prefill_replicas": "1", "decode_replicas": "2", "rate": "4", "duration_s": "40",
             "kv_via": "store", "remote_kv_tib": "1", "prompt_tokens": "1024", "output_tokens": "128",
             "seed": "0"}  # fmt: skip
    want = _cli("-m", "meta-llama/Llama-3.1-8B", "-g", "H100-SXM", "-l", "8192", "--prefill-replicas", "1",
                "--decode-replicas", "2", "--rate", "4", "--duration-s", "40", "--prompt-tokens", "1024",
                "--output-tokens", "128", "--kv-via", "store", "--remote-kv-tib", "1", "--ttft-slo-ms", "2000",
                "--tpot-slo-ms", "100")  # fmt: skip
    pg = desktop.page
    # half a split is the CLI's refusal (give both), before any job
    pg.goto(f"{server_url}/fleet?{urlencode({k: v for k, v in query.items() if k != 'decode_replicas'})}")
    run_from_link(pg)
    pg.wait_for_selector("#error:not(.hidden)")
    assert pg.inner_text("#error").startswith("decode_replicas: give prefill replicas and decode replicas")
    pg.fill("input[name=decode_replicas]", query["decode_replicas"])
    pg.click("#form button[type=submit]")
    pg.wait_for_selector("#pd", timeout=120_000)
    rows = [r.split("\t") for r in pg.inner_text("#pd table").splitlines()[1:]]
    assert rows == [list(r) for r in pd_rows(TypeAdapter(PdStats).validate_python(want["pd"]))]
    assert rows[0] == ["replicas", "1 prefill, 2 decode"]
    assert rows[-1][0] == "hand-off via the shared store" and "blocks already there" in rows[-1][1]
    # each replica's load against its own role's capacity (prefills back to back; pure decode)
    caps = {r["pool"]: r["capacity_req_s"] for r in want["replicas"]}
    assert set(caps) == {"prefill", "decode"} and caps["prefill"] != caps["decode"]
    table = pg.inner_text("#result > .tablewrap table")
    for line in table.splitlines()[1:]:
        pool = line.split("\t")[1]
        assert f"(of ~{caps[pool]:,.1f}, " in line, line
    desktop.shot("fleet-pd")
    assert desktop.errors == [], desktop.failed


def test_a_trace_sample_replayed_at_the_cache_replay_fidelity(desktop: Page, server_url: str) -> None:
    query = {"model": "Qwen/Qwen3-0.6B", "gpu": "H100-SXM", "max_model_len": "8192", "replicas": "2",
             "trace": "mooncake-conversation", "fidelity": "cache-replay"}  # fmt: skip
    want = _cli("-m", "Qwen/Qwen3-0.6B", "-g", "H100-SXM", "-l", "8192", "--replicas", "2",
                "--trace", "sample:mooncake-conversation", "--fidelity", "cache-replay")  # fmt: skip
    pg = desktop.page
    pg.goto(f"{server_url}/fleet?{urlencode(query)}")
    run_from_link(pg)
    pg.wait_for_selector("#cache-replay", timeout=120_000)
    rate = f"{100 * want['prefix_cache_hit_rate']:.1f}%"
    assert " ".join(pg.inner_text("#answer").split()) == (
        f"cache replay: {want['requests']:,} requests on {want['replicas']} replicas ({want['router']} router) over "
        f"{want['horizon_s']:,.1f} s; prefix cache hit rate {rate} of {want['prefix_cache_query_tokens']:,} prompt tokens"
    )
    lines = pg.inner_text("#cache-replay table").splitlines()
    assert lines[0].split("\t")[1:] == ["p50", "p90", "p99", "mean", "max"]
    ttft = want["ttft_s"]
    assert lines[1].split("\t") == ["TTFT", *(f"{1000 * ttft[k]:,.1f}" for k in ("p50", "p90", "p99", "mean", "max"))]
    assert "fidelity cache-replay" in pg.inner_text("#result .notes")
    desktop.shot("fleet-cache-replay")
    assert desktop.errors == [], desktop.failed
