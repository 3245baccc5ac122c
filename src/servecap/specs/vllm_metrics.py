"""vLLM's Prometheus metrics: names, types, label names, histogram buckets, and the vLLM
versions in which each is exposed. The one place for them: the emulator emits them, the
monitor reads them.

Sources (vLLM's own code, read for this table):

- V1 engine, ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger.__init__`` and ``record``)
  in the 0.8/0.9 line (labels ``model_name`` only, ``vllm:gpu_cache_usage_perc`` and
  ``vllm:gpu_prefix_cache_*``), the 0.10/0.11 line (``engine`` label added,
  ``vllm:kv_cache_usage_perc`` and ``vllm:prefix_cache_*`` beside the old names: "Deprecated
  in 0.9.2 - Renamed as vllm:kv_cache_usage_perc ... With 0.11.x you can enable with
  --show-hidden-metrics-for-version=0.10 ... remove in 0.12.0"; "Deprecated in 0.11 - Renamed
  as vllm:inter_token_latency_seconds") and the 0.12 line (``time_per_output_token_seconds``
  only with ``--show-hidden-metrics-for-version=0.11``, "remove in 0.13.0";
  ``vllm:request_time_per_output_token_seconds`` added);
- V0 engine, ``vllm/engine/metrics.py`` (``Metrics``): the same gauge, counter and latency
  histogram names (``vllm:gpu_cache_usage_perc``, ``vllm:time_per_output_token_seconds``,
  ``vllm:num_preemptions_total``) plus ``vllm:num_requests_swapped`` and
  ``vllm:cpu_cache_usage_perc``, gone with V0.

Conventions of the exposition (prometheus_client's): a counter declared as ``vllm:prompt_tokens``
is exposed as the sample ``vllm:prompt_tokens_total`` under ``# TYPE vllm:prompt_tokens counter``
(V0 declared some names with the ``_total`` already; the client strips it, so the exposition is
the same); a histogram ``X`` is exposed as ``X_bucket{le=...}``, ``X_sum`` and ``X_count``.
:attr:`MetricSpec.name` is the family name as ``prometheus_client.parser`` reports it.

Versions are strings like ``"0.11"``; ``since=None`` means "as far back as V1's and V0's
metrics go" and ``until=None`` "still exposed by default in the newest version read" (0.12).
``since`` is the first version in which the files read show the metric (an earlier release
may have it too).

Buckets are V1's. Early V0 releases (0.4's ``vllm/engine/metrics.py``) had shorter sets
(TTFT up to 10 s, time per output token up to 2.5 s, e2e latency 1 to 60 s), so a reader of a
live server takes the bucket bounds from its exposition (the ``le`` labels), never from here.
Pure data: no prometheus_client here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricKind = Literal["gauge", "counter", "histogram"]

# ---- label names ---------------------------------------------------------------------------

MODEL_NAME = "model_name"  # every vllm: series; the served model name
ENGINE = "engine"  # the engine-core index ("0" without data parallelism); V1, in 0.10's loggers.py on
FINISHED_REASON = "finished_reason"  # vllm:request_success only

BASE_LABELS: tuple[str, ...] = (MODEL_NAME, ENGINE)
"""Labels of every per-engine series in current vLLM (``labelnames = ["model_name", "engine"]``)."""

FINISH_REASONS: tuple[str, ...] = ("stop", "length", "abort")
"""``vllm.v1.engine.FinishReason`` as ``str(reason)``: every value gets a series from the start."""

CACHE_CONFIG_LABELS: tuple[str, ...] = (
    "block_size",
    "cache_dtype",
    "enable_prefix_caching",
    "gpu_memory_utilization",
    "num_gpu_blocks",
    ENGINE,
)
"""The labels of ``vllm:cache_config_info`` that a reader can rely on and that the emulator
sets (vLLM sets one label per ``CacheConfig`` field, all as strings, plus ``engine``; the field
set changes between versions, these five are in every version read)."""

# ---- bucket sets ---------------------------------------------------------------------------

TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
"""``vllm:time_to_first_token_seconds`` (22 bounds; note: no 2.0)."""

TOKEN_LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
"""Inter-token latency, its older name, and the per-request mean time per output token (19)."""

REQUEST_LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
"""``request_latency_buckets``: e2e, queue, inference, prefill and decode times (21)."""

ITERATION_TOKENS_BUCKETS: tuple[float, ...] = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
"""``vllm:iteration_tokens_total``: prompt + generation tokens of one engine step."""

PARAMS_N_BUCKETS: tuple[float, ...] = (1, 2, 5, 10, 20)


def buckets_1_2_5(max_value: int) -> tuple[float, ...]:
    """vLLM's ``build_1_2_5_buckets(max_model_len)``: 1, 2, 5, 10, 20, 50, ... up to and
    including ``max_value`` (token-count histograms). ``buckets_1_2_5(100)`` is
    ``(1, 2, 5, 10, 20, 50, 100)``."""
    out: list[float] = []
    scale = 1
    while True:
        for m in (1, 2, 5):
            v = m * scale
            if v > max_value:
                return tuple(out)
            out.append(v)
        scale *= 10


# ---- the metrics ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One vLLM metric family.

    ``buckets``: the histogram's upper bounds (``+Inf`` implied); empty for gauges, counters
    and the token-count histograms whose bounds depend on ``max_model_len`` (``buckets_by_len``).
    ``since``/``until``: first vLLM version exposing it by default / first that no longer does.
    ``replaced_by``: the newer name carrying the same value (aliases of one quantity).
    """

    name: str
    kind: MetricKind
    documentation: str
    labels: tuple[str, ...] = BASE_LABELS
    buckets: tuple[float, ...] = ()
    buckets_by_len: bool = False
    since: str | None = None
    until: str | None = None
    replaced_by: str | None = None

    @property
    def sample_name(self) -> str:
        """The name of the value sample: ``<name>_total`` for a counter, ``<name>_count`` for
        a histogram (its observation count), the name itself for a gauge."""
        if self.kind == "counter":
            return self.name + "_total"
        if self.kind == "histogram":
            return self.name + "_count"
        return self.name

    def buckets_for(self, max_model_len: int) -> tuple[float, ...]:
        return buckets_1_2_5(max_model_len) if self.buckets_by_len else self.buckets


