"""LiteLLM's proxy (``litellm[proxy]`` from the package registry, offline) as the gateway in front
of two emulator pools, next to ``servecap fleet simulate`` of the same fleet file and arrivals.

The fleet (:data:`FLEET`): a ``primary`` pool whose one replica runs at most 2 requests and queues
2 more (``max_num_seqs: 2``, ``max_waiting: 2``: the emulator refuses the rest with 503), a
``fallback`` pool, and a gateway with a per-key limit of 8 requests per 5 s window
(``window: fixed``, LiteLLM's counter) and ``fallback: {primary: [fallback]}``. The proxy runs the
config ``servecap export litellm`` writes from that file; its per-key limit comes from the
export's ``POST /team/new`` body, given by a custom auth module (LiteLLM keeps keys in a
Postgres database, which an offline test does not have: ``general_settings.custom_auth`` is
LiteLLM's own way to attach limits to a key without it), with
``LITELLM_RATE_LIMIT_WINDOW_SIZE=5`` as the export's warning says.

Arrivals (a trace, replayed by ``servecap bench`` and simulated as is): a burst of 10 at 0 s (8
pass the limit; the primary takes 4, 4 fall back), 3 more at 2.5 s (the window is spent: 429),
and a burst of 10 at 8 s (a new window: 8 pass, 4 fall back). Measured: the bench's HTTP 429s and
each emulator's ``vllm:request_success``; simulated: the gateway's ``rate_limited_rpm`` and
``fell_back`` counts and each pool's completions. Asserted equal, exactly: the bursts sit well
inside one window or the next (LiteLLM opens a window at the first request's whole second, so its
end moves by up to 1 s with the wall clock; no request is within 1 s of either end), and the
primary's 2 running requests last about 2.4 s (320 output tokens), longer than a burst takes to
arrive through the proxy even on busy cores, and its 4 are done by 5 s. A token bucket of the
same limit (the gateway's default) predicts 14 429s instead of 7: the test checks that too, so
the fixed window is what matches. Bounded: 23 requests, about 20 s; every process is stopped at
the end."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from servecap.emulator.server import ServerProcess, free_port, stop_process_group

pytestmark = pytest.mark.router

MODEL = "meta-llama/Llama-3.1-8B"
EMULATOR = ["-m", MODEL, "-g", "H100", "-l", "8192"]
WINDOW_S = 5
RPM = 8
KEY = "sk-tenant-default"
MASTER_KEY = "sk-servecap-master"
POOL = {"model": MODEL, "gpu": "H100", "max_model_len": 8192, "replicas": 1, "cold_start": "instant"}
FLEET: dict[str, Any] = {
    "pools": [
        {"name": "primary", **POOL, "max_num_seqs": 2, "max_waiting": 2},
        {"name": "fallback", **POOL},
    ],
    "router": "random",
    "on_failure": "fail",  # LiteLLM's num_retries: 0 (the primary is not retried, it falls back)
    "gateway": {
        "rate_limits": {"default": {"rpm": RPM, "window": "fixed", "window_s": WINDOW_S}},
        "routing": {"kind": "class", "default": "primary"},
        "fallback": {"chains": {"primary": ["fallback"]}, "max_retries": 1},
    },
}
ARRIVALS_S = [0.04 * i for i in range(10)] + [2.5, 2.55, 2.6] + [8.0 + 0.04 * i for i in range(10)]
PROMPT_TOKENS, OUTPUT_TOKENS = 32, 320
EXPECTED = {"rate_limited": 7, "primary": 8, "fallback": 8}

AUTH_MODULE = '''"""Per-key limits without LiteLLM's key database: every key gets the tenant's limits."""

from fastapi import Request
from litellm.proxy._types import UserAPIKeyAuth

LIMITS = {limits!r}


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    return UserAPIKeyAuth(api_key=api_key, **LIMITS)
'''


def _have_litellm_proxy() -> bool:
    # find, not import: importing litellm fetches a price table unless told not to
    return all(importlib.util.find_spec(m) is not None for m in ("litellm", "backoff", "apscheduler"))


def write_trace(path: Path, arrivals_s: list[float] = ARRIVALS_S) -> Path:
    rows = [{"arrival_s": t, "prompt_tokens": PROMPT_TOKENS, "output_tokens": OUTPUT_TOKENS} for t in arrivals_s]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def workload(trace: Path) -> dict[str, Any]:
    rows = len(trace.read_text().splitlines())
    return {"arrival": {"kind": "trace", "path": str(trace)}, "num_requests": rows}


def proxy_config(fleet_file: Path, bases: dict[str, str], out_dir: Path) -> tuple[Path, list[str]]:
    """``servecap export litellm`` of ``fleet_file`` with each pool's address on loopback, the
    custom auth module carrying the exported per-tenant limits, a master key, and no tokenizer
    download (the proxy counts a stream's tokens; offline it uses its bundled tiktoken table)."""
    from servecap.app.export import export

    res = export("litellm", fleet_file)
    config = res.data
    for entry in config["model_list"]:
        entry["litellm_params"]["api_base"] = bases[entry["model_name"]] + "/v1"
    bodies = [json.loads(line[4:]) for line in res.text.splitlines() if line.startswith("#   {")]
    (body,) = [b for b in bodies if b["team_alias"] == "default"]
    limits = {k: body[k] for k in ("rpm_limit", "tpm_limit", "max_parallel_requests") if k in body}
    (out_dir / "servecap_auth.py").write_text(AUTH_MODULE.format(limits=limits))
    config["general_settings"] = {"master_key": MASTER_KEY, "custom_auth": "servecap_auth.user_api_key_auth"}
    # offline: count tokens with the bundled tiktoken table, not a tokenizer from the Hugging Face hub
    config.setdefault("litellm_settings", {})["disable_hf_tokenizer_download"] = True
    path = out_dir / "litellm.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path, list(res.warnings)


def start_proxy(config: Path, window_s: int) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    env = dict(os.environ)
    env |= {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_RATE_LIMIT_WINDOW_SIZE": str(window_s)}
    env |= {"LITELLM_TELEMETRY": "False", "NO_DOCS": "True", "LITELLM_LOG": "ERROR"}
    args = [sys.executable, "-m", "litellm.proxy.proxy_cli", "--config", str(config)]
    args += ["--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]
    proc = subprocess.Popen(
        args, cwd=config.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                with urllib.request.urlopen(url + "/health/liveliness", timeout=2) as r:
                    if r.status == 200:
                        return url, proc
            except OSError:
                pass
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RuntimeError(f"the LiteLLM proxy exited with {proc.returncode}: {err[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("the LiteLLM proxy did not start in 120 s")
            time.sleep(0.25)
    except BaseException:
        stop(proc)
        raise


def stop(proc: subprocess.Popen[bytes]) -> None:
    stop_process_group(proc, timeout_s=15)
    if proc.stderr is not None:
        proc.stderr.close()


def served(url: str) -> float:
    """Requests the replica finished (``vllm:request_success``, aborts left out)."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "vllm:request_success":
            total += sum(
                s.value
                for s in family.samples
                if s.name.endswith("_total") and s.labels.get("finished_reason") != "abort"
            )
    return total


def measure(
    proxy: str, pools: dict[str, str], trace: Path, tmp_path: Path, key: str = KEY
) -> tuple[dict[str, int], dict[str, Any]]:
    """The trace through the proxy with ``servecap bench`` as ``key``: 429s and each pool's served
    requests, and the bench's summary (latencies of the requests served)."""
    from servecap.app.bench import BenchRequest, BenchStep, bench
    from servecap.workload import WorkloadSpec

    before = {name: served(url) for name, url in pools.items()}
    step = BenchStep(workload=WorkloadSpec.model_validate(workload(trace)))
    req = BenchRequest(
        url=proxy, model="primary", steps=[step], endpoint="chat", api_key=key, store=False,
        max_error_fraction=1.0, timeout_s=60, db=tmp_path / "runs.db",
    )  # fmt: skip
    run = bench(req).runs[0]
    after = {name: served(url) for name, url in pools.items()}
    errors = dict(run.errors)
    rate_limited = errors.pop("http_429", 0)
    assert not errors, (errors, run.first_error)  # nothing failed but the 429s
    counts = {"rate_limited": rate_limited} | {name: round(after[name] - before[name]) for name in pools}
    return counts, run.summary.model_dump()


def simulate(fleet: dict[str, Any], trace: Path) -> tuple[dict[str, int], dict[str, Any]]:
    """``servecap fleet simulate`` of the same fleet and trace: 429s (the gateway's rpm
    refusals), fallbacks and each pool's completions, and the summary of the requests served."""
    from servecap.app.fleet_simulate import FleetSimulateRequest, fleet_simulate
    from servecap.fleet.file_schema import fleet_from_dict
    from servecap.workload import WorkloadSpec

    request = FleetSimulateRequest(fleet=fleet_from_dict(fleet), workload=WorkloadSpec.model_validate(workload(trace)))
    resp, _ = fleet_simulate(request)
    assert resp.gateway is not None
    outcomes: dict[str, int] = {}
    for per_tenant in resp.gateway.outcomes_by_tenant.values():
        for k, v in per_tenant.items():
            outcomes[k] = outcomes.get(k, 0) + v
    fell_back = sum(d.get("fell_back", 0) for d in resp.gateway.decisions_by_tenant.values())
    out = {"rate_limited": outcomes.get("rate_limited_rpm", 0), "fell_back": fell_back}
    for r in resp.replicas:
        out[r.pool] = out.get(r.pool, 0) + r.completed
    served = resp.gateway.served_summary
    return out, {} if served is None else served.model_dump()


@pytest.fixture(scope="module")
def pools() -> Iterator[dict[str, str]]:
    if not _have_litellm_proxy():
        message = "the LiteLLM gateway test needs litellm[proxy] (the dev extra installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    primary = ["--max-num-seqs", "2", "--waiting-queue-limit", "2"]
    with ServerProcess([*EMULATOR, *primary]) as p, ServerProcess(EMULATOR) as f:
        yield {"primary": p.url, "fallback": f.url}


def test_litellm_proxy_429s_and_fallbacks_match_the_simulated_gateway(pools: dict[str, str], tmp_path: Path) -> None:
    fleet_file = tmp_path / "fleet.json"
    fleet_file.write_text(json.dumps(FLEET))
    trace = write_trace(tmp_path / "arrivals.jsonl")
    config, warnings = proxy_config(fleet_file, pools, tmp_path)
    assert any(f"LITELLM_RATE_LIMIT_WINDOW_SIZE={WINDOW_S}" in w for w in warnings), warnings

    sim, _ = simulate(FLEET, trace)
    assert sim == {**EXPECTED, "fell_back": EXPECTED["fallback"]}, sim
    bucket = json.loads(json.dumps(FLEET))
    bucket["gateway"]["rate_limits"]["default"] = {"rpm": RPM}  # the gateway's default: a token bucket
    assert simulate(bucket, trace)[0]["rate_limited"] == 14  # one request's refill in 8 s, no new window

    proxy, proc = start_proxy(config, WINDOW_S)
    try:
        measured, _ = measure(proxy, pools, trace, tmp_path)
    finally:
        stop(proc)
    # the 429s are the fixed window's count: exact. Which pool serves an admitted request depends
    # on whether the primary has a free seat at that instant; a request of a burst landing within
    # a few milliseconds of one of the primary's finishes can go either way on a loaded machine,
    # so the split may differ (the total served may not): by one in most loaded runs, by two in
    # one full-suite run on a 2-core machine (6/10 against 8/8; alone, 8/8 in five runs of five).
    # The split is checked to within two of the 16; the 429s and the total exactly.
    assert measured["rate_limited"] == EXPECTED["rate_limited"], (measured, sim)
    assert measured["primary"] + measured["fallback"] == EXPECTED["primary"] + EXPECTED["fallback"], (measured, sim)
    assert abs(measured["fallback"] - EXPECTED["fallback"]) <= 2, (measured, sim)
    assert measured["primary"] >= 2 and measured["fallback"] >= 2, (measured, sim)  # both pools served
