"""The plan ``servecap fleet plan`` asks for, from its flags: a plan file (or none) with the
flags laid over it.

:class:`FleetPlanFlags` holds the flags (``None``: not given; the defaults they fall back to
live in :class:`~servecap.planning.model.FleetPlanRequest` and :mod:`servecap.app.defaults`);
:func:`plan_request_from_flags` turns them into a validated request, the first problem one
:class:`~servecap.errors.ServecapError` naming the field. No I/O beyond reading the plan and
workload files the flags name.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from servecap.app import defaults
from servecap.errors import ServecapError
from servecap.json_object import JsonObject
from servecap.planning.model import DEFAULT_WORKLOAD, FleetPlanRequest, plan_request_from_dict
from servecap.workload import load_workload
from servecap.workload.spec import TraceArrival

NO_LEVERS = "none"
"""``--levers none``: no lever table."""


def load_plan_file(path: Path | str) -> JsonObject:
    """Read a ``.yaml``/``.yml``/``.json`` plan file into a mapping (validated by
    :func:`~servecap.planning.model.plan_request_from_dict`)."""
    from servecap.files import load_document

    raw: JsonObject = load_document(path, "plan")
    return raw


class FleetPlanFlags(BaseModel):
    """The flags of ``servecap fleet plan`` that shape the plan (``None``: not given)."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)

    plan_file: Path | None = None
    model: str | None = None
    gpus: tuple[str, ...] = ()
    tp: int | None = None
    weights_dtype: str | None = None
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = None
    peak_rps: float | None = None
    peak_users: int | None = None
    request_interval_s: float | None = None
    workload: Path | None = None
    trace: TraceArrival | None = None  # --trace and its window and time scale (app/trace_flags.py)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    prompt_sigma: float | None = None
    output_sigma: float | None = None
    slo_ttft_p99_s: float | None = None
    slo_tpot_p99_s: float | None = None
    ttft_slo_ms: float | None = None
    tpot_slo_ms: float | None = None
    router: str | None = None
    levers: str | None = None  # comma-separated; "none": no lever table
    small_model: str | None = None
    cache_hit_rate: float | None = None
    cpu_tier_gib: float | None = None
    shared_store_tib: float | None = None
    seed: int | None = None


def plan_request_from_flags(flags: FleetPlanFlags) -> FleetPlanRequest:
    """The plan file's mapping (empty without one) with every given flag laid over it, validated."""
    raw: JsonObject = dict(load_plan_file(flags.plan_file)) if flags.plan_file is not None else {}
    if flags.model is not None:
        raw["model"] = flags.model
    if flags.gpus:
        cand: JsonObject = {"kv_cache_dtype": flags.kv_cache_dtype}
        for k, v in (("tp", flags.tp), ("weights_dtype", flags.weights_dtype), ("max_model_len", flags.max_model_len)):
            if v is not None:
                cand[k] = v
        raw["candidates"] = [{"gpu": g, **cand} for g in flags.gpus]
    elif flags.plan_file is None:
        raise ServecapError("gpu", None, "give at least one candidate GPU (-g H100 -g H200) or --plan FILE")
    raw["traffic"] = _traffic(flags, raw.get("traffic"))
    slo = _mapping(raw.get("slo"), "slo")
    for metric, secs, ms in (
        ("ttft_s", flags.slo_ttft_p99_s, flags.ttft_slo_ms),
        ("tpot_s", flags.slo_tpot_p99_s, flags.tpot_slo_ms),
    ):
        if secs is not None and ms is not None:
            raise ServecapError(
                f"slo.{metric}", secs, f"give --slo-{metric[:4]}-p99-s or --{metric[:4]}-slo-ms, not both"
            )
        value = secs if secs is not None else (ms / 1e3 if ms is not None else None)
        if value is not None:
            slo[metric] = {"p99": value}
    if slo:
        raw["slo"] = slo
    if flags.router is not None:
        raw["router"] = flags.router
    if flags.levers is not None:
        names = [x.strip() for x in flags.levers.split(",") if x.strip()]
        raw["levers"] = [] if names == [NO_LEVERS] else names
    if flags.seed is not None:
        raw["seed"] = flags.seed
    if flags.small_model is not None:
        raw["small_model"] = flags.small_model
    if flags.cache_hit_rate is not None:
        raw["cache_hit_rate"] = flags.cache_hit_rate
    if flags.cpu_tier_gib is not None:
        raw["cpu_tier_gib"] = flags.cpu_tier_gib
    if flags.shared_store_tib is not None:
        raw["shared_store_tib"] = flags.shared_store_tib
    return plan_request_from_dict(raw)


