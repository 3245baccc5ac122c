"""vLLM's paged KV cache: block size, KV cache groups, number of blocks, tokens and concurrency.

Sources (shared/reference/vllm-kv-arithmetic.md sections 1.1-1.5, read from vLLM v0.11/v0.33):

- page = one block of one layer: ``block_size x bytes_per_token_per_layer`` (attention) or the
  whole recurrent state (``MambaSpec``), padded to the attention page in hybrids;
- hybrid Mamba/GDN models raise the attention block size so one attention page holds a state:
  ``attn_block = 16 x cdiv(state_page, 16 x attn_bytes_per_token_per_layer)``
  (``HybridAttentionMambaModelConfig.verify_and_update_config``);
- layers of one type form groups of ``group_size = min(#layers per type)`` layers
  (``_get_kv_cache_groups_uniform_page_size``); one block id spans a group's layers, so
  ``num_blocks = available // page // group_size`` (``get_num_blocks``); a model with one layer
  type is one group of all its layers;
- a request of ``L = max_model_len`` tokens reserves, per group, ``cdiv(L, block)`` pages (full,
  MLA), ``cdiv(min(window - 1 + max_num_batched_tokens, L), block) + 1`` pages (sliding window)
  or one page (state); ``max_concurrency = num_blocks / Σ_groups pages`` — the figure vLLM logs
  as "Maximum concurrency for L tokens per request";
- "GPU KV cache size" tokens: ``num_blocks // num_groups x block_size`` (v0.11-v0.19) and
  ``int(max_concurrency x L)`` (v0.24 and later); for plain models both are the pool's capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

from servecap.core.kv import attention_bytes_per_token_per_layer, state_bytes_per_layer
from servecap.errors import InfeasibleError, ServecapError
from servecap.specs.dtypes import KvDtype
from servecap.specs.model import AttentionKind, LayerSpec, ModelSpec
from servecap.units import cdiv

HYBRID_BLOCK_ALIGN_TOKENS = 16  # vLLM v0.11: attention blocks of hybrids are multiples of 16 tokens
DEFAULT_BLOCK_SIZE = 16  # vLLM CacheConfig default on CUDA
MLA_BLOCK_SIZE = 64  # vLLM forces 64-token blocks for the FlashMLA backend


@dataclass(frozen=True, slots=True)
class KvGroup:
    kind: AttentionKind  # FULL, SLIDING, MLA, or MAMBA for every recurrent-state layer kind
    window_tokens: int | None
    num_layers: int  # real layers in the group (the last group of a type may be padded)

    def pages_reserved(self, max_model_len: int, block_size: int, max_num_batched_tokens: int) -> int:
        """Pages one request of ``max_model_len`` tokens reserves in one layer of this group."""
        if self.kind.holds_state or self.kind is AttentionKind.MAMBA:
            return 1
        if self.kind is AttentionKind.SLIDING:
            assert self.window_tokens is not None
            span = min(self.window_tokens - 1 + max_num_batched_tokens, max_model_len)
            return cdiv(span, block_size) + 1
        return cdiv(max_model_len, block_size)

    def pages_held(self, tokens: int, block_size: int) -> int:
        """Pages a running request holding ``tokens`` tokens occupies (blocks that slid out of
        the window are freed)."""
        if self.kind is AttentionKind.MAMBA:
            return 1
        if self.kind is AttentionKind.SLIDING:
            assert self.window_tokens is not None
            return min(cdiv(tokens, block_size), cdiv(self.window_tokens - 1, block_size) + 1)
        return cdiv(tokens, block_size)

    def pages_held_sum(self, lo_tokens: int, hi_tokens: int, block_size: int) -> int:
        """``Σ pages_held(t)`` over ``lo_tokens <= t < hi_tokens``, in closed form (the same integer
        as the sum: ``Σ_{t=1..x} cdiv(t, b) = b·q(q+1)/2 + r(q+1)`` with ``x = qb + r``; a
        sliding window caps the pages at ``cdiv(window - 1, b) + 1``)."""
        if hi_tokens <= lo_tokens:
            return 0
        if self.kind is AttentionKind.MAMBA:
            return hi_tokens - lo_tokens
        cap: int | None = None
        if self.kind is AttentionKind.SLIDING:
            assert self.window_tokens is not None
            cap = cdiv(self.window_tokens - 1, block_size) + 1
        return _capped_ceil_prefix(hi_tokens - 1, block_size, cap) - _capped_ceil_prefix(lo_tokens - 1, block_size, cap)


def _ceil_prefix(x: int, b: int) -> int:
    """``Σ_{t=1..x} cdiv(t, b)`` (0 for x <= 0)."""
    if x <= 0:
        return 0
    q, r = divmod(x, b)
    return b * q * (q + 1) // 2 + r * (q + 1)


def _capped_ceil_prefix(x: int, b: int, cap: int | None) -> int:
    """``Σ_{t=1..x} min(cdiv(t, b), cap)`` (``cap`` None: no cap)."""
    if cap is None or x <= cap * b:
        return _ceil_prefix(x, b)
    return _ceil_prefix(cap * b, b) + (x - cap * b) * cap


@dataclass(frozen=True, slots=True)
class KvLayout:
    """The KV pool's geometry on one GPU (one pipeline stage)."""

    block_size: int  # tokens per attention block
    page_bytes: int  # one block of one layer
    group_size: int  # layer slots per group: one block id spans this many layer pages
    groups: tuple[KvGroup, ...]
    state_page_bytes: int = 0  # unpadded recurrent-state page (0 when the model has none)

    @property
    def bytes_per_block(self) -> int:
        return self.page_bytes * self.group_size

    @property
    def state_padding_fraction(self) -> float:
        if not self.state_page_bytes:
            return 0.0
        return self.page_bytes / self.state_page_bytes - 1.0

    def num_blocks(self, available_bytes: int) -> int:
        """vLLM ``get_num_blocks``: ``available // page_size // group_size`` (never negative)."""
        return max(0, int(available_bytes) // self.page_bytes // self.group_size)

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        return sum(g.pages_reserved(max_model_len, self.block_size, max_num_batched_tokens) for g in self.groups)

    def blocks_held(self, tokens: int) -> int:
        """Blocks a running request with ``tokens`` tokens in context holds right now."""
        return sum(g.pages_held(tokens, self.block_size) for g in self.groups)

    def blocks_held_sum(self, lo_tokens: int, hi_tokens: int) -> int:
        """``Σ blocks_held(t)`` over ``lo_tokens <= t < hi_tokens`` (closed form per group)."""
        return sum(g.pages_held_sum(lo_tokens, hi_tokens, self.block_size) for g in self.groups)

    def kv_cache_tokens(self, num_blocks: int) -> int:
        """v0.11's "GPU KV cache size": ``num_blocks // num_groups x block_size``."""
        return num_blocks // len(self.groups) * self.block_size


def _type_key(layer: LayerSpec) -> tuple[AttentionKind, int | None]:
    if layer.mixer.holds_state:
        return (AttentionKind.MAMBA, None)
    return (layer.mixer, layer.window_tokens)


def kv_layout(
    model: ModelSpec,
    layers: tuple[LayerSpec, ...],
    *,
    tp: int,
    kv_dtype: KvDtype,
    block_size: int | None,
) -> KvLayout:
    """Group one stage's cache-holding layers as vLLM's hybrid allocator does."""
    holding = [layer for layer in layers if layer.mixer is not AttentionKind.NONE]
    if not holding:
        raise ServecapError("model", model.id, "has no attention or state layers to cache")
    counts: dict[tuple[AttentionKind, int | None], int] = {}
    for layer in holding:
        key = _type_key(layer)
        counts[key] = counts.get(key, 0) + 1

    attn_kinds = [k for k in counts if k[0] is not AttentionKind.MAMBA]
    per_token = {k: attention_bytes_per_token_per_layer(model, k[0], tp, kv_dtype) for k in attn_kinds}
    if len(set(per_token.values())) > 1:
        raise ServecapError(
            "model",
            model.id,
            "attention layers with different KV page sizes are not supported yet",
        )
    state_page = 0
    if (AttentionKind.MAMBA, None) in counts:
        assert model.state is not None
        state_page = state_bytes_per_layer(model.state, model.torch_dtype, tp)

    if block_size is None:
        block_size = MLA_BLOCK_SIZE if model.mla is not None else DEFAULT_BLOCK_SIZE
    if block_size <= 0:
        raise ServecapError("block_size", block_size, "must be a positive number of tokens")

    if per_token:
        attn_bytes = next(iter(per_token.values()))
        if state_page and state_page > block_size * attn_bytes:
            align = HYBRID_BLOCK_ALIGN_TOKENS
            block_size = align * cdiv(state_page, align * attn_bytes)
        page = block_size * attn_bytes
    else:  # a pure state model (Mamba): one page is one state
        page = state_page

    groups: tuple[KvGroup, ...]
    if len(counts) == 1:
        ((key, n),) = counts.items()
        groups = (KvGroup(key[0], key[1], n),)
        group_size = n
    else:
        group_size = min(counts.values())
        group_list = []
        for (kind, window), n in sorted(counts.items(), key=lambda kv: (kv[0][0].value, kv[0][1] or 0)):
            for start in range(0, n, group_size):
                group_list.append(KvGroup(kind, window, min(group_size, n - start)))
        groups = tuple(group_list)
    return KvLayout(block_size, page, group_size, groups, state_page)


@dataclass(frozen=True, slots=True)
class KvCapacity:
    """What vLLM would log for one GPU's (one stage's) KV pool."""

    layout: KvLayout
    available_bytes: int
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_cache_tokens: int  # v0.11 figure: num_blocks // num_groups x block_size
    kv_cache_tokens_at_max_len: int  # v0.24+ figure: int(max_concurrency x max_model_len)


def kv_capacity(
    layout: KvLayout, available_bytes: int, *, max_model_len: int, max_num_batched_tokens: int
) -> KvCapacity:
    blocks = layout.num_blocks(available_bytes)
    per_request = layout.blocks_per_request(max_model_len, max_num_batched_tokens)
    concurrency = blocks / per_request
    return KvCapacity(
        layout=layout,
        available_bytes=int(available_bytes),
        num_blocks=blocks,
        blocks_per_request=per_request,
        max_concurrency=concurrency,
        kv_cache_tokens=layout.kv_cache_tokens(blocks),
        kv_cache_tokens_at_max_len=int(concurrency * max_model_len),
    )


def require_one_request(cap: KvCapacity, max_model_len: int) -> None:
    """vLLM refuses to start when one request of max_model_len does not fit the pool."""
    if cap.available_bytes <= 0:
        raise InfeasibleError(
            "kv_budget_bytes",
            cap.available_bytes,
            "no memory left for the KV cache after weights, activations and runtime",
        )
    if cap.num_blocks < cap.blocks_per_request:
        need = cap.blocks_per_request * cap.layout.bytes_per_block
        raise InfeasibleError(
            "max_model_len",
            max_model_len,
            f"one request needs {cap.blocks_per_request} KV blocks ({need / 1e9:.2f} GB) "
            f"but the pool has {cap.num_blocks} ({cap.available_bytes / 1e9:.2f} GB)",
        )
