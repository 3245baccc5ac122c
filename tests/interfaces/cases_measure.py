"""bench, calibrate, accuracy, validate, monitor, export, runs, catalog (one request each, three interfaces).

bench and monitor have no HTTP endpoint: both connect to a URL the user gives, which a server
must not do for its clients (api/measure_routes.py).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from tests.interfaces.harness import Case

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _export(target: str, file: str, *flags: str, **options: object) -> Case:
    """``servecap export TARGET FILE`` and ``POST /api/v1/export`` with the file's text under the
    same name (the header names it, so the answers are equal byte for byte)."""
    path = EXAMPLES / file
    body: dict[str, object] = {"target": target, "name": str(path), "content": path.read_text(), **options}
    return Case(f"export-{target}-{path.stem}", ["export", target, str(path), *flags], ("POST", "/api/v1/export", body))


CASES: list[Case] = [
    _export("keda", "fleet-autoscaled.yaml"),
    _export("kserve", "fleet-autoscaled.yaml", "-n", "llm", namespace="llm"),
    _export("ray-serve", "fleet-simple.yaml", "--import-path", "app:build", import_path="app:build"),
    _export("production-stack", "fleet-simple.yaml", "--image", "repo/img:1", image="repo/img:1"),
    _export("litellm", "fleet-gateway.yaml"),
    Case(
        "validate-one-source",
        ["validate", "--source", "databasemart-rtx4090"],
        ("POST", "/api/v1/validate", {"source": "databasemart-rtx4090"}),
    ),
    Case(
        "validate-train-split-auto-steps",
        ["validate", "--source", "vllm-pr43232-b200", "--split", "train", "--step-model", "aiconfigurator-or-roofline"],
        (
            "POST",
            "/api/v1/validate",
            {"source": "vllm-pr43232-b200", "split": "train", "step_model": "aiconfigurator-or-roofline"},
        ),
    ),
]


# -- stored runs: one emulated bench run, stored once, copied into the server's store ----------------

_DIR = Path(tempfile.gettempdir()) / f"servecap-cases-measure-{os.getpid()}"
_DB = _DIR / "runs.sqlite"
_RUN = "cases-measure-1"
_DEPLOYMENT = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "max_model_len": 4096, "enable_prefix_caching": True}


def _stored_run() -> Path:
    """A bench run against the emulator (in-process, the real load generator and engine), stored
    like ``servecap bench`` stores it; made once per test process."""
    if _DB.exists():
        return _DB
    import asyncio

    from servecap.app.flags import DeploymentFlags, deployment_from_flags
    from servecap.core.plan import plan
    from servecap.emulator.server import engine_state
    from servecap.measure.asgi_stream import AsgiClient
    from servecap.measure.bench import BenchOutcome, run_bench
    from servecap.measure.loadgen import LoadConfig
    from servecap.results.store import RunStore
    from servecap.workload import WorkloadSpec

    spec = WorkloadSpec.model_validate(
        {
            "arrival": {"kind": "poisson", "rate_per_s": 40.0},
            "prompt_tokens": {"kind": "uniform", "low": 16, "high": 1500},
            "output_tokens": {"kind": "uniform", "low": 16, "high": 64},
            "num_requests": 60,
        }
    )
    dep, _ = deployment_from_flags(DeploymentFlags(model=_DEPLOYMENT["model"], gpu="H100", max_model_len=4096))
    state = engine_state(plan(dep), model_name="m")
    cfg = LoadConfig(base_url="http://emulator", model="m", extra_body={"servecap_timing": True})

    async def go() -> BenchOutcome:
        try:
            return await run_bench(cfg, spec, seed=1, transport=AsgiClient(state.driver_app()))
        finally:
            await state.driver.stop()

    out = asyncio.run(go())
    settings = {
        "workload": spec.model_dump(mode="json", by_alias=True),
        "seed": 1,
        "concurrency": None,
        "warmup_s": 0.0,
        "cooldown_s": 0.0,
        "slo": None,
        "deployment": _DEPLOYMENT,
    }
    _DIR.mkdir(parents=True, exist_ok=True)
    atexit.register(shutil.rmtree, _DIR, True)
    partial = _DIR / "partial.sqlite"
    RunStore(partial).save_measured(
        run_id=_RUN,
        url="http://emulator",
        model="m",
        mode="open",
        settings=settings,
        requests=out.requests(),
        summary=out.summary,
        wall_duration_s=out.result.wall_duration_s,
        created_at="2026-01-01T00:00:00+00:00",
    )
    partial.replace(_DB)
    return _DB


def _into_server(client: TestClient) -> None:
    """The server's store holds the same run the CLI reads (``--db``)."""
    server_db = client.app.state.run_db
    shutil.copyfile(_stored_run(), server_db)


