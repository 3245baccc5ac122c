"""Read a Hugging Face ``config.json`` (as the hub ships it) into a :class:`ModelSpec`.

Layer kinds follow what vLLM builds for each architecture (see docs/formulas.md, "Layer kinds"):

- ``layer_types`` lists (gpt-oss, Gemma 3, Qwen3.5, Granite 4.0-H) are used as given;
- Gemma 2: even layers slide (``is_sliding = not layer_idx % 2`` in transformers' Gemma2);
- Gemma 3 without ``layer_types``: layer ``i`` is global iff ``(i + 1) % sliding_window_pattern == 0``;
- Mistral/Phi-3 with a ``sliding_window``: every layer slides (vLLM's Attention layer falls back to
  the model-wide window when a model has no per-layer pattern);
- Qwen2/Qwen3 with ``use_sliding_window: false``: no layer slides;
- Qwen3-Next: layer ``i`` is full attention iff ``(i + 1) % full_attention_interval == 0``, the
  rest Gated DeltaNet;
- Nemotron-H: ``hybrid_override_pattern`` (M = Mamba2, * = attention, - = MLP-only layer);
- Jamba: attention iff ``i % attn_layer_period == attn_layer_offset``, MoE iff
  ``i % expert_layer_period == expert_layer_offset``, the rest Mamba1.

Errors name the config field and its value; defaults the hub file leaves to transformers are
taken from the architecture's config class and listed in ``ModelSpec.notes``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from servecap.errors import ServecapError
from servecap.specs.model import (
    AttentionKind,
    AttentionShape,
    LayerSpec,
    MambaState,
    MlaShape,
    MlpKind,
    ModelSpec,
    MoeShape,
)

# Fields transformers' config classes fill in when the hub file omits them (per model_type).
# Sources: transformers src/transformers/models/<arch>/configuration_<arch>.py.
_ARCH_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "vocab_size": 262_208,
        "max_position_embeddings": 131_072,
        "sliding_window_pattern": 6,
        "tie_word_embeddings": True,
        "head_dim": 256,
        "num_key_value_heads": 16,
    },
    "gemma2": {"tie_word_embeddings": True},
    "gemma3": {"tie_word_embeddings": True},
    "mistral": {"sliding_window": 4096},
    "qwen3_next": {"full_attention_interval": 4},
}

MAX_LAYERS = 4096
"""Most layers a config may declare (refused before any per-layer work)."""

_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16"}
_MULTIMODAL_KEEP = ("tie_word_embeddings", "torch_dtype", "dtype", "quantization_config")


def load_config_file(path: Path) -> dict[str, Any]:
    """Read and JSON-decode a config file through the one bounded loader (:mod:`servecap.files`)."""
    from servecap.files import load_document

    data: dict[str, Any] = load_document(path, "model", fmt="json")
    return data


def flatten_config(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Merge a multimodal config's ``text_config`` with the top-level fields that apply to it."""
    notes: list[str] = []
    text = raw.get("text_config")
    if isinstance(text, dict) and "num_hidden_layers" not in raw:
        cfg = dict(text)
        for key in _MULTIMODAL_KEEP:
            if key in raw and key not in cfg:
                cfg[key] = raw[key]
        cfg.setdefault("architectures", raw.get("architectures"))
        notes.append(
            "multimodal checkpoint: the language model (text_config) is planned; "
            "the vision encoder's weights are not counted"
        )
    else:
        cfg = dict(raw)
    model_type = str(cfg.get("model_type", ""))
    for key, value in _ARCH_DEFAULTS.get(model_type, {}).items():
        if key not in cfg:
            cfg[key] = value
            notes.append(f"{key}={value} taken from transformers' {model_type} defaults")
    return cfg, notes


