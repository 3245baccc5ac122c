"""The compare use case: rank deployments (GPU x count x weights dtype x KV dtype) of one model
by cost per user within the SLOs.

Every candidate is planned in full (:func:`servecap.core.search.compare`). GPUs without a price
in the catalog are ranked when the request prices them (one price for all, or per GPU), and are
otherwise kept, after the priced ones, with the reason, never dropped. The response's
``model_dump_json()`` is ``servecap compare --json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.config import JsonDict
from pydantic.json_schema import SkipJsonSchema

from servecap.app.defaults import OUTPUT_TOKENS, PROMPT_TOKENS
from servecap.app.flags import DEFAULT_MODEL, DeploymentFlags, efficiency_from_file, flag_help
from servecap.app.plan import slo_used
from servecap.errors import ServecapError, from_validation_error


def _catalog_gpu_names(schema: JsonDict) -> None:
    """The catalog's GPU ids as the schema's ``enum`` of a GPU name (read when the schema is
    written, not on import; aliases such as ``h100`` are taken too)."""
    from servecap.catalog import gpu_catalog

    schema["enum"] = [g.id for g in gpu_catalog()]


class CompareRequest(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)

    model: str = Field(default=DEFAULT_MODEL, max_length=200, description=flag_help(DeploymentFlags, "model"))
    gpus: list[Annotated[str, Field(json_schema_extra=_catalog_gpu_names)]] | None = Field(
        default=None,
        description="GPU names (default: every GPU).",  # None: every catalog GPU (and the gpu_file's)
    )
    gpu_file: SkipJsonSchema[Path | None] = Field(default=None, description="TOML file adding [[gpu]] rows.")
    counts: list[int] = Field(default=[1, 2, 4, 8], min_length=1, description="GPUs per replica to try (TP sizes).")
    weights_dtypes: list[str] = Field(
        default=["auto", "fp8", "int4"], min_length=1, description="Weight dtypes to try."
    )
    kv_dtypes: list[str] = Field(default=["auto", "fp8"], min_length=1, description="KV cache dtypes to try.")
    max_model_len: int | None = Field(
        default=None, ge=1, le=16_777_216, description="Context length (default: the model's)."
    )
    prompt_tokens: int = Field(default=PROMPT_TOKENS, ge=1, le=16_777_216, description="Typical prompt length.")
    output_tokens: int = Field(default=OUTPUT_TOKENS, ge=1, le=16_777_216, description="Typical output length.")
    duty_cycle: float | None = Field(  # None: from request_interval_s, per deployment (app/defaults.py)
        default=None,
        description="Share of a user's session spent generating [default: each deployment's, from "
        "--request-interval-s].",
    )
    request_interval_s: float | None = Field(  # None: app.defaults.REQUEST_INTERVAL_S (a request every 30 s)
        default=None,
        description="Mean seconds between a user's requests, the answer included (default 30, as plan and fleet plan).",
    )
    ttft_slo_ms: float | None = Field(
        default=None, description="TTFT SLO in ms (steady-state mean; default: the interactive SLO, 2000 ms / 100 ms)."
    )
    tpot_slo_ms: float | None = Field(
        default=None, description="TPOT SLO in ms (steady-state mean; default: the interactive SLO, 2000 ms / 100 ms)."
    )
    price_per_hour: float | None = Field(default=None, description="USD per GPU-hour for every GPU.")
    gpu_prices: dict[str, float] = Field(  # over price_per_hour and the catalog
        default={}, description="USD per GPU-hour by GPU name."
    )
    calibration: SkipJsonSchema[Path | None] = Field(
        default=None, description="Calibration file from `servecap calibrate`."
    )

    @field_validator("gpus")
    @classmethod
    def _some_gpus(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not v:  # an empty list never means "every GPU"
            raise ValueError("give at least one GPU name, or leave it out for every GPU")
        return v


class SloOut(BaseModel):
    ttft_s: float | None
    tpot_s: float | None
    statistic: str
    source: str


class CandidateOut(BaseModel):
    gpu: str
    num_gpus: int
    weights_dtype: str
    kv_cache_dtype: str
    users_served: int | None
    tpot_s: float | None
    ttft_s: float | None
    usd_per_hour: float | None
    price_source: str | None  # "catalog" | "request" | None (unpriced)
    usd_per_user_month: float | None
    usd_per_million_tokens: float | None
    problem: str | None
    limited_by: str | None = None  # what caps the batch: kv_cache, max_num_seqs, tpot_slo, ttft_slo
    bottleneck: str | None = None  # the decode step at that batch: memory or compute
    duty_cycle: float | None = None  # the share of a user's time generating on this deployment


class CompareResponse(BaseModel):
    schema_: str = Field(default="servecap.compare/1", serialization_alias="schema")
    model: str
    slo: SloOut
    prompt_tokens: int
    output_tokens: int
    duty_cycle: float | None  # the one given; None: each candidate's, from request_interval_s
    request_interval_s: float | None  # the user model: a request every this many seconds per user
    candidates: list[CandidateOut]
    unpriced_gpus: list[str]  # GPUs with no price: ranked after the priced ones, by users per GPU


def parse_prices(text: str | None) -> tuple[float | None, dict[str, float]]:
    """``--price-per-hour``: ``2.5`` (every GPU) or ``H100=2.5,L40S=0.9`` (per GPU)."""
    if text is None or not text.strip():
        return None, {}
    if "=" not in text:
        try:
            return float(text), {}
        except ValueError:
            raise ServecapError("price_per_hour", text, "must be USD per GPU-hour, or GPU=USD pairs") from None
    prices: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, value = part.partition("=")
        try:
            prices[name.strip()] = float(value)
        except ValueError:
            raise ServecapError("price_per_hour", part, "must be GPU=USD, e.g. H100=2.5") from None
    return None, prices


def compare(request: CompareRequest) -> CompareResponse:
    from servecap.app import defaults
    from servecap.app.inputs import cost_inputs, request_shape
    from servecap.catalog import gpu_catalog, load_gpu_file, lookup_gpu, resolve_model
    from servecap.core.search import compare as search
    from servecap.specs.perf import Slo

    r = request
    spec = resolve_model(r.model)
    extra = load_gpu_file(r.gpu_file) if r.gpu_file else []
    gpu_list = [lookup_gpu(name, extra) for name in r.gpus] if r.gpus else [*gpu_catalog(), *extra]
    if any(n < 1 or n > 1024 for n in r.counts):
        raise ServecapError("counts", r.counts, "GPU counts must be between 1 and 1024")
    prices: dict[str, float] = {}
    interval = None
    if r.duty_cycle is None:
        interval = r.request_interval_s if r.request_interval_s is not None else defaults.REQUEST_INTERVAL_S
        if not 0 < interval <= 86_400:
            raise ServecapError("request_interval_s", interval, "must be between 0 and 86,400 seconds")
    elif r.request_interval_s is not None:
        raise ServecapError(
            "duty_cycle", r.duty_cycle, "give --duty-cycle or --request-interval-s (they say the same thing)"
        )
    # without a duty cycle each candidate's comes from its own time generating (duty_cycle_of below)
    duty = r.duty_cycle if r.duty_cycle is not None else 1.0
    if r.price_per_hour is not None:
        cost_inputs(r.price_per_hour, None, duty)
        prices = {g.id: r.price_per_hour for g in gpu_list}
    for name, usd in r.gpu_prices.items():
        cost_inputs(usd, None, duty)
        prices[lookup_gpu(name, extra).id] = usd
    eff, _ = efficiency_from_file(r.calibration)
    slo = slo_used(r.ttft_slo_ms, r.tpot_slo_ms)
    cands = search(
        spec,
        gpu_list,
        gpu_counts=r.counts,
        weights_dtypes=r.weights_dtypes,
        kv_dtypes=r.kv_dtypes,
        max_model_len=r.max_model_len,
        request=request_shape(r.prompt_tokens, r.output_tokens),
        slo=Slo(slo.ttft_s, slo.tpot_s),
        efficiency=eff,
        costs=cost_inputs(None, None, duty),
        rent_usd_per_gpu_hour=prices,
        duty_cycle_of=None if interval is None else lambda g: defaults.duty_cycle(g, interval),
    )
    catalog_price = {g.id: g.rent_usd_per_hour for g in gpu_list}
    rows = []
    for c in cands:
        source = "request" if c.gpu in prices else ("catalog" if catalog_price.get(c.gpu) is not None else None)
        rows.append(
            CandidateOut(
                gpu=c.gpu,
                num_gpus=c.num_gpus,
                weights_dtype=c.weights_dtype,
                kv_cache_dtype=c.kv_cache_dtype,
                users_served=c.plan.users_served if c.plan else None,
                tpot_s=c.plan.tpot_s if c.plan else None,
                ttft_s=c.plan.ttft_s if c.plan else None,
                usd_per_hour=c.plan.cost.usd_per_hour if c.plan else None,
                price_source=source,
                usd_per_user_month=c.usd_per_user_month,
                usd_per_million_tokens=c.plan.cost.usd_per_million_tokens if c.plan else None,
                problem=c.problem,
                limited_by=c.plan.batch_limited_by if c.plan else None,
                bottleneck=c.plan.bottleneck if c.plan else None,
                duty_cycle=c.plan.costs_in.duty_cycle if c.plan and c.plan.batch > 0 else None,
            )
        )
    unpriced = sorted({g.id for g in gpu_list if g.id not in prices and g.rent_usd_per_hour is None})
    return CompareResponse(
        model=spec.id,
        slo=SloOut(ttft_s=slo.ttft_s, tpot_s=slo.tpot_s, statistic=slo.statistic, source=slo.source),
        prompt_tokens=r.prompt_tokens,
        output_tokens=r.output_tokens,
        duty_cycle=r.duty_cycle,
        request_interval_s=interval,
        candidates=rows,
        unpriced_gpus=unpriced,
    )


def merged_rows(rows: list[CandidateOut]) -> list[tuple[CandidateOut, list[tuple[str, str]]]]:
    """Rows that differ only in dtypes yet plan the same (same GPU, count, users, latencies to the
    millisecond and prices: e.g. INT4 weights on a GPU where the TPOT SLO, not memory, caps the batch) shown once,
    with every (weights, KV) dtype pair that gives them, in rank order."""
    out: list[tuple[CandidateOut, list[tuple[str, str]]]] = []
    index: dict[tuple[object, ...], int] = {}
    for r in rows:
        key = (
            r.gpu,
            r.num_gpus,
            r.users_served,
            None if r.tpot_s is None else round(r.tpot_s * 1e3),  # whole ms, as the table shows them
            None if r.ttft_s is None else round(r.ttft_s * 1e3),
            r.usd_per_hour,
            r.problem,
        )
        if key in index:
            out[index[key]][1].append((r.weights_dtype, r.kv_cache_dtype))
            continue
        index[key] = len(out)
        out.append((r, [(r.weights_dtype, r.kv_cache_dtype)]))
    return out


def dtype_columns(pairs: list[tuple[str, str]]) -> tuple[str, str]:
    """The weights and KV cells of merged pairs: each list when every pairing is there, else the
    pairs themselves in the weights cell ("bf16/fp8, int4/bf16") and "(weights/KV)"."""
    weights = list(dict.fromkeys(w for w, _ in pairs))
    kvs = list(dict.fromkeys(k for _, k in pairs))
    if len(set(pairs)) == len(weights) * len(kvs):
        return ", ".join(weights), ", ".join(kvs)
    return ", ".join(f"{w}/{k}" for w, k in pairs), "(weights/KV)"


def users_text(response: CompareResponse) -> str:
    """The user model of a compare answer, for its first line."""
    if response.request_interval_s is None:
        return f"duty cycle {response.duty_cycle or 0:.1%} each (given)"
    duties = [c.duty_cycle for c in response.candidates if c.duty_cycle is not None]
    spread = f", {min(duties):.1%}-{max(duties):.1%} by deployment" if duties else ""
    return (
        f"one request every {response.request_interval_s:g} s each (the default user model, app/defaults.py): "
        f"duty cycle = time generating / {response.request_interval_s:g} s{spread}"
    )


def compare_request(**values: object) -> CompareRequest:
    """A :class:`CompareRequest` from keyword values; a bad one is one :class:`ServecapError`."""
    try:
        return CompareRequest.model_validate(values)
    except ValidationError as err:
        raise from_validation_error(err) from None
