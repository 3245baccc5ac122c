"""The one seam an operation's time comes through: measured kernel tables where they cover the
shape, the roofline with the fitted efficiencies elsewhere.

:class:`RooflineTimer` (Williams, Waterman and Patterson, "Roofline", CACM 2009): an operation
moving ``B`` bytes and computing ``F`` FLOPs takes ``max(B / (bw x eff_bw), F / (peak x eff_c))``,
at the GPU's catalog peaks and servecap's fitted efficiencies (``specs.perf.Efficiency``); a ring
all-reduce of ``S`` bytes over ``g`` GPUs moves ``2 (g - 1) / g x S`` bytes over each GPU's link
(Patarasuk and Yuan 2009) plus a fixed latency.

:class:`TableTimer`: NVIDIA's kernel timings shipped with AIConfigurator 0.12.0, reduced to
:mod:`servecap.specs.kernel_timings` by ``benchmarks/kernel_tables.py``:

- a GEMM of ``m`` tokens takes ``fixed_s(m) + ratio(m) x max(bytes / bw, flops / peak)`` at the
  catalog's peaks (no efficiency), both read at ``m`` by linear interpolation in ``log m``
  between the measured token counts (clamped at the ends); for vLLM's BF16 GEMMs on a GPU with a
  first-party matmul-chain measurement (:mod:`servecap.specs.gemm_chain_timings`: H100 and H200),
  times ``measured chain(m) / table chain(m)``, the same chain of Llama-3.1-8B's 129 matmuls
  timed both ways, read at ``m`` in ``log m``: AIConfigurator's GEMMs reach 83% of the H100's
  BF16 peak at 1,024 tokens where the first-party chain reaches 69%;
- a decode attention over ``b`` sequences of ``c`` context tokens reads its KV bytes at
  ``ratio(b, c)`` times the bare bandwidth time, bilinear in ``(log b, log c)``, from the table of
  the KV-head count per GPU nearest the model's (1, 2, 4 or 8; 128-wide heads);
- a custom all-reduce of ``S`` bytes over ``g`` GPUs takes the measured time, linear in ``S``
  between the measured sizes (beyond the largest, scaled by size).

NVIDIA's MoE and MLA timings from the same release, reduced to :mod:`servecap.specs.moe_mla_timings`
by ``benchmarks/kernel_tables_moe_mla.py``:

- a routed-expert grouped GEMM (expert parallelism 1) takes ``ratio x max(touched expert bytes /
  bw, expert FLOPs / peak)``, the ratio bilinear in ``(log tokens per expert, log slice)`` between
  the measured cells (``tokens per expert = T k / E``, ``slice`` = the expert's intermediate width
  on one GPU), clamped at the grid's edges;
- a DeepSeek-V3-shaped MLA layer (q/kv down- and up-projections, attention and ``o_proj`` as one
  module) takes the measured module time: prefill by (sequences, prompt length), decode by
  (sequences, context), bilinear in the logs; beyond the largest measured batch or length,
  scaled in proportion.

On AMD GPUs with a published Max-Achievable FLOPs (``specs.amd_kernels``), FP8 GEMMs run at a
fitted share of it (the :class:`RooflineTimer` with that peak and share; its ``source`` says
``fitted:``). Anything else (another GPU, engine or dtype, prefill attention of other layer kinds,
AMD's other operations) takes the roofline, and the operation says so.
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_right
from dataclasses import dataclass

from servecap.core.ops.operation import ROOFLINE


@dataclass(frozen=True, slots=True)
class RooflineTimer:
    """Times at the GPU's peaks and the fitted efficiencies."""

    hbm_bytes_s: float
    peak_flops: float  # the weights' GEMM rate (bf16, fp8 or fp4 tensor cores)
    bf16_flops: float  # attention's rate
    bandwidth_efficiency: float
    compute_efficiency: float  # the weights' rate
    bf16_compute_efficiency: float
    link_bytes_s: float
    allreduce_latency_s: float
    source: str = ROOFLINE  # a GEMM's source: the roofline, or AMD's published MAF (``specs.amd_kernels``)

    def gemm(self, m: int, n: int, k: int, weight_bytes: float, rate: str) -> tuple[float, str]:
        """``m`` tokens through an ``n x k`` weight of ``weight_bytes`` bytes per parameter at the
        tensor-core ``rate`` (the weights' own, or ``bf16`` for unquantized ones)."""
        moved = n * k * weight_bytes
        mem = moved / (self.hbm_bytes_s * self.bandwidth_efficiency)
        if rate == "bf16":
            comp = 2.0 * m * n * k / (self.bf16_flops * self.bf16_compute_efficiency)
        else:
            comp = 2.0 * m * n * k / (self.peak_flops * self.compute_efficiency)
        if mem > comp:
            return mem, ROOFLINE
        return comp, self.source

    def memory(self, moved_bytes: float) -> float:
        return moved_bytes / (self.hbm_bytes_s * self.bandwidth_efficiency)

    def attention(self, kv_bytes: float, flops: float) -> tuple[float, str]:
        mem = kv_bytes / (self.hbm_bytes_s * self.bandwidth_efficiency)
        comp = flops / (self.bf16_flops * self.bf16_compute_efficiency)
        return (mem if mem > comp else comp), ROOFLINE

    def allreduce(self, message_bytes: float, gpus: int) -> tuple[float, str]:
        ring = 2.0 * (gpus - 1) / gpus
        return ring * message_bytes / self.link_bytes_s + self.allreduce_latency_s, ROOFLINE


