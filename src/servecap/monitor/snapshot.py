"""One scrape of one server as a typed, frozen value.

The exposition text is parsed by ``prometheus_client.parser.text_string_to_metric_families``
(the client library's own parser of the text format). Every quantity of :mod:`names` is read
from the first family name the server exposes (newest first, so a vLLM 0.10 server that exposes
both ``kv_cache_usage_perc`` and the deprecated ``gpu_cache_usage_perc`` is read once), summed
over its series (data-parallel engines, finish reasons), and histograms are kept as their
cumulative bucket counts so that two snapshots give the window's delta.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from servecap.errors import ServecapError
from servecap.monitor.names import BY_SOURCE_KEYS, CACHE_COUNTERS, QUANTITIES, SGLANG_CACHE_HIT_RATE
from servecap.specs import vllm_metrics as v


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative counts at upper bounds (the last is +Inf), the sum of observations and their count."""

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]
    sum: float
    count: float

    def minus(self, earlier: Histogram) -> Histogram:
        """The observations made since ``earlier`` (Prometheus' counter-reset rule: if any count
        went down the server restarted, and the whole of this histogram is new)."""
        if earlier.bounds != self.bounds or self.count < earlier.count:
            return self
        return Histogram(
            self.bounds,
            tuple(a - b for a, b in zip(self.cumulative, earlier.cumulative, strict=True)),
            self.sum - earlier.sum,
            self.count - earlier.count,
        )


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """From ``vllm:cache_config_info``'s labels (None where the server does not say)."""

    num_gpu_blocks: int | None
    block_size: int | None
    gpu_memory_utilization: float | None
    cache_dtype: str | None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one server's ``/metrics`` said at ``time_s`` (seconds, the monitor's clock)."""

    url: str
    time_s: float
    engine: str  # "vllm", "sglang" or "unknown"
    model_name: str | None
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)
    cache_config: CacheConfig | None = None
    sglang_cache_hit_rate: float | None = None
    spec_accepted_per_pos: tuple[float, ...] = ()  # vllm:spec_decode_num_accepted_tokens_per_pos by position

    def gauge(self, key: str) -> float | None:
        return self.gauges.get(key)


def _int_label(labels: dict[str, str], name: str) -> int | None:
    try:
        return int(labels[name])
    except (KeyError, ValueError):
        return None


def _float_label(labels: dict[str, str], name: str) -> float | None:
    try:
        return float(labels[name])
    except (KeyError, ValueError):
        return None


def parse_exposition(text: str, *, url: str, time_s: float) -> Snapshot:
    """Parse Prometheus text exposition into a :class:`Snapshot`.

    Raises :class:`ServecapError` naming ``url`` when the text is not the exposition format.
    """
    from prometheus_client.parser import text_string_to_metric_families

    # family name -> (type, samples)
    families: dict[str, list[tuple[str, dict[str, str], float]]] = {}
    try:
        for fam in text_string_to_metric_families(text):
            families.setdefault(fam.name, []).extend((s.name, dict(s.labels), float(s.value)) for s in fam.samples)
    except (ValueError, TypeError, IndexError) as err:
        raise ServecapError("url", url, f"did not answer Prometheus text exposition ({err})") from err

    gauges: dict[str, float] = {}
    counters: dict[str, float] = {}
    histograms: dict[str, Histogram] = {}
    model_name: str | None = None
    for q in QUANTITIES:
        # an untyped counter keeps its "_total" in the family name
        found = next(
            (
                (f, fam)
                for f in q.families
                for fam in (f, f + "_total")
                if fam in families and (fam == f or q.kind == "counter")
            ),
            None,
        )
        if found is None:
            continue
        name, fam_name = found
        samples = families[fam_name]
        if model_name is None:
            model_name = next((lab["model_name"] for _, lab, _ in samples if "model_name" in lab), None)
        if q.kind == "histogram":
            hist = _histogram(name, samples)
            if hist is not None:
                histograms[q.key] = hist
            continue
        wanted = name + "_total" if q.kind == "counter" else name
        if q.key in CACHE_COUNTERS:
            _check_tokens(wanted, [val for s, _, val in samples if s == wanted], url)
        values = [val for s, _, val in samples if s == wanted and not math.isnan(val)]
        if values:
            (counters if q.kind == "counter" else gauges)[q.key] = sum(values)

    by_source = _by_source(families, url)
    counters.update(by_source)
    cache = None
    info = families.get(v.CACHE_CONFIG_INFO.name)
    if info:
        lab = info[0][1]
        cache = CacheConfig(
            num_gpu_blocks=_int_label(lab, "num_gpu_blocks"),
            block_size=_int_label(lab, "block_size"),
            gpu_memory_utilization=_float_label(lab, "gpu_memory_utilization"),
            cache_dtype=lab.get("cache_dtype"),
        )
    hit_rate = None
    if SGLANG_CACHE_HIT_RATE in families:
        vals = [val for _, _, val in families[SGLANG_CACHE_HIT_RATE]]
        hit_rate = sum(vals) / len(vals) if vals else None
    if any(f.startswith("vllm:") for f in families):
        engine = "vllm"
    elif any(f.startswith("sglang:") for f in families):
        engine = "sglang"
    else:
        engine = "unknown"
    per_pos: dict[int, float] = defaultdict(float)
    for fam_name in (
        v.SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS.name,
        v.SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS.name + "_total",
    ):
        for sample, lab, val in families.get(fam_name, []):
            pos = _int_label(lab, "position")
            if sample.endswith("_total") and pos is not None and 0 <= pos < 64 and math.isfinite(val):
                per_pos[pos] += val  # summed over data-parallel engines
    positions = tuple(per_pos.get(i, 0.0) for i in range(max(per_pos) + 1)) if per_pos else ()
    return Snapshot(url, time_s, engine, model_name, gauges, counters, histograms, cache, hit_rate, positions)


def _check_tokens(sample: str, values: list[float], url: str) -> None:
    """A token counter's values must be finite and >= 0 (garbage from the server otherwise)."""
    for val in values:
        if not math.isfinite(val) or val < 0:
            raise ServecapError(
                sample, val, f"{sample} = {val!r} from {url}: a token counter must be a finite number >= 0"
            )


