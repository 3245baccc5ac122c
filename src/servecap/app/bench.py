"""The ``bench`` use case: send workloads to an OpenAI-compatible server, check and store each run.

:func:`bench` takes a :class:`BenchRequest` (one step per rate or concurrency of a sweep, each
with its workload already built) and returns a :class:`BenchResponse`; ``servecap bench --json``
prints ``response.model_dump_json()``. Per step: a fresh run nonce (no prompt repeats across
runs or steps), the load generator (:func:`servecap.measure.bench.run_bench`), the self-checks,
and the run stored in the :class:`~servecap.results.store.RunStore` — also when interrupted
(Ctrl-C: the partial run is stored marked ``interrupted`` and the sweep stops).

SIGTERM (what container runtimes and CI send) is handled like SIGINT: the partial run is
stored, the response says which signal stopped it, and the interface exits non-zero. The store
is opened and checked (schema, ``quick_check``, the write lock) before the first request; should
saving still fail at the end, the run is written to a side JSON file whose path the response
gives, so a measurement is never lost.

A step fails when more than ``max_error_fraction`` of its requests failed: the response says
so with the server's first error body, and the sweep stops there (the interface exits
non-zero).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from servecap.errors import ServecapError
from servecap.json_object import JsonObject
from servecap.progress import Progress, ProgressFn
from servecap.results.summary_json import RunSummaryJson
from servecap.workload import WorkloadSpec

if TYPE_CHECKING:
    from servecap.measure.loadgen import LoadConfig
    from servecap.measure.trace import ClientTrace
    from servecap.results.store import RunStore

T = TypeVar("T")

MAX_CONCURRENCY = 100_000
"""Most closed-loop workers one bench runs (each holds a connection and a task)."""


class SloModel(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)

    ttft_s: float | None = Field(default=None, gt=0)
    tpot_s: float | None = Field(default=None, gt=0)


class BenchStep(BaseModel):
    """One run of a sweep: its workload, and the rate or concurrency that names it."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    workload: WorkloadSpec
    rate: float | None = None
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)


class BenchRequest(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    url: str
    model: str | None = None  # None: the server's first /v1/models entry
    steps: list[BenchStep] = Field(min_length=1)
    seed: int = Field(default=0, description="Workload RNG seed (same stream as simulate).")
    endpoint: Literal["completions", "chat"] = Field(default="completions", description="completions|chat.")
    warmup_s: float = Field(
        default=0.0, ge=0, description="Exclude requests scheduled in the first N s from the summary."
    )
    cooldown_s: float = Field(default=0.0, ge=0, description="Exclude requests scheduled in the last N s.")
    timeout_s: float = Field(default=600.0, gt=0, description="Total deadline per request.")
    stall_timeout_s: float = Field(default=60.0, gt=0, description="Timeout when no bytes arrive for this long.")
    slo: SloModel | None = None
    label: str = Field(default="", description="A note stored with the run.")
    db: Path | None = None
    store: bool = True
    api_key: str | None = Field(default=None, exclude=True, repr=False)
    deployment: JsonObject | None = None  # DeploymentFlags settings + enable_prefix_caching
    server_timing: bool | None = None  # None: on when the server is `servecap emulate`
    max_error_fraction: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Exit non-zero (and stop a sweep) when more than this share of a run's requests fail.",
    )
    share_prefixes_across_runs: bool = Field(
        default=False,
        description="Shared-prefix groups keep the same text in every run (prompts are otherwise unique per run, "
        "so a server's prefix cache cannot answer one run from another).",
    )


class CheckResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    ok: bool
    value: float | None
    limit: float | None
    message: str


class BenchRunResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str | None  # None: not stored
    rate: float | None
    concurrency: int | None
    mode: str
    interrupted: bool
    summary: RunSummaryJson  # as `simulate --json` writes it
    errors: dict[str, int]
    checks: list[CheckResult]
    measured_window_s: float
    sent_requests: int  # every request of the run (warm-up and cool-down included)
    prefix_cache_hit_rate: float | None  # the server's cached tokens / prompt tokens
    multi_token_chunk_requests: int
    failed_requests: int
    first_error: str | None  # "<kind>: <the server's error body>" of the first failed request


class BenchResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str
    model: str
    sweep_id: str | None
    db: str | None
    runs: list[BenchRunResult]
    interrupted: bool = False
    stopped_by: Literal["SIGINT", "SIGTERM"] | None = None  # the signal that interrupted the run
    failure: str | None = None  # why the run counts as failed (too many errors), with the server's words
    warnings: list[str] = []  # e.g. a server's deployment answer that was not valid, a side file


def bench(req: BenchRequest, progress: ProgressFn | None = None) -> BenchResponse:
    """Run every step (stopping at an interrupt or a failed step); see the module docstring."""
    from servecap.app.runs import deployment_from_settings
    from servecap.measure.loadgen import LoadConfig
    from servecap.results.store import RunStore, new_run_id

    check_base_url(req.url)
    store = RunStore(req.db) if req.store else None
    if store is not None:
        store.check_writable()  # a damaged, foreign, read-only or locked store: refused before sending
    reachable(req.url)
    model = req.model or first_model(req.url, req.api_key)
    warnings: list[str] = []
    emulated = server_deployment(req.url, req.api_key, warnings)
    deployment = emulated
    if req.deployment is not None:
        deployment = {**req.deployment, "model": req.deployment.get("model") or model}
        deployment_from_settings(deployment)  # a bad flag fails now, not at calibration
    extra: dict[str, bool] = {}  # extra body keys of every request (the emulator's servecap_timing)
    if req.server_timing if req.server_timing is not None else emulated is not None:
        extra["servecap_timing"] = True
    sweep_id = new_run_id() if len(req.steps) > 1 else None
    out = BenchResponse(
        url=req.url,
        model=model,
        sweep_id=sweep_id,
        db=None if store is None else str(store.path),
        runs=[],
        warnings=warnings,
    )
    for i, step in enumerate(req.steps):
        cfg = LoadConfig(
            base_url=req.url,
            model=model,
            endpoint=req.endpoint,
            request_timeout_s=req.timeout_s,
            stall_timeout_s=req.stall_timeout_s,
            warmup_s=req.warmup_s,
            cooldown_s=req.cooldown_s,
            api_key=req.api_key,
            extra_body=extra,
            share_prefixes_across_runs=req.share_prefixes_across_runs,
        )
        settings: JsonObject = {
            "url": req.url,
            "model": model,
            "workload": step.workload.model_dump(mode="json", by_alias=True),
            "seed": req.seed,
            "concurrency": step.concurrency,
            "endpoint": req.endpoint,
            "warmup_s": req.warmup_s,
            "cooldown_s": req.cooldown_s,
            "timeout_s": req.timeout_s,
            "slo": None if req.slo is None else req.slo.model_dump(),
            "deployment": deployment,
            "server_timing": bool(extra),
            "run_nonce": cfg.run_nonce,
            "share_prefixes_across_runs": req.share_prefixes_across_runs,
        }
        label = f"step {i + 1}/{len(req.steps)}" if len(req.steps) > 1 else ""
        received: list[Literal["SIGINT", "SIGTERM"]] = []
        sweep = _Sweep(req, store, sweep_id, progress, out.warnings)
        result = _run_step(sweep, cfg, step, label, settings, received)
        out.runs.append(result)
        if result.interrupted:
            out.interrupted = True
            out.stopped_by = received[0] if received else "SIGINT"
            break
        if result.failed_requests and result.failed_requests > req.max_error_fraction * max(result.sent_requests, 1):
            out.failure = _failure(result, req.max_error_fraction)
            break
    return out


def _failure(result: BenchRunResult, limit: float) -> str:
    kinds = ", ".join(f"{k} {v}" for k, v in result.errors.items() if k != "interrupted")
    where = f"run {result.run_id}" if result.run_id else "the run"
    msg = (
        f"{result.failed_requests} of {result.sent_requests} requests failed in {where} ({kinds}; more than "
        f"{limit:.0%}: max_error_fraction)"
    )
    if result.first_error:
        msg += f"; the first error: {result.first_error}"
    return msg


@dataclass(frozen=True, slots=True)
class _Sweep:
    """What every step of one bench shares: the request, the store (None: not stored), the
    sweep's id, the progress callback and the response's warnings (appended to)."""

    req: BenchRequest
    store: RunStore | None
    sweep_id: str | None
    progress: ProgressFn | None
    warnings: list[str]