def _interp_log(xs: tuple[float, ...], ys: tuple[float, ...], x: float) -> float:
    """Linear in ``log x`` between the points, clamped at the ends."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect_right(xs, x)
    x0, x1 = xs[i - 1], xs[i]
    t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return ys[i - 1] + t * (ys[i] - ys[i - 1])


def _logs(xs: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(math.log(x) for x in xs)


def _interp_logged(xs: tuple[float, ...], log_xs: tuple[float, ...], ys: tuple[float, ...], x: float) -> float:
    """:func:`_interp_log` with the points' logs computed once (``log_xs``): the same operations
    on the same values, so the same result to the last bit, with one ``log`` a call instead of
    three (the simulator asks for an MLA decode time every step)."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect_right(xs, x)
    t = (math.log(x) - log_xs[i - 1]) / (log_xs[i] - log_xs[i - 1])
    return ys[i - 1] + t * (ys[i] - ys[i - 1])


@dataclass(frozen=True, slots=True)
class _GemmCurve:
    ms: tuple[float, ...]
    fixed_s: tuple[float, ...]
    ratio: tuple[float, ...]
    source: str


def _curve_s(curve: _GemmCurve, m: int, ideal_s: float) -> float:
    return _interp_log(curve.ms, curve.fixed_s, m) + _interp_log(curve.ms, curve.ratio, m) * ideal_s


def _chain_correction(
    curve: _GemmCurve, gpu: str, hbm_bytes_s: float, bf16_flops: float
) -> tuple[tuple[float, ...], tuple[float, ...], str] | None:
    """Per token count ``m``, the first-party measured time of Llama-3.1-8B's BF16 matmul chain on
    this GPU over the same chain timed by ``curve`` (``specs.gemm_chain_timings``); None where the
    GPU has no such measurement."""
    from servecap.specs.gemm_chain_timings import CHAIN_S, CHAIN_SHAPES, CHAIN_SOURCE

    measured = CHAIN_S.get(gpu)
    if measured is None:
        return None
    ms: list[float] = []
    factors: list[float] = []
    for m, seconds in measured:
        table = 0.0
        for k, n, count in CHAIN_SHAPES:
            mem = (n * k * 2.0 + (m * k + m * n) * 2.0) / hbm_bytes_s
            comp = 2.0 * m * n * k / bf16_flops
            table += count * _curve_s(curve, m, max(mem, comp))
        ms.append(float(m))
        factors.append(seconds / table)
    tag = {"H100-SXM": "h100", "H200-SXM": "h200"}.get(gpu, gpu.lower())
    return tuple(ms), tuple(factors), CHAIN_SOURCE.format(gpu=tag)


@dataclass(frozen=True, slots=True)
class _AttentionGrid:
    batches: tuple[float, ...]
    contexts: tuple[tuple[float, ...], ...]  # per batch, the measured contexts
    ratios: tuple[tuple[float, ...], ...]
    source: str
    log_batches: tuple[float, ...]  # the logs of ``batches`` and ``contexts``, taken once
    log_contexts: tuple[tuple[float, ...], ...]