def _gauge(
    name: str,
    doc: str,
    *,
    labels: tuple[str, ...] = BASE_LABELS,
    since: str | None = None,
    until: str | None = None,
    replaced_by: str | None = None,
) -> MetricSpec:
    return MetricSpec(name, "gauge", doc, labels, since=since, until=until, replaced_by=replaced_by)


def _counter(
    name: str,
    doc: str,
    *,
    labels: tuple[str, ...] = BASE_LABELS,
    since: str | None = None,
    until: str | None = None,
    replaced_by: str | None = None,
) -> MetricSpec:
    return MetricSpec(name, "counter", doc, labels, since=since, until=until, replaced_by=replaced_by)


def _hist(
    name: str,
    doc: str,
    buckets: tuple[float, ...] = (),
    *,
    buckets_by_len: bool = False,
    since: str | None = None,
    until: str | None = None,
    replaced_by: str | None = None,
) -> MetricSpec:
    return MetricSpec(name, "histogram", doc, BASE_LABELS, buckets, buckets_by_len, since, until, replaced_by)


# scheduler state
NUM_REQUESTS_RUNNING = _gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
NUM_REQUESTS_WAITING = _gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
KV_CACHE_USAGE_PERC = _gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", since="0.9.2")
GPU_CACHE_USAGE_PERC = _gauge(
    "vllm:gpu_cache_usage_perc",
    "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
    until="0.11",
    replaced_by=KV_CACHE_USAGE_PERC.name,
)
CACHE_CONFIG_INFO = _gauge(
    "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=CACHE_CONFIG_LABELS
)

# counters
PROMPT_TOKENS = _counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
GENERATION_TOKENS = _counter("vllm:generation_tokens", "Number of generation tokens processed.")
NUM_PREEMPTIONS = _counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
REQUEST_SUCCESS = _counter(
    "vllm:request_success", "Count of successfully processed requests.", labels=(*BASE_LABELS, FINISHED_REASON)
)
PREFIX_CACHE_QUERIES = _counter(
    "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", since="0.9.2"
)
PREFIX_CACHE_HITS = _counter(
    "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", since="0.9.2"
)
GPU_PREFIX_CACHE_QUERIES = _counter(
    "vllm:gpu_prefix_cache_queries",
    "GPU prefix cache queries, in terms of number of queried tokens. DEPRECATED: Use vllm:prefix_cache_queries instead.",
    since="0.8",
    until="0.11",
    replaced_by=PREFIX_CACHE_QUERIES.name,
)
GPU_PREFIX_CACHE_HITS = _counter(
    "vllm:gpu_prefix_cache_hits",
    "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.",
    since="0.8",
    until="0.11",
    replaced_by=PREFIX_CACHE_HITS.name,
)

