"""Hypothesis strategies for hostile API bodies: file paths, NaN and infinity, huge numbers, wrong
types, deep nesting, unknown keys, dropped into otherwise valid bodies of every POST route."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

PATHS = (
    "/etc/passwd",
    "/etc/shadow",
    "README.md",
    "./config.json",
    "~/.ssh/id_rsa",
    "src/../../../../etc/shadow",
    "meta-llama/../../etc/hostname",
    "/proc/self/environ",
    "C:\\Windows\\win.ini",
    "upload:../../etc/passwd",
    "upload:0000000000000000",
    "file:///etc/passwd",
)

paths = st.one_of(
    st.sampled_from(PATHS),
    st.lists(st.sampled_from(["..", "etc", "passwd", "src", "~", ".", "config.json"]), min_size=1, max_size=8).map(
        "/".join
    ),
)
special_floats = st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, -1e308, 5e-324, -0.0])
huge_ints = st.sampled_from([2**31, 2**63, -(2**63), 10**30, 10**100, -1, 0])


def nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


scalars = st.one_of(
    paths,
    special_floats,
    huge_ints,
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(),
    st.booleans(),
    st.none(),
    st.text(max_size=40),
)
hostile_values = st.one_of(
    scalars,
    st.lists(scalars, max_size=5),
    st.dictionaries(st.text(max_size=10), scalars, max_size=5),
    st.integers(min_value=30, max_value=300).map(nested),  # deeper: raw text in the deep-nesting test
)

FLEET = {"pools": [{"name": "a", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "replicas": 2}]}
WORKLOAD = {
    "arrival": {"kind": "poisson", "rate_per_s": 2},
    "num_requests": 50,
    "prompt_tokens": 200,
    "output_tokens": 20,
}
PLAN = {"model": "meta-llama/Llama-3.1-8B", "candidates": [{"gpu": "H100"}], "traffic": {"peak_rps": 5}}
SMALL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 16,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
ENGINE = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}

AGENTIC_KEYS = (
    "sessions",
    "session_rate_per_s",
    "turns_mean",
    "system_prompts",
    "system_prompt_tokens",
    "first_prompt_tokens",
    "turn_new_tokens",
    "output_tokens",
    "turn_gap_s",
    "subagent_probability",
    "max_context_tokens",
    "block_tokens",
)
# route (and "#variant" for a second base body) -> (a valid body, where hostile values go: paths of keys into it)
ROUTES: dict[str, tuple[dict[str, Any], list[tuple[str | int, ...]]]] = {
    "/api/v1/plan": (
        ENGINE,
        [("model",), ("gpu",), ("max_model_len",), ("ttft_slo_ms",), ("duty_cycle",), ("tp",), ("rope_scaling",)],
    ),
    "/api/v1/compare": (
        {"model": "meta-llama/Llama-3.1-8B", "gpus": ["H100"]},
        [("model",), ("gpus",), ("gpus", 0), ("counts",), ("gpu_prices",), ("price_per_hour",)],
    ),
    "/api/v1/simulate": (
        {**ENGINE, "rate": 1, "num_requests": 10},
        [("model",), ("gpu",), ("rate",), ("num_requests",), ("duration_s",), ("users",), ("think_time_s",), ("cv",)],
    ),
    "/api/v1/capacity": ({**ENGINE, "duration_s": 10}, [("model",), ("target",), ("duration_s",), ("think_time_s",)]),
    "/api/v1/fleet/simulate": (
        {"fleet": FLEET, "workload": WORKLOAD},
        [
            ("fleet", "pools", 0, "model"),
            ("fleet", "pools", 0, "gpu"),
            ("fleet", "pools", 0, "gpu_file"),
            ("fleet", "pools", 0, "calibration"),
            ("fleet", "pools", 0, "replicas"),
            ("fleet", "router"),
            ("workload", "arrival"),
            ("workload", "arrival", "rate_per_s"),
            ("workload", "num_requests"),
            ("workload", "prompt_tokens"),
            ("workload", "duration_s"),
            ("workload", "users"),
            ("fidelity",),
        ],
    ),
    "/api/v1/fleet/plan": (
        {"plan": PLAN},
        [
            ("plan", "model"),
            ("plan", "candidates"),
            ("plan", "candidates", 0, "gpu"),
            ("plan", "candidates", 0, "model"),
            ("plan", "traffic", "peak_rps"),
            ("plan", "traffic", "workload"),
            ("plan", "small_model"),
            ("plan", "max_replicas"),
            ("plan", "max_window_requests"),
        ],
    ),
    # issue 31's fields: a trace sample's options, the KV tiers, the agentic generator, the tier levers
    "/api/v1/simulate#trace": (
        {**ENGINE, "trace": {"kind": "trace", "path": "sample:agentic"}, "cpu_kv_gib": 4},
        [
            ("trace", "path"),
            ("trace", "format"),
            ("trace", "time_scale"),
            ("trace", "start_s"),
            ("trace", "end_s"),
            ("trace", "trace_block_tokens"),
            ("cpu_kv_gib",),
            ("ssd_kv_gib",),
            ("remote_kv_tib",),
            ("kv_load",),
            ("kv_store",),
        ],
    ),
    "/api/v1/fleet/simulate#agentic": (
        {
            "fleet": {"pools": [{**FLEET["pools"][0], "cpu_kv_gib": 4, "remote_kv_tib": 1}]},
            "workload": {"arrival": {"kind": "agentic", "sessions": 3, "turns_mean": 2}, "num_requests": 20},
        },
        [
            *(("workload", "arrival", k) for k in AGENTIC_KEYS),
            ("fleet", "pools", 0, "cpu_kv_gib"),
            ("fleet", "pools", 0, "remote_kv_tib"),
            ("fleet", "pools", 0, "kv_load"),
            ("fleet", "pools", 0, "kv_store"),
        ],
    ),
    "/api/v1/fleet/plan#tiers": (
        {"plan": {**PLAN, "levers": ["cpu-tier", "shared-store"], "cpu_tier_gib": 64, "shared_store_tib": 1}},
        [("plan", "cpu_tier_gib"), ("plan", "shared_store_tib"), ("plan", "levers"), ("plan", "levers", 0)],
    ),
    "/api/v1/models/upload": (
        {"config": SMALL_CONFIG},
        [
            ("config",),
            ("config", "num_hidden_layers"),
            ("config", "hidden_size"),
            ("config", "num_key_value_heads"),
            ("config", "text_config"),
            ("config", "layer_types"),
        ],
    ),
}


def put(body: dict[str, Any], where: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(body))
    node = out
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    return out


@st.composite
def hostile_bodies(draw: st.DrawFn) -> tuple[str, bytes]:
    """(route, JSON bytes): a valid body with one value made hostile (or an unknown key added);
    NaN and infinity are written as JSON's common extensions (``NaN``, ``Infinity``)."""
    route = draw(st.sampled_from(sorted(ROUTES)))
    body, places = ROUTES[route]
    if draw(st.integers(0, 9)) == 0:
        hostile = put(body, (draw(st.text(min_size=1, max_size=12)),), draw(hostile_values))
    else:
        hostile = put(body, draw(st.sampled_from(places)), draw(hostile_values))
    return route.split("#")[0], json.dumps(hostile).encode()