class _Grid:
    """Values on a grid of ``(y, x)``: per ``y`` (sorted), the measured ``x`` (sorted) and values.

    The points' logs are taken once, and the weights along ``y`` once per ``y`` asked (a step's
    sequence count): :meth:`at` computes what plain bilinear interpolation in the logs does, in the
    same order, so its results are the same to the last bit."""

    __slots__ = ("_log_xs", "_log_ys", "_y_weights", "vs", "xs", "ys")

    def __init__(
        self, ys: tuple[float, ...], xs: tuple[tuple[float, ...], ...], vs: tuple[tuple[float, ...], ...]
    ) -> None:
        self.ys = ys
        self.xs = xs
        self.vs = vs
        self._log_ys = _logs(ys)
        self._log_xs = tuple(_logs(row) for row in xs)
        # per y: (row, second row, weight of the second); second -1: at or below the first row,
        # -2: at or beyond the last (a time grows in proportion there)
        self._y_weights: dict[float, tuple[int, int, float]] = {}

    @staticmethod
    def of(cells: tuple[tuple[float, float, float], ...], *, y_first: bool) -> _Grid:
        by_y: dict[float, list[tuple[float, float]]] = {}
        for a, b, v in cells:
            y, x = (a, b) if y_first else (b, a)
            by_y.setdefault(float(y), []).append((float(x), v))
        ys = tuple(sorted(by_y))
        return _Grid(
            ys,
            tuple(tuple(x for x, _ in sorted(by_y[y])) for y in ys),
            tuple(tuple(v for _, v in sorted(by_y[y])) for y in ys),
        )

    def _weights(self, y: float) -> tuple[int, int, float]:
        ys = self.ys
        if y <= ys[0]:
            w = (0, -1, 0.0)
        elif y >= ys[-1]:
            w = (len(ys) - 1, -2, 0.0)
        else:
            j = bisect_right(ys, y)
            log_ys = self._log_ys
            w = (j - 1, j, (math.log(y) - log_ys[j - 1]) / (log_ys[j] - log_ys[j - 1]))
        self._y_weights[y] = w
        return w

    def at(self, y: float, x: float, *, scale: bool) -> float:
        """Bilinear in ``(log y, log x)``. ``scale``: beyond the last measured ``x`` or ``y`` the
        value grows in proportion (a time); else it is clamped (a ratio)."""
        w = self._y_weights.get(y)
        if w is None:
            w = self._weights(y)
        i, j, t = w
        # the rows inline: this runs every simulated step
        xs, vs = self.xs[i], self.vs[i]
        r0 = vs[-1] * x / xs[-1] if scale and x > xs[-1] else _interp_logged(xs, self._log_xs[i], vs, x)
        if j >= 0:
            xs, vs = self.xs[j], self.vs[j]
            r1 = vs[-1] * x / xs[-1] if scale and x > xs[-1] else _interp_logged(xs, self._log_xs[j], vs, x)
            return r0 + t * (r1 - r0)
        if scale and j == -2:
            return r0 * y / self.ys[-1]
        return r0


MLA_TABLE_HEADS = (8, 16, 32, 64)
"""Heads per GPU of the MLA module tables (DeepSeek-V3's 128 at TP 16 ... 2)."""


@functools.cache
def _nearest_mla_heads(heads: int) -> int:
    """The tables' heads per GPU nearest ``heads`` in ratio (once per count: every step asks)."""
    return min(MLA_TABLE_HEADS, key=lambda h: abs(math.log(h) - math.log(max(1, heads))))


