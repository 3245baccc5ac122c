"""Speculative decoding and MTP: accepted tokens per step, the published acceptance defaults, and
what the draft costs.

**Acceptance.** A proposer drafts ``k`` tokens; the target verifies them in one step of
``k + 1`` query tokens per sequence and keeps the longest accepted prefix plus one token of its
own (the correction or bonus token; Leviathan, Kalman and Matias, "Fast Inference from
Transformers via Speculative Decoding", ICML 2023). With ``a_i`` the probability that draft
position ``i`` is accepted given positions ``1..i-1`` were, the step emits ``1 + n`` tokens with::

    P(n) = a_1 ... a_n x (1 - a_{n+1})     (n < k),     P(k) = a_1 ... a_k
    E[tokens per step] = 1 + sum_{j=1..k} prod_{i<=j} a_i

(the mean acceptance length, "AL" in vLLM's and EAGLE's reports; ``(1 - a^(k+1)) / (1 - a)``
for a constant ``a``). vLLM's counters give the unconditional rates
``p_j = num_accepted_tokens_per_pos[j] / num_drafts``; ``a_j = p_j / p_{j-1}``.

**Defaults** (per method, with the data set the source measured on):

- ``mtp``: DeepSeek-V3 technical report (arXiv:2412.19437, section 5.4.3): "the acceptance rate
  of the second token prediction ranges between 85% and 90% across various generation topics",
  k = 1, the midpoint 0.875 with the 0.85-0.90 spread;
- ``eagle3``: vLLM issue #20780 (Llama-3.1-8B-Instruct with yuhuili/EAGLE3-LLaMA3.1-Instruct-8B,
  MT-Bench): mean acceptance length 2.36 / 2.79 / 3.08 / 3.32 / 3.46 / 3.54 at k = 2..7; the
  default k = 3, AL 2.79, read as a constant rate;
- ``eagle``: the same issue, EAGLE-1: AL 2.29 at k = 3;
- ``ngram``: vLLM PR #24344 (prompt lookup 2-5, k = 5, a code-edit data set): per-position
  acceptance 0.81, 0.74, 0.70, 0.68, 0.66 (unconditional);
- ``draft``: no default: a separate draft model's acceptance depends on the pair; pass
  ``--spec-acceptance``.

**Cost.** The target runs ``k + 1`` query tokens per decoding sequence (GEMMs, attention over
the context, LM head rows); an EAGLE/MTP head or draft model runs ``k`` sequential passes over
the batch each step (its weights read, its KV read, its FLOPs), each with a fixed launch cost
(:data:`DRAFT_PASS_OVERHEAD_S`); n-gram proposes on the CPU (no GPU cost). The draft's weights
and KV take GPU memory beside the target's.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING

from servecap.errors import ServecapError
from servecap.specs.deployment import SpecDecodeConfig
from servecap.specs.model import ModelSpec

if TYPE_CHECKING:
    import random

METHODS = ("mtp", "eagle", "eagle3", "draft", "ngram")
MAX_SPEC_TOKENS = 16
# One draft pass's fixed cost beside its weight streaming: vLLM issue #20780 measures EAGLE-3 on
# Llama-3.1-8B at batch 1 (H100, per the same author's runs in PR #16937): TPOT x AL grows from
# 4.32 ms x 2.36 = 10.20 ms at k = 2 to 4.29 ms x 3.54 = 15.19 ms at k = 7, 1.00 ms per extra
# draft token; the head streams ~0.80 GB of BF16 weights (one layer, fc, a 32,000-row head) at
# ~2.7 TB/s, ~0.3 ms, leaving ~0.7 ms of launch, sampling and bookkeeping per pass.
DRAFT_PASS_OVERHEAD_S = 0.7e-3
EAGLE3_DRAFT_VOCAB = 32000  # yuhuili/EAGLE3-LLaMA3.1-Instruct-8B config "draft_vocab_size"


@dataclass(frozen=True, slots=True)
class AcceptancePrior:
    method: str
    k: int
    acceptance: tuple[float, ...]  # conditional per position
    low: tuple[float, ...] | None
    high: tuple[float, ...] | None
    source: str


def expected_tokens_per_step(acceptance: Sequence[float]) -> float:
    """``1 + sum_j prod_{i<=j} a_i``: the mean tokens a sequence gets from one verification step."""
    total, run = 1.0, 1.0
    for a in acceptance:
        run *= a
        total += run
    return total


def accepted_distribution(acceptance: Sequence[float]) -> list[float]:
    """``P(n accepted)`` for ``n = 0..k`` (the step emits ``n + 1`` tokens)."""
    out, run = [], 1.0
    for a in acceptance:
        out.append(run * (1.0 - a))
        run *= a
    out.append(run)
    return out


def conditional_from_unconditional(per_position: Sequence[float]) -> tuple[float, ...]:
    """``a_j = p_j / p_{j-1}`` from vLLM's per-position rates ``p_j`` (``p_0 = 1``)."""
    out, prev = [], 1.0
    for p in per_position:
        out.append(0.0 if prev <= 0.0 else min(1.0, p / prev))
        prev = p
    return tuple(out)


