"""Step time of one engine iteration from the planner's roofline (``StepCost.step_time``).

``StepCost.step_time`` is, for a fixed number of query tokens, an affine-max function of the
batch's aggregates (core/roofline.py)::

    total = max(memory_s, compute_s) + comm_s + activation_s + overhead_s

with each part affine in ``(num_seqs, kv_tokens, window_kv_tokens, attn_pairs,
window_attn_pairs, prompt_tokens)``. :class:`StepTimeModel` reads those coefficients off
``step_time`` itself — by evaluating it at the zero batch and at unit steps along each
aggregate, once per distinct token count — and then prices a step with a handful of
multiply-adds. It checks itself against direct ``step_time`` calls on probe batches and falls
back to calling ``step_time`` for every step when they disagree (a model that is not affine),
and ``exact=True`` always calls it (the step-by-step reference used by the tests).
"""

from __future__ import annotations

import math

from servecap.core.roofline import BatchShape, StepCost, StepTime
from servecap.specs.perf import Efficiency

_PROBE = 1.0e6  # unit of each probe step (tokens or pairs): large enough for exact slopes
_REL_TOL = 1e-9


def _rest(st: StepTime) -> float:
    """The step's time outside ``max(memory, compute)``, summed in one order (so that equal steps
    give a slope of exactly 0)."""
    return st.comm_s + st.overhead_s + st.activation_s