def _run_step(
    sweep: _Sweep,
    cfg: LoadConfig,
    step: BenchStep,
    label: str,
    settings: JsonObject,
    received: list[Literal["SIGINT", "SIGTERM"]],
) -> BenchRunResult:
    from dataclasses import asdict

    from servecap.measure.bench import planned_requests, run_bench
    from servecap.results import Slo
    from servecap.results.store import new_run_id

    req, store, progress = sweep.req, sweep.store, sweep.progress
    slo = None if req.slo is None else Slo(req.slo.ttft_s, req.slo.tpot_s)
    total = planned_requests(step.workload, req.seed)
    done = errors = 0
    stage = "bench" + (f" {label}" if label else "")

    def on_done(trace: ClientTrace) -> None:
        nonlocal done, errors
        done += 1
        if trace.error is not None:
            errors += 1
        if progress is not None:
            progress(Progress(stage, done, total, "requests", f"{errors} errors" if errors else ""))

    if progress is not None:
        progress(Progress(stage, 0, total, "requests", f"sending to {req.url}"))
    outcome = run_interruptible(
        run_bench(cfg, step.workload, seed=req.seed, concurrency=step.concurrency, slo=slo, on_done=on_done),
        received,
    )
    result = outcome.result
    checks = [CheckResult(**c.as_dict()) for c in outcome.checks]
    run_id: str | None = new_run_id()
    if store is not None:
        run_id = save_or_keep(
            store,
            sweep.warnings,
            run_id=run_id,
            url=req.url,
            model=cfg.model,
            mode=result.mode,
            settings=settings,
            requests=outcome.requests(),
            summary=outcome.summary,
            checks=[c.model_dump() for c in checks],
            client=asdict(result.client),
            wall_duration_s=result.wall_duration_s,
            interrupted=result.interrupted,
            label=req.label,
            sweep_id=sweep.sweep_id,
            created_at=result.started_at,
        )
    first = outcome.first_error()
    return BenchRunResult(
        run_id=run_id if store is not None else None,
        rate=step.rate,
        concurrency=step.concurrency,
        mode=result.mode,
        interrupted=result.interrupted,
        summary=RunSummaryJson.of(outcome.summary),
        errors=outcome.errors,
        checks=checks,
        measured_window_s=outcome.measured_window_s,
        sent_requests=len(result.traces),
        prefix_cache_hit_rate=outcome.summary.prefix_cache_hit_rate,
        multi_token_chunk_requests=outcome.multi_token_chunk_requests,
        failed_requests=outcome.failed,
        first_error=None if first is None else f"{first.error}: {first.error_detail[:1000]}".rstrip(": "),
    )


def save_or_keep(store: RunStore, warnings: list[str], **run: Any) -> str | None:
    """Store a measured run; should the store fail now (a disk full, a file damaged or locked
    during the run), write the run to a side JSON file instead, add a warning naming it, and
    return None (the run has no id in the store)."""
    try:
        return store.save_measured(**run)
    except ServecapError as err:
        path = keep_in_side_file(run)
        warnings.append(f"the run could not be stored ({err}); it is kept in {path}")
        return None


def keep_in_side_file(run: Mapping[str, object]) -> Path:
    """``servecap-run-<id>.json`` in the working folder (else the temporary folder): the run's
    settings, summary and every request, as ``runs export`` writes them."""
    import tempfile
    from dataclasses import asdict

    from servecap.files import dumps_json
    from servecap.outputs import write_text
    from servecap.results import RunSummary, summary_to_json_dict
    from servecap.results.measured import MeasuredRequest

    summary, requests = run["summary"], run["requests"]
    if not isinstance(summary, RunSummary) or not isinstance(requests, Sequence):
        raise TypeError("a measured run's summary is a RunSummary and its requests a sequence")
    body = {
        **{k: v for k, v in run.items() if k not in ("requests", "summary")},
        "summary": summary_to_json_dict(summary),
        "requests": [asdict(r) for r in requests if isinstance(r, MeasuredRequest)],
    }
    text = dumps_json(body)
    name = f"servecap-run-{run['run_id']}.json"
    for folder in (Path.cwd(), Path(tempfile.gettempdir())):
        try:
            return write_text(folder / name, text, "side file")
        except ServecapError:
            continue
    raise ServecapError("db", str(run.get("run_id")), "the run could be neither stored nor written to a side file")