# histograms of counts
ITERATION_TOKENS = _hist(
    "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_TOKENS_BUCKETS
)
REQUEST_PROMPT_TOKENS = _hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", buckets_by_len=True)
REQUEST_GENERATION_TOKENS = _hist(
    "vllm:request_generation_tokens", "Number of generation tokens processed.", buckets_by_len=True
)
REQUEST_MAX_NUM_GENERATION_TOKENS = _hist(
    "vllm:request_max_num_generation_tokens",
    "Histogram of maximum number of requested generation tokens.",
    buckets_by_len=True,
)
REQUEST_PARAMS_N = _hist("vllm:request_params_n", "Histogram of the n request parameter.", PARAMS_N_BUCKETS)
REQUEST_PARAMS_MAX_TOKENS = _hist(
    "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", buckets_by_len=True
)

# histograms of times
TIME_TO_FIRST_TOKEN = _hist(
    "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS_S
)
INTER_TOKEN_LATENCY = _hist(
    "vllm:inter_token_latency_seconds",
    "Histogram of inter-token latency in seconds.",
    TOKEN_LATENCY_BUCKETS_S,
    since="0.11",
)
TIME_PER_OUTPUT_TOKEN = _hist(
    "vllm:time_per_output_token_seconds",
    "Histogram of time per output token in seconds. DEPRECATED: Use vllm:inter_token_latency_seconds instead.",
    TOKEN_LATENCY_BUCKETS_S,
    until="0.12",
    replaced_by=INTER_TOKEN_LATENCY.name,
)
"""Before 0.11 the inter-token latency itself (one observation per token after the first), not
a per-request mean; 0.11 exposes it beside its new name with identical observations."""
REQUEST_TIME_PER_OUTPUT_TOKEN = _hist(
    "vllm:request_time_per_output_token_seconds",
    "Histogram of time_per_output_token_seconds per request.",
    TOKEN_LATENCY_BUCKETS_S,
    since="0.12",
)
"""Per finished request: ``(last token - first token) / (generation tokens - 1)``."""
E2E_REQUEST_LATENCY = _hist(
    "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", REQUEST_LATENCY_BUCKETS_S
)
REQUEST_QUEUE_TIME = _hist(
    "vllm:request_queue_time_seconds",
    "Histogram of time spent in WAITING phase for request.",
    REQUEST_LATENCY_BUCKETS_S,
)
REQUEST_INFERENCE_TIME = _hist(
    "vllm:request_inference_time_seconds",
    "Histogram of time spent in RUNNING phase for request.",
    REQUEST_LATENCY_BUCKETS_S,
)
REQUEST_PREFILL_TIME = _hist(
    "vllm:request_prefill_time_seconds",
    "Histogram of time spent in PREFILL phase for request.",
    REQUEST_LATENCY_BUCKETS_S,
)
REQUEST_DECODE_TIME = _hist(
    "vllm:request_decode_time_seconds",
    "Histogram of time spent in DECODE phase for request.",
    REQUEST_LATENCY_BUCKETS_S,
)

# V0 only (gone with the V0 engine)
NUM_REQUESTS_SWAPPED = _gauge(
    "vllm:num_requests_swapped", "Number of requests swapped to CPU.", labels=(MODEL_NAME,), until="0.10"
)
CPU_CACHE_USAGE_PERC = _gauge(
    "vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", labels=(MODEL_NAME,), until="0.10"
)

# speculative decoding (vLLM V1 vllm/v1/spec_decode/metrics.py, SpecDecodingProm): per step,
# each decoding request that drafted adds one draft and k draft tokens; accepted tokens in total
# and by draft position (label "position", 0-based): accepted_per_pos[j] / num_drafts is the
# unconditional rate of position j (core/spec_decode.py)
SPEC_DECODE_NUM_DRAFTS = _counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
SPEC_DECODE_NUM_DRAFT_TOKENS = _counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.")
SPEC_DECODE_NUM_ACCEPTED_TOKENS = _counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.")
SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS = _counter(
    "vllm:spec_decode_num_accepted_tokens_per_pos",
    "Accepted tokens per draft position.",
    labels=(*BASE_LABELS, "position"),
)
SPEC_DECODE: tuple[MetricSpec, ...] = (
    SPEC_DECODE_NUM_DRAFTS,
    SPEC_DECODE_NUM_DRAFT_TOKENS,
    SPEC_DECODE_NUM_ACCEPTED_TOKENS,
    SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS,
)
"""Exposed only by a server running speculative decoding (kept apart from :data:`ALL`, the
series every server exposes)."""