class StepTimeModel:
    """``time(...)`` of a step from its aggregates; ``parts(...)`` as (max-arguments, rest)."""

    def __init__(self, cost: StepCost, eff: Efficiency, *, exact: bool = False) -> None:
        self.cost = cost
        self.eff = eff
        # the step as operations (core.ops): its own memoised sum, no affine coefficients
        self._ops = cost.ops if eff.step_model == "operations" else None
        # (memory_s, compute_s, rest_s) of each token count in an empty batch, read off as needed
        self.bases: dict[int, tuple[float, float, float]] = {}
        zero = cost.step_time(BatchShape(1, 0, 0.0, 0.0, 0.0, 0.0, 0), eff)
        zero_rest = _rest(zero)

        def slope(**kw: float) -> tuple[float, float, float]:
            shape = BatchShape(
                num_tokens=1,
                num_seqs=int(kw.get("num_seqs", 0)),
                kv_tokens=kw.get("kv_tokens", 0.0),
                window_kv_tokens=kw.get("window_kv_tokens", 0.0),
                attn_pairs=kw.get("attn_pairs", 0.0),
                window_attn_pairs=kw.get("window_attn_pairs", 0.0),
                prompt_tokens=int(kw.get("prompt_tokens", 0)),
            )
            st = cost.step_time(shape, eff)
            unit = next(iter(kw.values()))
            return (
                (st.memory_s - zero.memory_s) / unit,
                (st.compute_s - zero.compute_s) / unit,
                (_rest(st) - zero_rest) / unit,
            )

        self._seq = slope(num_seqs=_PROBE)
        self._kv = slope(kv_tokens=_PROBE)
        self._wkv = slope(window_kv_tokens=_PROBE)
        self._pairs = slope(attn_pairs=_PROBE)
        self._wpairs = slope(window_attn_pairs=_PROBE)
        self._prompt = slope(prompt_tokens=_PROBE)
        self.exact = exact or self._ops is not None or not self._self_check()

    def _base_for(self, num_tokens: int) -> tuple[float, float, float]:
        st = self.cost.step_time(BatchShape(num_tokens, 0, 0.0, 0.0, 0.0, 0.0, 0), self.eff)
        base = (st.memory_s, st.compute_s, _rest(st))
        self.bases[num_tokens] = base
        return base

    def parts(
        self,
        num_tokens: int,
        num_seqs: int,
        kv: float,
        wkv: float,
        pairs: float,
        wpairs: float,
        prompt: int,
    ) -> tuple[float, float, float]:
        """``(memory_s, compute_s, rest_s)``: the step takes ``max(memory, compute) + rest``."""
        base = self.bases.get(num_tokens)
        if base is None:
            base = self._base_for(num_tokens)
        s, k, w, p, q, r = self._seq, self._kv, self._wkv, self._pairs, self._wpairs, self._prompt
        mem = base[0] + s[0] * num_seqs + k[0] * kv + w[0] * wkv + p[0] * pairs + q[0] * wpairs + r[0] * prompt
        comp = base[1] + s[1] * num_seqs + k[1] * kv + w[1] * wkv + p[1] * pairs + q[1] * wpairs + r[1] * prompt
        rest = base[2] + s[2] * num_seqs + k[2] * kv + w[2] * wkv + p[2] * pairs + q[2] * wpairs + r[2] * prompt
        return mem, comp, rest

    def time(
        self,
        num_tokens: int,
        num_seqs: int,
        kv: float,
        wkv: float,
        pairs: float,
        wpairs: float,
        prompt: int,
    ) -> float:
        if num_tokens <= 0:
            return 0.0
        ops = self._ops
        if ops is not None:
            return ops.time(self.eff, num_tokens, num_seqs, kv, wkv, pairs, wpairs, prompt)
        if self.exact:
            shape = BatchShape(num_tokens, num_seqs, kv, wkv, pairs, wpairs, prompt)
            return self.cost.step_time(shape, self.eff).total_s
        mem, comp, rest = self.parts(num_tokens, num_seqs, kv, wkv, pairs, wpairs, prompt)
        return (mem if mem > comp else comp) + rest

    def roofline_slopes(self) -> tuple[float, float, float, float, float] | None:
        """``(kv, wkv, pairs, wpairs, seqs)`` slopes when the model has the plain roofline's shape —
        memory grows with the context read (``kv``, ``wkv``) only, compute with the attention
        pairs (``pairs``, ``wpairs``) and the sequences (``seqs``: one row of logits each) only,
        nothing else depends on the batch beyond its token count — else None. Then, with
        ``base = base(num_tokens)``, :meth:`time` is exactly::

            mem = base[0] + kv_slope * kv + wkv_slope * wkv
            comp = base[1] + seqs_slope * num_seqs + pairs_slope * pairs + wpairs_slope * wpairs
            (mem if mem > comp else comp) + base[2]

        (the same operations in the same order, less additions of ``0.0 * x``, which change
        nothing), and a term whose slope is 0.0 may be left out too."""
        if self.exact:
            return None
        s, k, w, p, q, r = self._seq, self._kv, self._wkv, self._pairs, self._wpairs, self._prompt
        zero = (s[0], s[2], *r, k[1], k[2], w[1], w[2], p[0], p[2], q[0], q[2])
        if any(x != 0.0 for x in zero) or not all(math.isfinite(x) for x in (k[0], w[0], p[1], q[1], s[1])):
            return None
        return k[0], w[0], p[1], q[1], s[1]

    def base(self, num_tokens: int) -> tuple[float, float, float]:
        """``(memory_s, compute_s, rest_s)`` of ``num_tokens`` query tokens in an empty batch."""
        base = self.bases.get(num_tokens)
        if base is None:
            base = self._base_for(num_tokens)
        return base

    def direct(self, shape: BatchShape) -> float:
        return self.cost.step_time(shape, self.eff).total_s

    def _self_check(self) -> bool:
        probes = [
            BatchShape(1, 1, 1000.0, 1000.0, 1000.0, 1000.0, 0),
            BatchShape(7, 7, 12345.0, 4000.0, 12345.0, 4000.0, 0),
            BatchShape(256, 256, 3.0e5, 6.0e4, 3.0e5, 6.0e4, 0),
            BatchShape(2048, 3, 4096.0, 1024.0, 2.0e6, 1.0e6, 2045),
            BatchShape(8192, 1, 0.0, 0.0, 3.4e7, 8.0e6, 8192),
        ]
        for shape in probes:
            want = self.direct(shape)
            mem, comp, rest = self.parts(
                shape.num_tokens,
                shape.num_seqs,
                shape.kv_tokens,
                shape.window_kv_tokens,
                shape.attn_pairs,
                shape.window_attn_pairs,
                shape.prompt_tokens,
            )
            got = max(mem, comp) + rest
            if abs(got - want) > _REL_TOL * max(abs(want), 1e-12):
                return False
        return True