def constant_rate_for_length(mean_length: float, k: int) -> float:
    """The constant per-position rate ``a`` with ``(1 - a^(k+1)) / (1 - a) = mean_length``."""
    if not 1.0 <= mean_length <= k + 1:
        raise ServecapError(
            "spec_acceptance", mean_length, f"a mean acceptance length must be from 1 to k + 1 = {k + 1}"
        )
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if expected_tokens_per_step([mid] * k) < mean_length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


_EAGLE3_AL = "vLLM issue #20780: EAGLE-3, Llama-3.1-8B-Instruct, MT-Bench"
PRIORS: dict[str, AcceptancePrior] = {
    "mtp": AcceptancePrior(
        "mtp",
        1,
        (0.875,),
        (0.85,),
        (0.90,),
        "MTP acceptance 0.85-0.90 of the second token (DeepSeek-V3 technical report, arXiv:2412.19437 5.4.3)",
    ),
    "eagle3": AcceptancePrior(
        "eagle3",
        3,
        (round(constant_rate_for_length(2.79, 3), 4),) * 3,
        (round(constant_rate_for_length(2.79, 3) * 0.95, 4),) * 3,
        (round(min(1.0, constant_rate_for_length(2.79, 3) * 1.05), 4),) * 3,
        f"EAGLE-3 mean acceptance length 2.79 at k=3 ({_EAGLE3_AL}); spread +-5% per position",
    ),
    "eagle": AcceptancePrior(
        "eagle",
        3,
        (round(constant_rate_for_length(2.29, 3), 4),) * 3,
        None,
        None,
        "EAGLE mean acceptance length 2.29 at k=3 (vLLM issue #20780, Llama-3.1-8B-Instruct, MT-Bench)",
    ),
    "ngram": AcceptancePrior(
        "ngram",
        5,
        tuple(round(a, 4) for a in conditional_from_unconditional((0.81, 0.74, 0.70, 0.68, 0.66))),
        None,
        None,
        "n-gram per-position acceptance 0.81/0.74/0.70/0.68/0.66 (vLLM PR #24344, prompt lookup 2-5, code edits)",
    ),
}


def parse_acceptance(text: str, k: int) -> tuple[float, ...]:
    """``"0.8,0.7,0.6"`` (conditional per position; one value is repeated to ``k``) or
    ``"al=2.8"`` (a mean acceptance length, read as a constant rate)."""
    t = text.strip().lower()
    if t.startswith("al="):
        try:
            length = float(t[3:])
        except ValueError:
            raise ServecapError("spec_acceptance", text, "al= must be a number such as al=2.8") from None
        if not math.isfinite(length):
            raise ServecapError("spec_acceptance", text, "must be finite")
        return (constant_rate_for_length(length, k),) * k
    try:
        values = tuple(float(x) for x in t.split(","))
    except ValueError:
        raise ServecapError(
            "spec_acceptance", text, "must be comma-separated probabilities such as 0.8,0.7,0.6 or al=2.8"
        ) from None
    for v in values:
        if not math.isfinite(v) or not 0.0 < v <= 1.0:
            raise ServecapError("spec_acceptance", text, f"{v:g} is not a probability in (0, 1]")
    if len(values) == 1:
        values = values * k
    if len(values) != k:
        raise ServecapError("spec_acceptance", text, f"gives {len(values)} positions for {k} speculative tokens")
    return values


def spec_config_from_flags(
    model: ModelSpec,
    method: str | None,
    k: int | None,
    acceptance: str | None,
    draft_model: ModelSpec | None,
) -> SpecDecodeConfig:
    """The speculative-decoding settings, the method's published defaults filling the gaps."""
    if method is None:
        raise ServecapError("speculative", None, "--num-speculative-tokens/--spec-acceptance need --speculative METHOD")
    if method not in METHODS:
        raise ServecapError("speculative", method, "must be " + ", ".join(METHODS))
    if k is not None and (not isinstance(k, int) or not 1 <= k <= MAX_SPEC_TOKENS):
        raise ServecapError("num_speculative_tokens", k, f"must be a whole number from 1 to {MAX_SPEC_TOKENS}")
    if method == "mtp" and model.mtp_layers < 1:
        raise ServecapError("speculative", method, f"{model.id} ships no MTP module (num_nextn_predict_layers)")
    if method == "draft":
        if draft_model is None:
            raise ServecapError("draft_model", None, "--speculative draft needs --draft-model")
        if draft_model.vocab_size != model.vocab_size:
            raise ServecapError(
                "draft_model",
                draft_model.id,
                f"vocabulary {draft_model.vocab_size} differs from the target's {model.vocab_size}",
            )
    elif draft_model is not None:
        raise ServecapError("draft_model", draft_model.id, f"is for --speculative draft, not {method}")
    prior = PRIORS.get(method)
    if acceptance is None and prior is None:
        raise ServecapError("spec_acceptance", None, f"--speculative {method} has no published default: pass it")
    kk = k if k is not None else (prior.k if prior is not None else 3)
    if acceptance is not None:
        acc = parse_acceptance(acceptance, kk)
        return SpecDecodeConfig(method, kk, acc, draft_model, f"speculative {method}: k={kk}, acceptance given")
    assert prior is not None
    acc = _extend(prior.acceptance, kk)
    low = _extend(prior.low, kk) if prior.low is not None else None
    high = _extend(prior.high, kk) if prior.high is not None else None
    note = f"speculative {method}: k={kk}, {prior.source}"
    if kk > len(prior.acceptance):
        note += f"; positions past {len(prior.acceptance)} repeat the last rate"
    return SpecDecodeConfig(method, kk, acc, draft_model, note, low, high)