class TableTimer:
    """Measured tables for one GPU and engine where they cover an operation, else ``fallback``."""

    def __init__(self, fallback: RooflineTimer, gpu: str, engine: str, rate: str, kv_dtype: str, kv_heads: int) -> None:
        # the tables (160 KB of literals) load only when the operations model is asked for:
        # ``servecap plan`` on the default roofline never pays for them
        from servecap.specs.kernel_timings import ALLREDUCE_S, DECODE_ATTENTION_RATIO, GEMM_FIT, SOURCE

        self.fallback = fallback
        self.hbm_bytes_s = fallback.hbm_bytes_s
        self.rate = rate
        self._peaks = {rate: fallback.peak_flops, "bf16": fallback.bf16_flops}
        self._gemm: dict[str, _GemmCurve] = {}
        for r in {rate, "bf16"}:
            fit = GEMM_FIT.get((gpu, engine, r))
            if fit is not None:
                version, rows = fit
                self._gemm[r] = _GemmCurve(
                    tuple(float(row[0]) for row in rows),
                    tuple(row[1] for row in rows),
                    tuple(row[2] for row in rows),
                    f"measured: {SOURCE}, {engine} {version} {gpu} {r} GEMMs",
                )
        self._chain: tuple[tuple[float, ...], tuple[float, ...], str] | None = None
        self._chain_source = ""
        if engine == "vllm" and "bf16" in self._gemm:
            self._chain = _chain_correction(self._gemm["bf16"], gpu, fallback.hbm_bytes_s, fallback.bf16_flops)
            if self._chain is not None:
                self._chain_source = f"{self._gemm['bf16'].source} x {self._chain[2]}"
        # per rate and token count, the curve's interpolated points (``_gemm_point``)
        self._gemm_points: dict[str, dict[int, tuple[float, float, float]]] = {r: {} for r in self._gemm}
        self._att: _AttentionGrid | None = None
        kv = "fp8" if kv_dtype.startswith("fp8") else "bf16"
        heads = min((1, 2, 4, 8), key=lambda h: abs(h - kv_heads)) if kv_heads > 0 else 0
        att = DECODE_ATTENTION_RATIO.get((gpu, engine, kv, heads))
        if att is not None:
            version, cells = att
            by_batch: dict[int, list[tuple[int, float]]] = {}
            for b, c, ratio in cells:
                by_batch.setdefault(b, []).append((c, ratio))
            bs = tuple(sorted(by_batch))
            batches = tuple(float(b) for b in bs)
            contexts = tuple(tuple(float(c) for c, _ in sorted(by_batch[b])) for b in bs)
            self._att = _AttentionGrid(
                batches,
                contexts,
                tuple(tuple(x for _, x in sorted(by_batch[b])) for b in bs),
                f"measured: {SOURCE}, {engine} {version} {gpu} decode attention ({kv} KV, {heads} KV heads)",
                _logs(batches),
                tuple(_logs(c) for c in contexts),
            )
        self._ar: dict[int, tuple[tuple[float, ...], tuple[float, ...]]] = {}
        self._ar_source = ""
        ar = ALLREDUCE_S.get((gpu, engine))
        if ar is not None:
            version, by_tp = ar
            self._ar = {g: (tuple(float(s) for s, _ in pts), tuple(t for _, t in pts)) for g, pts in by_tp.items()}
            self._ar_source = f"measured: {SOURCE}, {engine} {version} {gpu} custom all-reduce"
        self._source = SOURCE
        self._gpu, self._engine = gpu, engine
        self._kv = kv
        self._moe: tuple[_Grid, str] | None = None
        self._moe_loaded = False
        self._mla: dict[int, tuple[_Grid, _Grid, str]] = {}
        self._mla_loaded = False

    def moe_experts(self, tokens_per_expert: float, slice_width: int, ideal_s: float) -> tuple[float, str] | None:
        """The routed experts' grouped GEMM: the measured ratio over its ``ideal_s`` (bytes and
        FLOPs at the catalog's peaks), or None where no table covers the GPU, engine and dtype."""
        if not self._moe_loaded:
            from servecap.specs.moe_mla_timings import MOE_RATIO

            fit = MOE_RATIO.get((self._gpu, self._engine, self.rate))
            if fit is not None:
                version, cells = fit
                self._moe = (
                    _Grid.of(cells, y_first=False),
                    f"measured: {self._source}, {self._engine} {version} {self._gpu} {self.rate} MoE grouped GEMMs "
                    "(by tokens per expert and expert slice)",
                )
            self._moe_loaded = True
        if self._moe is None or slice_width < 1:
            return None
        grid, src = self._moe
        return grid.at(float(slice_width), max(tokens_per_expert, 1.0 / 64.0), scale=False) * ideal_s, src

    def mla_module(
        self, heads: int, gemm_rate: str, prefill_seqs: int, prompt_tokens: int, decode_seqs: int, context: float
    ) -> tuple[float, str] | None:
        """One DeepSeek-V3-shaped MLA layer's measured time for the step (prefill and decode parts),
        or None where no table covers it."""
        grids = self.mla_grids(heads, gemm_rate)
        if grids is None:
            return None
        return mla_module_s(grids, prefill_seqs, prompt_tokens, decode_seqs, context), grids[2]

    def mla_grids(self, heads: int, gemm_rate: str) -> tuple[_Grid, _Grid, str] | None:
        """The MLA module's prefill and decode grids nearest ``heads`` per GPU and their source,
        or None where no table covers the GPU, engine, KV and GEMM dtypes."""
        key = _nearest_mla_heads(heads)
        if not self._mla_loaded:
            from servecap.specs.moe_mla_timings import MLA_CONTEXT_S, MLA_GENERATION_S

            k = (self._gpu, self._engine, self._kv, gemm_rate)
            ctx, gen = MLA_CONTEXT_S.get(k), MLA_GENERATION_S.get(k)
            if ctx is not None and gen is not None:
                for h in MLA_TABLE_HEADS:
                    if h in ctx[1] and h in gen[1]:
                        self._mla[h] = (
                            _Grid.of(ctx[1][h], y_first=True),
                            _Grid.of(gen[1][h], y_first=True),
                            f"measured: {self._source}, {self._engine} {ctx[0]} {self._gpu} MLA module "
                            f"({self._kv} KV, {gemm_rate} GEMMs, {h} heads per GPU)",
                        )
            self._mla_loaded = True
        return self._mla.get(key)

    def _gemm_point(self, curve: _GemmCurve, rate: str, m: int) -> tuple[float, float, float]:
        """``(fixed_s, ratio, chain factor)`` of ``curve`` at ``m`` tokens (a step's GEMMs share
        them): :func:`_curve_s`'s and the chain's interpolations, each read once."""
        factor = 1.0
        if rate == "bf16" and self._chain is not None:
            factor = _interp_log(self._chain[0], self._chain[1], m)
        point = (_interp_log(curve.ms, curve.fixed_s, m), _interp_log(curve.ms, curve.ratio, m), factor)
        self._gemm_points[rate][m] = point
        return point

    def gemm(self, m: int, n: int, k: int, weight_bytes: float, rate: str) -> tuple[float, str]:
        curve = self._gemm.get(rate)
        if curve is None:
            return self.fallback.gemm(m, n, k, weight_bytes, rate)
        mem = (n * k * weight_bytes + (m * k + m * n) * 2.0) / self.hbm_bytes_s
        comp = 2.0 * m * n * k / self._peaks[rate]
        ideal = mem if mem > comp else comp
        point = self._gemm_points[rate].get(m)
        if point is None:
            point = self._gemm_point(curve, rate, m)
        sec = point[0] + point[1] * ideal  # _curve_s(curve, m, ideal)
        if rate == "bf16" and self._chain is not None:
            return sec * point[2], self._chain_source
        return sec, curve.source

    def decode_attention(self, kv_bytes: float, batch: int, context: float) -> tuple[float, str] | None:
        """The measured time of a decode attention reading ``kv_bytes``, or None (not covered)."""
        grid = self._att
        if grid is None or batch < 1 or context < 1.0:
            return None
        b = float(batch)
        bs = grid.batches
        cs, logs = grid.contexts, grid.log_contexts
        if b <= bs[0] or b >= bs[-1]:
            i = 0 if b <= bs[0] else len(bs) - 1
            r = _interp_logged(cs[i], logs[i], grid.ratios[i], context)
        else:
            j = bisect_right(bs, b)
            r0 = _interp_logged(cs[j - 1], logs[j - 1], grid.ratios[j - 1], context)
            r1 = _interp_logged(cs[j], logs[j], grid.ratios[j], context)
            lb = grid.log_batches
            t = (math.log(b) - lb[j - 1]) / (lb[j] - lb[j - 1])
            r = r0 + t * (r1 - r0)
        return r * kv_bytes / self.hbm_bytes_s, grid.source

    def attention(self, kv_bytes: float, flops: float) -> tuple[float, str]:
        return self.fallback.attention(kv_bytes, flops)

    def memory(self, moved_bytes: float) -> float:
        return self.fallback.memory(moved_bytes)

    def allreduce(self, message_bytes: float, gpus: int) -> tuple[float, str]:
        pts = self._ar.get(gpus)
        if pts is None or message_bytes <= 0.0:
            return self.fallback.allreduce(message_bytes, gpus)
        sizes, times = pts
        if message_bytes <= sizes[0]:
            return times[0], self._ar_source
        if message_bytes >= sizes[-1]:
            return times[-1] * message_bytes / sizes[-1], self._ar_source
        i = bisect_right(sizes, message_bytes)
        t = (message_bytes - sizes[i - 1]) / (sizes[i] - sizes[i - 1])
        return times[i - 1] + t * (times[i] - times[i - 1]), self._ar_source


def mla_module_s(
    grids: tuple[_Grid, _Grid, str], prefill_seqs: int, prompt_tokens: int, decode_seqs: int, context: float
) -> float:
    """One MLA layer's measured time from its grids (:meth:`TableTimer.mla_grids`): the prefill
    part by (sequences, prompt tokens per sequence), the decode part by (sequences, context)."""
    ctx_grid, gen_grid, _ = grids
    sec = 0.0
    if prompt_tokens > 0:
        b = max(1, prefill_seqs)
        sec += ctx_grid.at(float(b), max(1.0, prompt_tokens / b), scale=True)
    if decode_seqs > 0:
        sec += gen_grid.at(float(decode_seqs), max(2.0, context), scale=True)
    return sec