def _by_source(families: dict[str, list[tuple[str, dict[str, str], float]]], url: str) -> dict[str, float]:
    """``vllm:prompt_tokens_by_source_total`` per ``source`` label (summed over engines), as the
    counters ``prompt_local_compute`` ...; empty when the server has none. A source vLLM does not
    define is refused (a misread label would be counted as a miss)."""
    name = v.PROMPT_TOKENS_BY_SOURCE.name
    samples = families.get(name) or families.get(name + "_total") or []
    out: dict[str, float] = {}
    for sample, labels, val in samples:
        if sample != name + "_total":
            continue
        src = labels.get(v.SOURCE)
        if src not in BY_SOURCE_KEYS:
            raise ServecapError(
                f"{name}_total{{source}}",
                src,
                f"{name}_total has source={src!r} from {url}: not a source vLLM defines ({', '.join(BY_SOURCE_KEYS)})",
            )
        _check_tokens(f"{name}_total{{source={src!r}}}", [val], url)
        key = BY_SOURCE_KEYS[src]
        out[key] = out.get(key, 0.0) + val
    return out


def _histogram(name: str, samples: list[tuple[str, dict[str, str], float]]) -> Histogram | None:
    """Sum the series of one histogram family bucket by bucket (bounds from the ``le`` labels)."""
    by_bound: dict[float, float] = defaultdict(float)
    total_sum = total_count = 0.0
    for sample, labels, value in samples:
        if sample == name + "_bucket" and "le" in labels:
            by_bound[float(labels["le"])] += value
        elif sample == name + "_sum":
            total_sum += value
        elif sample == name + "_count":
            total_count += value
    if not by_bound:
        return None
    bounds = tuple(sorted(by_bound))
    if not math.isinf(bounds[-1]):  # a truncated capture: no +Inf bucket, the count stands in
        by_bound[math.inf] = max(total_count, by_bound[bounds[-1]])
        bounds = (*bounds, math.inf)
    cumulative = tuple(by_bound[b] for b in bounds)
    return Histogram(bounds, cumulative, total_sum, total_count or cumulative[-1])