def _extend(values: tuple[float, ...], k: int) -> tuple[float, ...]:
    return tuple(values[min(i, len(values) - 1)] for i in range(k))


class SpecSampler:
    """Draws accepted tokens per step from the per-position acceptance (``rng`` passed in)."""

    def __init__(self, acceptance: Sequence[float], rng: random.Random) -> None:
        self.acceptance = tuple(acceptance)
        self.rng = rng
        dist = accepted_distribution(self.acceptance)
        self._sizes = list(range(1, len(dist) + 1))  # tokens a step emits: 1 + accepted
        self._cum = list(accumulate(dist))
        self._mean = expected_tokens_per_step(self.acceptance)

    def accepted(self) -> int:
        """Draft tokens accepted in one step (the step emits this + 1)."""
        n = 0
        for a in self.acceptance:
            if self.rng.random() >= a:
                break
            n += 1
        return n

    def decode_steps(self, output_tokens: int) -> int:
        """Steps that emit ``output_tokens``: the first token from the prefill, then decode steps
        of ``1 + accepted`` tokens each until the rest is out (the last may overshoot: the engine
        stops at the request's length). Returns prefill token + decode steps, the count a
        one-token-per-step engine would need."""
        left = output_tokens - 1
        steps = 1
        while left > 0:
            # a run of steps drawn at once from P(1 + n tokens) (the same law as accepted())
            m = int(left / self._mean) + 8
            run = list(accumulate(self.rng.choices(self._sizes, cum_weights=self._cum, k=m)))
            i = bisect_left(run, left)
            if i < m:
                return steps + i + 1
            left -= run[-1]
            steps += m
        return steps


@dataclass(frozen=True, slots=True)
class DraftCost:
    """What one draft pass costs per GPU: weights streamed, FLOPs per token, KV bytes per context
    token, resident weight bytes and KV bytes per token held."""

    passes: int
    bytes_per_pass: float
    flops_per_token: float
    kv_bytes_per_context_token: float
    resident_bytes: float
    pass_overhead_s: float


def draft_cost(
    config: SpecDecodeConfig,
    model: ModelSpec,
    *,
    layer_active_params: float,
    layer_total_params: float,
    layer_kv_bytes_per_token: float,
    weight_bytes_per_param: float,
    tp: int,
) -> DraftCost:
    """Per-GPU draft cost from the target's layer shapes (MTP: one more layer of the target,
    ``eh_proj`` of ``2h x h`` and the shared LM head read again; EAGLE: one layer, ``fc`` of
    ``2h x h`` (EAGLE-3: ``3h x h``) and the LM head (EAGLE-3: its 32,000-row draft vocabulary);
    a draft model: its body and head), or a draft model's own config."""
    k = config.num_speculative_tokens
    h = model.hidden_size
    if config.method == "ngram":
        return DraftCost(k, 0.0, 0.0, 0.0, 0.0, 0.0)
    if config.method == "draft":
        from servecap.core.kv import kv_bytes_per_token, resolve_kv_dtype
        from servecap.core.params import param_counts

        d = config.draft_model
        assert d is not None
        counts = param_counts(d)
        dbytes = 4.0 if d.torch_dtype == "fp32" else 2.0  # served at its checkpoint dtype
        body = counts.text_matmul_active
        kv = float(kv_bytes_per_token(d, tp, resolve_kv_dtype("auto", d)))
        return DraftCost(
            k,
            body * dbytes / tp,
            2.0 * body / tp,
            kv,
            counts.total * dbytes / tp,
            DRAFT_PASS_OVERHEAD_S,
        )
    if config.method == "mtp":
        extra = 2 * h * h  # eh_proj
        head = model.vocab_size * h  # shared with the target, read again each pass
        resident: float = layer_total_params + extra
    else:
        extra = (3 if config.method == "eagle3" else 2) * h * h
        head = (EAGLE3_DRAFT_VOCAB if config.method == "eagle3" else model.vocab_size) * h
        resident = layer_active_params + extra + (head if config.method == "eagle3" else 0)
    active = layer_active_params + extra + head
    return DraftCost(
        k,
        active * weight_bytes_per_param / tp,
        2.0 * active / tp,
        layer_kv_bytes_per_token,
        resident * weight_bytes_per_param / tp,
        DRAFT_PASS_OVERHEAD_S,
    )