def _mapping(value: object, field: str) -> JsonObject:
    """A plan file's section as a copy of its mapping (``{}`` when absent)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ServecapError(field, value, "must be a mapping (see docs/fleet.md)")
    return {str(k): v for k, v in value.items()}


def _traffic(flags: FleetPlanFlags, section: object) -> JsonObject:
    """The plan file's ``traffic:`` with the peak, interval, workload and length flags applied."""
    traffic = _mapping(section, "traffic")
    peaks: tuple[tuple[str, float | None], ...] = (
        ("peak_rps", flags.peak_rps),
        ("peak_users", flags.peak_users),
        ("request_interval_s", flags.request_interval_s),
    )
    for key, amount in peaks:
        if amount is not None:
            traffic[key] = amount
    if flags.peak_rps is not None:
        traffic.pop("peak_users", None)
    if flags.peak_users is not None:
        traffic.pop("peak_rps", None)
    if flags.trace is not None:
        return _trace_traffic(flags, traffic)
    if flags.workload is not None:
        traffic["workload"] = load_workload(flags.workload).model_dump(mode="json", by_alias=True, exclude_none=True)
    if any(v is not None for v in (flags.prompt_tokens, flags.output_tokens, flags.prompt_sigma, flags.output_sigma)):
        traffic["workload"] = with_lengths(_mapping(traffic.get("workload"), "traffic.workload"), flags)
    return traffic


def _trace_traffic(flags: FleetPlanFlags, traffic: JsonObject) -> JsonObject:
    """The traffic of ``--trace``: the trace is the workload (its arrivals and lengths), so a flag
    that would set either is refused by name, and a plan file's peak gives way to it."""
    assert flags.trace is not None
    for flag, value in (
        ("--workload", flags.workload),
        ("--peak-rps", flags.peak_rps),
        ("--peak-users", flags.peak_users),
        ("--prompt-tokens", flags.prompt_tokens),
        ("--output-tokens", flags.output_tokens),
        ("--prompt-sigma", flags.prompt_sigma),
        ("--output-sigma", flags.output_sigma),
    ):
        if value is not None:
            why = "give --trace or --workload, not both" if flag == "--workload" else None
            rate = flag.startswith("--peak")
            raise ServecapError(
                flag,
                str(value),
                why
                or (
                    "a replayed trace sets its own rate: scale it with --time-scale"
                    if rate
                    else "a replayed trace brings its own lengths: drop it"
                ),
            )
    traffic.pop("peak_rps", None)
    traffic.pop("peak_users", None)
    traffic["workload"] = {"arrival": flags.trace.model_dump(mode="json", exclude_none=True)}
    return traffic


def with_lengths(workload: JsonObject, flags: FleetPlanFlags) -> JsonObject:
    """The traffic's workload with the length flags applied (the defaults of app/defaults.py for a
    length not given): fixed lengths, or log-normal with the given medians and sigmas."""
    for name, n in (("prompt_tokens", flags.prompt_tokens), ("output_tokens", flags.output_tokens)):
        if n is not None and n < 1:
            raise ServecapError(name, n, "must be >= 1")
    # no workload given: the default one, as fleet plan builds it (a steady open loop at the peak)
    base: JsonObject = workload or {
        **DEFAULT_WORKLOAD,
        "arrival": {"kind": "poisson", "rate_per_s": 1.0},
        "duration_s": 600,
    }
    for key, n, sigma, default in (
        ("prompt_tokens", flags.prompt_tokens, flags.prompt_sigma, defaults.PROMPT_TOKENS),
        ("output_tokens", flags.output_tokens, flags.output_sigma, defaults.OUTPUT_TOKENS),
    ):
        if n is None and sigma is None:
            continue
        value = n if n is not None else default
        base[key] = (
            {"kind": "lognormal", "median": value, "sigma": sigma} if sigma else {"kind": "fixed", "value": value}
        )
    return base