# where prompt tokens' KV came from (exposed by recent vLLM only; kept apart from ALL: no release
# read carries them, so no version range is claimed; the help texts below are ours, not vLLM's)
SOURCE = "source"  # vllm:prompt_tokens_by_source's label
PROMPT_SOURCES: tuple[str, ...] = ("local_compute", "local_cache_hit", "external_kv_transfer")
"""``vllm:prompt_tokens_by_source``'s ``source`` values: tokens prefilled here, read from this
engine's prefix cache, and loaded through the KV connector (another node's prefill, a CPU/SSD
offload, LMCache...). vLLM PR #33290 ("[Metrics] Add labeled prompt token metrics for P/D
disaggregation", merged 2026-02-04 as commit 4403e3ed4c, ``vllm/v1/metrics/loggers.py`` and
``PromptTokenStats`` in ``vllm/v1/metrics/stats.py``); the three add up to the prompt tokens."""
PROMPT_TOKENS_BY_SOURCE = _counter(
    "vllm:prompt_tokens_by_source", "Prompt tokens by where their KV came from.", labels=(*BASE_LABELS, SOURCE)
)
PROMPT_TOKENS_CACHED = _counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).")
"""Same PR: local + external cached tokens, one less when a prompt was wholly cached (the engine
computes its last token)."""
EXTERNAL_PREFIX_CACHE_QUERIES = _counter(
    "vllm:external_prefix_cache_queries", "Prompt tokens looked up in the KV connector's cache."
)
EXTERNAL_PREFIX_CACHE_HITS = _counter("vllm:external_prefix_cache_hits", "Prompt tokens the KV connector's cache held.")
"""vLLM PR #26245 ("[Metrics] [KVConnector] Add connector prefix cache hit rate stats", merged
2025-10): the KV connector's own lookups, in tokens; since PR #30522 (2025-12) the queries are
only the tokens the local prefix cache missed (before, the whole prompt: double counting)."""
CACHE_SOURCES: tuple[MetricSpec, ...] = (
    PROMPT_TOKENS_BY_SOURCE,
    PROMPT_TOKENS_CACHED,
    EXTERNAL_PREFIX_CACHE_QUERIES,
    EXTERNAL_PREFIX_CACHE_HITS,
)

ALL: tuple[MetricSpec, ...] = (
    NUM_REQUESTS_RUNNING,
    NUM_REQUESTS_WAITING,
    KV_CACHE_USAGE_PERC,
    GPU_CACHE_USAGE_PERC,
    CACHE_CONFIG_INFO,
    PROMPT_TOKENS,
    GENERATION_TOKENS,
    NUM_PREEMPTIONS,
    REQUEST_SUCCESS,
    PREFIX_CACHE_QUERIES,
    PREFIX_CACHE_HITS,
    GPU_PREFIX_CACHE_QUERIES,
    GPU_PREFIX_CACHE_HITS,
    ITERATION_TOKENS,
    REQUEST_PROMPT_TOKENS,
    REQUEST_GENERATION_TOKENS,
    REQUEST_MAX_NUM_GENERATION_TOKENS,
    REQUEST_PARAMS_N,
    REQUEST_PARAMS_MAX_TOKENS,
    TIME_TO_FIRST_TOKEN,
    INTER_TOKEN_LATENCY,
    TIME_PER_OUTPUT_TOKEN,
    REQUEST_TIME_PER_OUTPUT_TOKEN,
    E2E_REQUEST_LATENCY,
    REQUEST_QUEUE_TIME,
    REQUEST_INFERENCE_TIME,
    REQUEST_PREFILL_TIME,
    REQUEST_DECODE_TIME,
    NUM_REQUESTS_SWAPPED,
    CPU_CACHE_USAGE_PERC,
)

BY_NAME: dict[str, MetricSpec] = {m.name: m for m in ALL}


def names_for(current: MetricSpec) -> tuple[str, ...]:
    """Family names carrying ``current``'s quantity, newest first: the name itself, then every
    older alias (``names_for(KV_CACHE_USAGE_PERC)`` is ``("vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc")``). A reader takes the first one a server exposes."""
    return (current.name, *(m.name for m in ALL if m.replaced_by == current.name))


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


def exposed_in(spec: MetricSpec, version: str) -> bool:
    """Whether vLLM ``version`` (e.g. ``"0.10.1"``) exposes ``spec`` by default."""
    v = _version_key(version)
    if spec.since is not None and v < _version_key(spec.since):
        return False
    return not (spec.until is not None and v >= _version_key(spec.until))