def _stored(name: str, cli: list[str], api: tuple[str, str, dict[str, object]], **kw: Any) -> Case:
    return Case(name, [*cli, "--db", str(_DB)], api, setup=_into_server, **kw)


CASES += [
    _stored("runs-list", ["runs"], ("GET", "/api/v1/runs", {})),
    _stored(
        "runs-list-measured-limit-1",
        ["runs", "--kind", "measured", "--limit", "1"],
        ("GET", "/api/v1/runs", {"kind": "measured", "limit": 1}),
    ),
    _stored("runs-show", ["runs", "show", _RUN], ("GET", f"/api/v1/runs/{_RUN}", {})),
    _stored("accuracy", ["accuracy", _RUN], ("GET", f"/api/v1/runs/{_RUN}/accuracy", {})),
    _stored(
        "calibrate",
        ["calibrate", _RUN, "-o", str(_DIR / "calibration.json")],
        ("POST", "/api/v1/calibrate", {"runs": [_RUN]}),
        drop=("output",),
        why_dropped="the CLI names the file it wrote; the server writes none (null)",
    ),
    _stored(
        "calibrate-server-clock-no-prefill",
        ["calibrate", _RUN, "--source", "server", "--no-fit-prefill", "-o", str(_DIR / "calibration-2.json")],
        ("POST", "/api/v1/calibrate", {"runs": [_RUN], "source": "server", "fit_prefill": False}),
        drop=("output",),
        why_dropped="the CLI names the file it wrote; the server writes none (null)",
    ),
    Case("gpus", ["gpus"], ("GET", "/api/v1/gpus", {})),
    Case("models", ["models"], ("GET", "/api/v1/models", {})),
]


# -- monitoring exports: a plan as `servecap plan --json` writes it, as a file and as a body ----------


def _plan() -> dict[str, object]:
    from servecap.app.flags import DeploymentFlags, deployment_from_flags
    from servecap.core.plan import plan
    from servecap.core.plan_dict import plan_to_dict

    dep, _ = deployment_from_flags(DeploymentFlags(model="meta-llama/Llama-3.1-8B", gpu="H100", max_model_len=8192))
    return plan_to_dict(plan(dep))


_PLAN = _plan()
_PLAN_FILE = _DIR / "plan.json"


def _write_plan_file(_client: TestClient) -> None:
    _DIR.mkdir(parents=True, exist_ok=True)
    atexit.register(shutil.rmtree, _DIR, True)
    _PLAN_FILE.write_text(json.dumps(_PLAN), encoding="utf-8")


def _monitoring(kind: str, *flags: str, **body: object) -> Case:
    return Case(
        f"export-{kind}" + "".join(flags).replace("-", "_"),
        ["export", kind, str(_PLAN_FILE), *flags],
        ("POST", "/api/v1/export/monitoring", {"kind": kind, "plan": _PLAN, "source": str(_PLAN_FILE), **body}),
        setup=_write_plan_file,
    )


CASES += [
    _monitoring("grafana"),
    _monitoring("alerts"),
    _monitoring("alerts", "--ttft-slo-ms", "300", ttft_slo_ms=300),
]