class _Reader:
    """Typed field access on a config dict; every error names the field and its value."""

    def __init__(self, cfg: Mapping[str, Any], where: str) -> None:
        self.cfg = cfg
        self.where = where

    def _field(self, key: str) -> str:
        return f"{self.where}.{key}"

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def integer(self, key: str, default: int | None = None, *, minimum: int = 1, maximum: int | None = None) -> int:
        value = self.cfg.get(key)
        if value is None:
            if default is None:
                raise ServecapError(self._field(key), None, "required field is missing")
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
            raise ServecapError(self._field(key), value, "must be an integer")
        if value < minimum:
            raise ServecapError(self._field(key), value, f"must be >= {minimum}")
        if value > 10**12:
            raise ServecapError(self._field(key), value, "is absurdly large")
        if maximum is not None and value > maximum:
            raise ServecapError(self._field(key), value, f"is over the limit of {maximum:,}")
        return int(value)

    def opt_int(self, key: str, *, minimum: int = 1) -> int | None:
        return self.integer(key, minimum=minimum) if self.has(key) else None

    def flag(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ServecapError(self._field(key), value, "must be true or false")
        return value


def parse_config(raw: Mapping[str, Any], *, model_id: str, source: str = "") -> ModelSpec:
    """Build a ModelSpec from a Hugging Face config.json dict."""
    cfg, notes = flatten_config(raw)
    r = _Reader(cfg, "config.json")
    model_type = str(cfg.get("model_type") or "")
    if not model_type:
        raise ServecapError("config.json.model_type", None, "required field is missing")

    hidden = r.integer("hidden_size", default=r.opt_int("d_model"))
    # bounded before any per-layer work (the largest published models have fewer than 200 layers)
    num_layers = r.integer("num_hidden_layers", default=r.opt_int("n_layer"), maximum=MAX_LAYERS)
    vocab = r.integer("vocab_size")
    max_pos = r.integer("max_position_embeddings", default=r.opt_int("max_seq_len") or 0, minimum=0)
    if max_pos == 0:
        notes.append("no max_position_embeddings in config.json: pass --max-model-len")
    tie = r.flag("tie_word_embeddings", default=False)
    torch_dtype = _torch_dtype(cfg, notes)

    mixers = _mixer_kinds(cfg, r, model_type, num_layers)
    attention = _attention_shape(cfg, r, model_type, hidden) if _needs_attention(mixers) else None
    mla = _mla_shape(r) if AttentionKind.MLA in mixers else None
    state = _state_shape(cfg, r, model_type, hidden) if _needs_state(mixers) else None
    moe = _moe_shape(cfg, r, model_type)
    mlp_kinds = _mlp_kinds(cfg, r, model_type, num_layers, mixers, moe)
    window = _window(cfg, r, model_type) if AttentionKind.SLIDING in mixers else None
    layers = tuple(
        LayerSpec(mixer=m, mlp=mlp, window_tokens=window if m is AttentionKind.SLIDING else None)
        for m, mlp in zip(mixers, mlp_kinds, strict=True)
    )
    dense_inter = _dense_intermediate(r, model_type, moe, mlp_kinds)
    quant, scope = _quantization(cfg)
    if attention is not None and attention.num_heads % attention.num_kv_heads != 0:
        raise ServecapError(
            "config.json.num_key_value_heads",
            attention.num_kv_heads,
            f"must divide num_attention_heads={attention.num_heads}",
        )
    return ModelSpec(
        id=model_id,
        model_type=model_type,
        hidden_size=hidden,
        vocab_size=vocab,
        tie_word_embeddings=tie,
        max_position_embeddings=max_pos,
        torch_dtype=torch_dtype,
        layers=layers,
        attention=attention,
        mla=mla,
        state=state,
        dense_intermediate_size=dense_inter,
        moe=moe,
        mlp_gated=model_type != "nemotron_h",
        quantization=quant,
        quantized_scope=scope,
        norms_per_layer=4 if model_type.startswith(("gemma2", "gemma3")) else 2,
        vision_params=vision_params(raw, hidden),
        mtp_layers=r.integer("num_nextn_predict_layers", default=0, minimum=0),
        source=source,
        notes=tuple(notes),
    )


def _torch_dtype(cfg: Mapping[str, Any], notes: list[str]) -> str:
    value = cfg.get("torch_dtype") or cfg.get("dtype")
    if value is None:
        notes.append("no torch_dtype in config.json: weights assumed bf16")
        return "bf16"
    key = str(value).replace("torch.", "")
    if key not in _TORCH_DTYPES:
        raise ServecapError("config.json.torch_dtype", value, "expected bfloat16, float16 or float32")
    return _TORCH_DTYPES[key]


def _needs_attention(mixers: list[AttentionKind]) -> bool:
    return any(m in (AttentionKind.FULL, AttentionKind.SLIDING) for m in mixers)


def _needs_state(mixers: list[AttentionKind]) -> bool:
    return any(m.holds_state for m in mixers)


_LAYER_TYPE_NAMES = {
    "full_attention": AttentionKind.FULL,
    "attention": AttentionKind.FULL,
    "sliding_attention": AttentionKind.SLIDING,
    "linear_attention": AttentionKind.LINEAR,
    "mamba": AttentionKind.MAMBA,
}


def _mixer_kinds(cfg: Mapping[str, Any], r: _Reader, model_type: str, num_layers: int) -> list[AttentionKind]:
    if model_type in ("deepseek_v2", "deepseek_v3", "kimi_k2") or r.has("kv_lora_rank"):
        return [AttentionKind.MLA] * num_layers
    if model_type in ("mamba", "mamba2", "falcon_mamba"):
        return [AttentionKind.MAMBA] * num_layers
    layer_types = cfg.get("layer_types")
    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != num_layers:
            raise ServecapError(
                "config.json.layer_types",
                layer_types if not isinstance(layer_types, list) else f"<{len(layer_types)} items>",
                f"must list one type for each of the {num_layers} layers",
            )
        kinds = []
        for item in layer_types:
            if item not in _LAYER_TYPE_NAMES:
                raise ServecapError("config.json.layer_types", item, "unknown layer type")
            kinds.append(_LAYER_TYPE_NAMES[item])
        return kinds
    if model_type == "nemotron_h":
        pattern = str(cfg.get("hybrid_override_pattern") or "")
        if len(pattern) != num_layers or set(pattern) - set("M*-E"):
            raise ServecapError(
                "config.json.hybrid_override_pattern",
                pattern,
                f"must have {num_layers} characters from M, *, -, E",
            )
        table = {"M": AttentionKind.MAMBA, "*": AttentionKind.FULL, "-": AttentionKind.NONE, "E": AttentionKind.NONE}
        return [table[c] for c in pattern]
    if model_type == "jamba":
        period = r.integer("attn_layer_period", default=8)
        offset = r.integer("attn_layer_offset", default=4, minimum=0)
        return [AttentionKind.FULL if i % period == offset else AttentionKind.MAMBA for i in range(num_layers)]
    if model_type == "qwen3_next":
        interval = r.integer("full_attention_interval")
        return [AttentionKind.FULL if (i + 1) % interval == 0 else AttentionKind.LINEAR for i in range(num_layers)]
    if model_type == "gemma2":
        return [AttentionKind.SLIDING if i % 2 == 0 else AttentionKind.FULL for i in range(num_layers)]
    if model_type in ("gemma3_text", "gemma3"):
        every = r.integer("sliding_window_pattern")
        return [AttentionKind.FULL if (i + 1) % every == 0 else AttentionKind.SLIDING for i in range(num_layers)]
    if model_type.startswith("qwen") and not r.flag("use_sliding_window", default=False):
        return [AttentionKind.FULL] * num_layers
    if r.has("sliding_window"):
        window = r.integer("sliding_window")
        max_pos = r.integer("max_position_embeddings", default=0, minimum=0)
        if max_pos == 0 or window < max_pos:
            return [AttentionKind.SLIDING] * num_layers
    return [AttentionKind.FULL] * num_layers


def _window(cfg: Mapping[str, Any], r: _Reader, model_type: str) -> int:
    if not r.has("sliding_window"):
        raise ServecapError("config.json.sliding_window", None, "sliding-window layers need a sliding_window size")
    return r.integer("sliding_window")


def _attention_shape(cfg: Mapping[str, Any], r: _Reader, model_type: str, hidden: int) -> AttentionShape:
    heads = r.integer("num_attention_heads", default=r.opt_int("n_head"))
    kv_heads = r.integer("num_key_value_heads", default=heads)
    head_dim = r.opt_int("head_dim") or r.opt_int("attention_head_dim")
    if head_dim is None:
        if hidden % heads:
            raise ServecapError(
                "config.json.num_attention_heads",
                heads,
                f"does not divide hidden_size={hidden} and no head_dim is given",
            )
        head_dim = hidden // heads
    qwen2_family = model_type in ("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl")
    attention_bias = r.flag("attention_bias", default=False)
    return AttentionShape(
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        qkv_bias=attention_bias or qwen2_family,
        o_bias=attention_bias and model_type == "gpt_oss",
        output_gate=model_type == "qwen3_next" or r.flag("attn_output_gate", default=False),
        qk_norm=model_type.startswith(("qwen3", "gemma3")),
        sinks=model_type == "gpt_oss",
    )


def _mla_shape(r: _Reader) -> MlaShape:
    return MlaShape(
        num_heads=r.integer("num_attention_heads"),
        q_lora_rank=r.opt_int("q_lora_rank"),
        kv_lora_rank=r.integer("kv_lora_rank"),
        qk_nope_head_dim=r.integer("qk_nope_head_dim"),
        qk_rope_head_dim=r.integer("qk_rope_head_dim"),
        v_head_dim=r.integer("v_head_dim"),
    )


def _state_shape(cfg: Mapping[str, Any], r: _Reader, model_type: str, hidden: int) -> MambaState:
    ssm_dtype = cfg.get("mamba_ssm_dtype")
    ssm = _TORCH_DTYPES.get(str(ssm_dtype)) if ssm_dtype else None
    if r.has("linear_num_value_heads"):  # Gated DeltaNet (Qwen3-Next, Qwen3.5)
        nk, dk = r.integer("linear_num_key_heads"), r.integer("linear_key_head_dim")
        nv, dv = r.integer("linear_num_value_heads"), r.integer("linear_value_head_dim")
        kernel = r.integer("linear_conv_kernel_dim")
        conv = 2 * nk * dk + nv * dv
        # in_proj_qkvz + in_proj_ba + conv1d + dt_bias + A_log + norm + out_proj
        params = hidden * (2 * nk * dk + 2 * nv * dv) + hidden * 2 * nv + conv * kernel
        params += 2 * nv + dv + nv * dv * hidden
        return MambaState("gdn", conv, kernel, nv, dv, dk, ssm, params)
    if model_type == "jamba" or r.has("mamba_d_state"):  # Mamba1
        expand = r.integer("mamba_expand", default=2)
        d_inner = expand * hidden
        d_state = r.integer("mamba_d_state", default=16)
        d_conv = r.integer("mamba_d_conv", default=4)
        dt_rank = r.integer("mamba_dt_rank", default=-(-hidden // 16))
        conv_bias = r.flag("mamba_conv_bias", default=True)
        proj_bias = r.flag("mamba_proj_bias", default=False)
        params = hidden * 2 * d_inner + d_inner * d_conv + (d_inner if conv_bias else 0)
        params += d_inner * (dt_rank + 2 * d_state) + dt_rank * d_inner + d_inner
        params += d_inner * d_state + d_inner + d_inner * hidden
        params += (2 * d_inner + hidden) if proj_bias else 0
        params += dt_rank + 2 * d_state  # dt/B/C layernorms (Jamba)
        return MambaState("mamba1", d_inner, d_conv, d_inner, 1, d_state, ssm, params)
    # Mamba2 (Nemotron-H, Granite 4.0-H, Mamba-2)
    n_heads = r.integer("mamba_num_heads", default=r.opt_int("mamba_n_heads"))
    head_dim = r.integer("mamba_head_dim", default=r.opt_int("mamba_d_head"))
    d_state = r.integer("ssm_state_size", default=r.opt_int("mamba_d_state"))
    n_groups = r.integer("n_groups", default=r.opt_int("mamba_n_groups"))
    kernel = r.integer("conv_kernel", default=r.opt_int("mamba_d_conv"))
    d_inner = n_heads * head_dim
    conv = d_inner + 2 * n_groups * d_state
    conv_bias = r.flag("use_conv_bias", default=r.flag("mamba_conv_bias", default=True))
    params = hidden * (2 * d_inner + 2 * n_groups * d_state + n_heads)
    params += conv * kernel + (conv if conv_bias else 0) + 3 * n_heads + d_inner
    params += d_inner * hidden
    return MambaState("mamba2", conv, kernel, n_heads, head_dim, d_state, ssm, params)


def _moe_shape(cfg: Mapping[str, Any], r: _Reader, model_type: str) -> MoeShape | None:
    num_experts = r.opt_int("n_routed_experts") or r.opt_int("num_local_experts") or r.opt_int("num_experts")
    if not num_experts or num_experts <= 1:
        return None
    per_token = r.integer("num_experts_per_tok", default=r.opt_int("experts_per_token"))
    if per_token > num_experts:
        raise ServecapError(
            "config.json.num_experts_per_tok", per_token, f"exceeds the number of experts ({num_experts})"
        )
    expert_inter = r.opt_int("moe_intermediate_size") or r.integer("intermediate_size")
    shared_n = r.integer("n_shared_experts", default=0, minimum=0)
    shared_inter = shared_n * expert_inter
    gate = False
    if r.has("shared_expert_intermediate_size"):
        shared_inter = r.integer("shared_expert_intermediate_size", minimum=0)
        shared_n = 1 if shared_inter else 0
        gate = True
    return MoeShape(
        num_experts=num_experts,
        experts_per_token=per_token,
        expert_intermediate_size=expert_inter,
        num_shared_experts=shared_n,
        shared_intermediate_size=shared_inter,
        shared_expert_gate=gate,
        expert_bias=model_type == "gpt_oss",
        router_bias=model_type == "gpt_oss",
    )


def _mlp_kinds(
    cfg: Mapping[str, Any],
    r: _Reader,
    model_type: str,
    num_layers: int,
    mixers: list[AttentionKind],
    moe: MoeShape | None,
) -> list[MlpKind]:
    if model_type in ("mamba", "mamba2", "falcon_mamba"):
        return ["none"] * num_layers
    if model_type == "nemotron_h":
        return ["dense" if m is AttentionKind.NONE else "none" for m in mixers]
    if moe is None:
        return ["dense"] * num_layers
    if model_type == "jamba":
        period = r.integer("expert_layer_period", default=2)
        offset = r.integer("expert_layer_offset", default=1, minimum=0)
        return ["moe" if i % period == offset else "dense" for i in range(num_layers)]
    if r.has("first_k_dense_replace") or model_type.startswith("deepseek"):
        first_dense = r.integer("first_k_dense_replace", default=0, minimum=0)
        freq = r.integer("moe_layer_freq", default=1)
        return ["moe" if i >= first_dense and i % freq == 0 else "dense" for i in range(num_layers)]
    only_dense = cfg.get("mlp_only_layers") or []
    if not isinstance(only_dense, list):
        raise ServecapError("config.json.mlp_only_layers", only_dense, "must be a list of layer indices")
    step = r.integer("decoder_sparse_step", default=1)
    return ["dense" if (i in only_dense or (i + 1) % step != 0) else "moe" for i in range(num_layers)]


def _dense_intermediate(r: _Reader, model_type: str, moe: MoeShape | None, mlp_kinds: list[MlpKind]) -> int:
    if "dense" not in mlp_kinds:
        return 0
    return r.integer("intermediate_size")


def _quantization(cfg: Mapping[str, Any]) -> tuple[str | None, Literal["linear", "experts"]]:
    q = cfg.get("quantization_config")
    if not isinstance(q, dict):
        return None, "linear"
    method = str(q.get("quant_method", "")).lower()
    algo = str(q.get("quant_algo", "")).upper()
    excluded = " ".join(str(m) for m in q.get("modules_to_not_convert") or [])
    scope: Literal["linear", "experts"] = "experts" if "self_attn" in excluded else "linear"
    if method == "mxfp4":
        return "mxfp4", scope
    if method in ("fp8", "fbgemm_fp8") or algo == "FP8":
        return "fp8", scope
    if algo in ("NVFP4", "FP4"):
        return "nvfp4", scope
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        return ("int4" if int(q.get("bits", 4)) == 4 else "int8"), scope
    if method == "bitsandbytes":
        return ("int4" if q.get("load_in_4bit") else "int8"), scope
    if method == "compressed-tensors":
        text = json.dumps(q).lower()
        if '"num_bits": 4' in text:
            return "int4", scope
        return ("fp8" if '"type": "float"' in text else "int8"), scope
    return None, "linear"


def vision_params(raw: Mapping[str, Any], text_hidden: int) -> int:
    """Parameters of a multimodal checkpoint's ViT encoder and projector (0 for text-only).

    ViT layer (SigLIP, arXiv:2303.15343; Qwen-VL's vision blocks): q/k/v/o ``4 (h^2 + h)``,
    MLP ``2 h I + I + h``, two LayerNorms ``4 h``. Gemma 3: patch conv ``3 p^2 h + h``, learned
    positions ``(image/p)^2 h``, post-LN ``2 h``, projector ``h x text_hidden`` + norm ``h``.
    Qwen3.5 (Qwen3-VL style): 3D patch conv ``c t p^2 h + h``, ``num_position_embeddings x h``
    positions, and a patch merger of LN ``2h`` + ``(h m^2)^2 + h m^2`` + ``h m^2 x out + out``
    (m = spatial_merge_size).
    """
    v = raw.get("vision_config")
    if not isinstance(v, dict):
        return 0
    r = _Reader(v, "config.json.vision_config")
    h = r.integer("hidden_size")
    inter = r.integer("intermediate_size")
    layers = r.integer("num_hidden_layers", default=r.opt_int("depth"), maximum=MAX_LAYERS)
    patch = r.integer("patch_size")
    per_layer = 4 * (h * h + h) + 2 * h * inter + inter + h + 4 * h
    total = layers * per_layer
    if r.has("out_hidden_size"):  # Qwen3-VL / Qwen3.5 vision tower
        channels = r.integer("in_channels", default=3)
        temporal = r.integer("temporal_patch_size", default=1)
        merge = r.integer("spatial_merge_size", default=1)
        out = r.integer("out_hidden_size")
        merged = h * merge * merge
        total += channels * temporal * patch * patch * h + h
        total += r.integer("num_position_embeddings", default=0, minimum=0) * h
        total += 2 * h + merged * merged + merged + merged * out + out
        return total
    image = r.integer("image_size")
    total += 3 * patch * patch * h + h + (image // patch) ** 2 * h + 2 * h
    total += h * text_hidden + h  # Gemma 3 multimodal projector and its soft-embedding norm
    return total