def run_interruptible(coro: Coroutine[Any, Any, T], received: list[Literal["SIGINT", "SIGTERM"]] | None = None) -> T:
    """Run a load-generator coroutine to its end on uvloop where installed (about a quarter less
    client CPU per token at 2,000 streams), else asyncio's loop. SIGINT (Ctrl-C) and SIGTERM (a
    container runtime stopping it) cancel it, and the signal's name is appended to ``received``;
    the load generator catches the cancellation, settles its records and returns the partial run
    (``interrupted``), which this returns like any other result."""
    try:
        import uvloop

        factory: Any = uvloop.new_event_loop
    except ImportError:
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_with_signals(coro, [] if received is None else received))


async def _with_signals(coro: Awaitable[T], received: list[Literal["SIGINT", "SIGTERM"]]) -> T:
    task = asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []

    def stop(name: str) -> None:
        received.append("SIGTERM" if name == "SIGTERM" else "SIGINT")
        task.cancel()

    for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):  # not the main thread
            loop.add_signal_handler(sig, stop, name)
            installed.append(sig)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:  # interrupted before or after the load generator ran
        raise KeyboardInterrupt from None
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def check_base_url(url: str, field: str = "url") -> None:
    """Refuse, in one line, a URL that is not ``http(s)://host[:port][/path]``."""
    from urllib.parse import urlsplit

    if not url.startswith(("http://", "https://")):
        raise ServecapError(field, url, "must start with http:// or https://")
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError as err:
        raise ServecapError(field, url, f"is not a valid URL ({err})") from None
    if not u.hostname:
        raise ServecapError(field, url, "has no host")
    if port == 0:
        raise ServecapError(field, url, "bad port")


def reachable(url: str) -> None:
    """Fail fast, in one line, when nothing listens at the URL (rather than a run of errors)."""
    import socket
    from urllib.parse import urlsplit

    check_base_url(url)
    u = urlsplit(url)
    assert u.hostname is not None
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
        with socket.create_connection((u.hostname, port), timeout=5.0):
            pass
    except ValueError:
        raise ServecapError("url", url, "bad port") from None
    except OSError as err:
        raise ServecapError("url", url, f"cannot connect: {err.strerror or err}") from None


def first_model(url: str, api_key: str | None) -> str:
    """The server's first ``/v1/models`` entry (bench's default ``--model``); an answer not of
    the OpenAI shape (``{"data": [{"id": "..."}]}``) is one error asking for ``--model``."""
    import httpx

    base = url.rstrip("/").removesuffix("/v1")
    problem = ""
    try:
        headers = {"authorization": f"Bearer {api_key}"} if api_key else None
        resp = httpx.get(base + "/v1/models", timeout=10.0, headers=headers)
        body = resp.json()
        data = body.get("data") if isinstance(body, dict) else None
        first = data[0] if isinstance(data, list) and data else None
        name = first.get("id") if isinstance(first, dict) else None
        if isinstance(name, str) and name.strip():
            return name
        problem = "no model id in its answer"
    except (httpx.HTTPError, ValueError) as err:
        problem = type(err).__name__
    raise ServecapError("model", None, f"not given and {base}/v1/models did not name one ({problem}); pass --model")


def server_deployment(url: str, api_key: str | None, warnings: list[str] | None = None) -> JsonObject | None:
    """The emulator's own deployment (``GET /servecap/deployment``), validated on receipt: None
    from other servers, and None with a warning when the answer is not a deployment this
    servecap can plan (so ``accuracy`` and ``calibrate`` never read a garbage one)."""
    import httpx

    from servecap.app.runs import deployment_from_settings

    base = url.rstrip("/").removesuffix("/v1")
    try:
        headers = {"authorization": f"Bearer {api_key}"} if api_key else None
        resp = httpx.get(base + "/servecap/deployment", timeout=5.0, headers=headers)
        if resp.status_code != 200:
            return None
        data = resp.json()
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(data, dict) or "gpu" not in data:
        return None
    try:
        deployment_from_settings(data)
    except (ServecapError, TypeError, ValueError, AttributeError, KeyError) as err:
        if warnings is not None:
            why = str(err) if isinstance(err, ServecapError) else f"{type(err).__name__}: {err}"
            warnings.append(
                f"{base}/servecap/deployment answered a deployment that is not valid ({why[:300]}); "
                "the run is stored without it"
            )
        return None
    return data
