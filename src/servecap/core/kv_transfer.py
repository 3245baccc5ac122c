"""The KV cache crossing from a prefill replica to a decode replica: bytes and seconds.

Pure arithmetic, no I/O. Sources:

- **Bytes.** What crosses is exactly what the prefill replica's ranks hold for the prompt: each
  of its ``tp`` ranks sends its own shard (vLLM's NixlConnector reads the remote rank's blocks;
  SGLang's Mooncake / NIXL backends send each rank's KV pages), so the bytes are
  ``tp_prefill x kv_bytes_for_context(model, tp_prefill, kv_dtype, tokens)``
  (:func:`servecap.core.kv.kv_bytes_for_context`: per layer kind — full attention
  ``2 x kv_heads_per_rank x head_dim x dtype bytes`` per token, MLA's latent, sliding windows
  capped at the window, recurrent state per request — on one GPU). KV heads replicated across
  ranks (``tp > num_kv_heads``) are sent once per rank, as those connectors do.
  (docs.vllm.ai/en/latest/features/nixl_connector_usage/; SGLang docs,
  advanced_features/pd_disaggregation.md.)
- **Channels.** With one NIC per GPU (DGX H100: eight 400 Gb/s ConnectX-7, one per GPU; Mooncake
  (FAST'25) §4 runs its transfer engine over each GPU's RDMA NIC) the ranks' shards travel in
  parallel: ``channels = min(tp_prefill, tp_decode)``; a link of scope ``shared`` (one NIC or
  uplink for the node, or TCP through the host) has one channel.
- **TP mismatch.** With ``tp_prefill != tp_decode`` each rank's shard is cut into pieces for the
  other side's ranks (vLLM's NixlConnector supports a decode TP that is a multiple of the
  prefill TP by reading head slices; NVIDIA Dynamo's docs describe a KV layout transform on the
  receiving side): ``pieces per channel = ceil(max(tp) / min(tp))``, each paying the per-transfer
  overhead, and the received blocks are re-laid out in the decode GPUs' memory, one read and
  one write of each decode rank's share: ``relayout_s = 2 x bytes_per_decode_gpu / hbm_bw``.
- **Time on the link.** ``occupancy_s = pieces x overhead_s + bytes / (bandwidth x channels)``
  (a store-and-forward transfer at the link's rate, the alpha-beta model of DistServe (Zhong et
  al., OSDI'24) §3.3 and Splitwise (Patel et al., ISCA'24) §4.3); the request sees
  ``latency_s + occupancy_s + relayout_s``.
- **Layer-wise streaming.** Where the engine sends each layer's KV as soon as that layer is
  computed (Mooncake's layer-wise prefill, FAST'25 §5.2; vLLM-Ascend's layerwise KV pool;
  LMCache's layerwise mode), the transfer runs beside the prefill: of ``bytes`` only
  ``max(bytes / layers, bytes - bandwidth x channels x prefill_s)`` remain after the prefill
  ends (the last layer at least). vLLM's NixlConnector (pull after the prefill finished) and
  SGLang's PD mode (sends per chunk when the chunk finished) do not overlap within a chunk:
  ``streaming: false``.

Link kinds (bandwidth per channel, one direction; the latency and per-transfer overhead are
orders of magnitude to be calibrated, not vendor numbers): NVLink 4 on H100 SXM 900 GB/s
bidirectional per GPU -> 450 GB/s (NVIDIA H100 datasheet); InfiniBand NDR 400 Gb/s = 50 GB/s
per NIC (NVIDIA ConnectX-7 datasheet); RoCE 200 Gb/s = 25 GB/s; TCP over 25 Gb/s Ethernet =
3.125 GB/s (the cross-node network DistServe §3.3 discusses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servecap.core.kv import attention_bytes_per_token_per_layer, kv_bytes_per_token, state_bytes_per_request
from servecap.errors import ServecapError
from servecap.specs.dtypes import KvDtype
from servecap.specs.model import AttentionKind, ModelSpec


@dataclass(frozen=True, slots=True)
class LinkKind:
    name: str
    bandwidth_bytes_s: float  # one channel, one direction
    latency_s: float
    overhead_s: float  # per transfer (per piece), the link busy for it
    about: str


LINK_KINDS: dict[str, LinkKind] = {
    "nvlink": LinkKind("nvlink", 450e9, 2e-6, 20e-6, "NVLink 4 within a node (H100 SXM: 900 GB/s bidirectional)"),
    "infiniband": LinkKind("infiniband", 50e9, 5e-6, 100e-6, "InfiniBand NDR 400 Gb/s, one NIC per GPU"),
    "roce": LinkKind("roce", 25e9, 10e-6, 150e-6, "RoCE v2 at 200 Gb/s, one NIC per GPU"),
    "tcp": LinkKind("tcp", 3.125e9, 50e-6, 1e-3, "TCP over 25 Gb/s Ethernet"),
}


def link_kind(name: str) -> LinkKind:
    kind = LINK_KINDS.get(name)
    if kind is None:
        from servecap.errors import did_you_mean

        raise ServecapError("kv_link.kind", name, f"one of {', '.join(LINK_KINDS)}" + did_you_mean(name, LINK_KINDS))
    return kind


@dataclass(frozen=True, slots=True)
class TransferShape:
    """One request's KV transfer, before any queueing: what occupies the link and what the
    request waits for beside it."""

    bytes: float  # sent over the link (before streaming overlap)
    channels: int
    pieces: int  # transfers per channel (TP mismatch cuts shards into pieces)
    relayout_s: float  # on the decode side, after the last byte arrived


def transfer_shape(
    prefill_bytes_per_gpu: float,
    tp_prefill: int,
    tp_decode: int,
    decode_bytes_per_gpu: float,
    decode_hbm_bytes_s: float,
    *,
    shared: bool = False,
) -> TransferShape:
    """The bytes, channels, pieces and re-layout time of one transfer (see the module doc)."""
    if tp_prefill < 1 or tp_decode < 1:
        raise ServecapError("tp", (tp_prefill, tp_decode), "must be >= 1")
    lo, hi = min(tp_prefill, tp_decode), max(tp_prefill, tp_decode)
    relayout = 0.0
    if tp_prefill != tp_decode:
        relayout = 2.0 * decode_bytes_per_gpu / decode_hbm_bytes_s if decode_hbm_bytes_s > 0 else 0.0
    return TransferShape(
        bytes=float(prefill_bytes_per_gpu) * tp_prefill,
        channels=1 if shared else lo,
        pieces=-(-hi // lo),
        relayout_s=relayout,
    )


def exposed_bytes(total_bytes: float, layers: int, rate_bytes_s: float, prefill_s: float) -> float:
    """Bytes still to send when a layer-wise streamed prefill ends: the overlap with the
    prefill's ``prefill_s`` at ``rate_bytes_s``, but never less than the last layer's share."""
    if layers < 1:
        raise ServecapError("layers", layers, "must be >= 1")
    return max(total_bytes / layers, total_bytes - rate_bytes_s * max(0.0, prefill_s))


def occupancy_s(send_bytes: float, shape: TransferShape, bandwidth_bytes_s: float, overhead_s: float) -> float:
    """Seconds one transfer keeps its link busy: per-piece overheads plus bytes at the rate."""
    if not bandwidth_bytes_s > 0 or not math.isfinite(bandwidth_bytes_s):
        raise ServecapError("kv_link.bandwidth", bandwidth_bytes_s, "must be a finite number > 0")
    return shape.pieces * overhead_s + send_bytes / (bandwidth_bytes_s * shape.channels)


@dataclass(frozen=True, slots=True)
class KvFootprint:
    """What one replica holds per request on one GPU, as :func:`servecap.core.kv.kv_bytes_for_context`
    computes it, kept as numbers (a pool's spec carries it; no model object needed): full and
    MLA layers per token, sliding-window layers per token up to their window, recurrent state
    per request; with the replica's TP, layer count and HBM bandwidth (for the re-layout)."""

    tp: int
    bytes_per_token_per_gpu: int
    windows: tuple[tuple[int, int], ...] = ()  # (window tokens, bytes per token) per sliding layer
    state_bytes_per_gpu: int = 0
    num_layers: int = 1
    hbm_bytes_s: float = 0.0

    def bytes_per_gpu(self, tokens: int) -> float:
        total = self.bytes_per_token_per_gpu * tokens + self.state_bytes_per_gpu
        for window, per_token in self.windows:
            total += min(tokens, window) * per_token
        return float(total)


def kv_footprint(model: ModelSpec, tp: int, kv_dtype: KvDtype, hbm_bytes_s: float) -> KvFootprint:
    """The footprint of ``model`` at ``tp`` and ``kv_dtype``."""
    windows = tuple(
        (layer.window_tokens, attention_bytes_per_token_per_layer(model, layer.mixer, tp, kv_dtype))
        for layer in model.layers
        if layer.mixer is AttentionKind.SLIDING and layer.window_tokens is not None
    )
    return KvFootprint(
        tp=tp,
        bytes_per_token_per_gpu=kv_bytes_per_token(model, tp, kv_dtype),
        windows=windows,
        state_bytes_per_gpu=state_bytes_per_request(model, tp),
        num_layers=max(1, model.num_layers),
        hbm_bytes_s=hbm_bytes_s,
    )
