"""Users a deployment serves: batch limits, steady-state speeds with chunked prefill, SLO batch.

Steady state of a batch of ``B`` requests of ``P`` prompt and ``O`` output tokens under
continuous batching with chunked prefill (vLLM V1). Every step decodes one token for each of
the ``B`` running requests; over a cycle of ``O`` steps the ``B`` requests are replaced, so ``B``
prompts are prefilled, each in ``k = cdiv(P, c)`` chunks of at most ``c = max_num_batched_tokens
- B`` tokens (the budget left after the decodes). Prefill is lumpy, and a step's time is the
*max* of memory and compute time, so the average step is not the step of average work:

- prompts do not overlap (``B x k <= O``): ``B x k`` mixed steps of ``P / k`` prompt tokens + B
  decodes, and ``O - B x k`` pure decode steps;
- prompts overlap (``B x k > O``): every step carries ``B x P / O`` prompt tokens; when that
  exceeds ``c`` the cycle stretches to ``B x P / c`` full steps (prefill-bound).

::

    tpot_s(B)   = cycle_s / O        (the time between a request's tokens, prefill stalls included)
    ttft_s(B)   = Σ over the prompt's chunks of step_time(chunk + B decodes) + request_overhead_s
    tok/s total = B / tpot_s(B);  tok/s per user = 1 / tpot_s(B)

The simulator, which schedules exactly these steps, agrees with this within a few percent at
saturation (tests/sim); averaging the prefill over every step instead underestimated TPOT by up
to 30% for long prompts.

Queueing delay is not included (that is the simulator's job); M/M/1's mean wait of
``rho / (1 - rho)`` service times is reported as a reminder of where it takes over.

Concurrency limits (the smallest wins): the KV pool (blocks a request holds at its full length
``P + O``, paged), ``max_num_seqs``, the TPOT SLO and the TTFT SLO. Users served at a duty cycle
``d`` (share of a session spent generating): not ``B / d`` (the batch full 100% of the time, which
queues half the time at once) but :func:`busy_users`, the users whose concurrent requests stay
within ``B`` 99% of the time — the batch runs at a busy fraction below one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servecap.core.blocks import KvLayout
from servecap.core.roofline import BatchShape, StepCost, StepTime, decode_batch, prefill_batch
from servecap.specs.perf import Efficiency, RequestShape, Slo


def _mean_held_tokens(request: RequestShape) -> float:
    """``request.mean_held_tokens`` without a call into the interpreted RequestShape."""
    return request.prompt_tokens + request.output_tokens / 2.0


def mixed_batch(cost: StepCost, batch: int, request: RequestShape, prefill_tokens: float) -> BatchShape:
    """``batch`` decodes plus ``prefill_tokens`` prompt tokens (a share of whole prompts' work)."""
    decodes = decode_batch(batch, _mean_held_tokens(request), cost.window_tokens)
    whole = prefill_batch(request.prompt_tokens, cost.window_tokens)
    share = prefill_tokens / max(1, request.prompt_tokens)  # prompts' worth of prefill in the step
    return BatchShape(
        num_tokens=batch + round(prefill_tokens),
        num_seqs=batch,
        kv_tokens=decodes.kv_tokens + share * whole.kv_tokens,
        window_kv_tokens=decodes.window_kv_tokens + share * whole.window_kv_tokens,
        attn_pairs=decodes.attn_pairs + share * whole.attn_pairs,
        window_attn_pairs=decodes.window_attn_pairs + share * whole.window_attn_pairs,
        prompt_tokens=round(prefill_tokens),
    )


@dataclass(frozen=True, slots=True)
class SteadyState:
    tpot_s: float  # cycle time / O: the time between a request's tokens, prefill stalls included
    mixed_steps: float  # steps carrying prompt tokens per cycle of O decode steps
    bottleneck: str  # of the steps, weighted by their time


def steady_state(
    cost: StepCost, batch: int, request: RequestShape, eff: Efficiency, max_num_batched_tokens: int
) -> SteadyState:
    """Steady state of ``batch`` running requests (see the module docstring)."""
    parts, mixed_n, out = _steady_parts(cost, batch, request, eff, max_num_batched_tokens)
    cycle = sum(step.total_s * n for step, n in parts)
    weights: dict[str, float] = {}
    for step, n in parts:
        weights[step.bottleneck] = weights.get(step.bottleneck, 0.0) + step.total_s * n
    return SteadyState(cycle / out, mixed_n, max(weights, key=lambda k: weights[k]))


def steady_tpot_s(
    cost: StepCost, batch: int, request: RequestShape, eff: Efficiency, max_num_batched_tokens: int
) -> float:
    """``steady_state(...).tpot_s`` alone (the same operations; what a batch search needs)."""
    parts, _, out = _steady_parts(cost, batch, request, eff, max_num_batched_tokens)
    return sum(step.total_s * n for step, n in parts) / out


def _steady_parts(
    cost: StepCost, batch: int, request: RequestShape, eff: Efficiency, max_num_batched_tokens: int
) -> tuple[list[tuple[StepTime, float]], float, int]:
    """The steps of one cycle of O decode steps with their counts, the mixed-step count, O."""
    out = max(1, request.output_tokens)
    # speculative decoding: a step emits spec_tokens_per_step tokens per sequence on average
    # (core/spec_decode.py), so a cycle of O tokens takes O / E steps
    out_steps = out / cost.spec_tokens_per_step if cost.spec_tokens_per_step != 1.0 else out
    budget = max(1, max_num_batched_tokens - batch)
    chunks = -(-request.prompt_tokens // budget)
    if batch * chunks <= out_steps:
        decode = cost.step_time(decode_batch(batch, _mean_held_tokens(request), cost.window_tokens), eff)
        mixed_n = float(batch * chunks)
        mixed = cost.step_time(mixed_batch(cost, batch, request, request.prompt_tokens / chunks), eff)
        return [(mixed, mixed_n), (decode, out_steps - mixed_n)], mixed_n, out
    per_step = batch * request.prompt_tokens / out_steps
    steps = max(float(out_steps), batch * request.prompt_tokens / budget)
    mixed = cost.step_time(mixed_batch(cost, batch, request, min(per_step, budget)), eff)
    return [(mixed, steps)], steps, out


def decode_step(cost: StepCost, batch: int, context_tokens: float, eff: Efficiency) -> StepTime:
    return cost.step_time(decode_batch(batch, context_tokens, cost.window_tokens), eff)


def ttft_s(cost: StepCost, batch: int, request: RequestShape, eff: Efficiency, max_num_batched_tokens: int) -> float:
    """Time to first token for a prompt scheduled beside ``batch`` running decodes, as the client
    sees it: its prefill chunks plus the server's per-request cost (``Efficiency.request_overhead_s``)."""
    budget = max(1, max_num_batched_tokens - batch)
    done = 0
    total = 0.0
    others = decode_batch(batch, _mean_held_tokens(request), cost.window_tokens)
    while done < request.prompt_tokens:
        n = min(budget, request.prompt_tokens - done)
        chunk = prefill_batch(n, cost.window_tokens, start_tokens=done)
        step = BatchShape(
            num_tokens=chunk.num_tokens + others.num_tokens,
            num_seqs=1 + others.num_seqs,
            kv_tokens=chunk.kv_tokens + others.kv_tokens,
            window_kv_tokens=chunk.window_kv_tokens + others.window_kv_tokens,
            attn_pairs=chunk.attn_pairs + others.attn_pairs,
            window_attn_pairs=chunk.window_attn_pairs + others.window_attn_pairs,
            prompt_tokens=n,
        )
        total += cost.step_time(step, eff).total_s
        done += n
    return total + eff.request_overhead_s


def prefill_only_req_s(cost: StepCost, prompt_tokens: int, eff: Efficiency, max_num_batched_tokens: int) -> float:
    """Prompts per second a prefill-only replica (disaggregated P/D) serves back to back.

    With no decodes beside them, each step packs ``k = budget // P`` whole prompts into the token
    budget (``max_num_batched_tokens``); the rate is ``k / step_time(k prompts)``. A prompt over the
    budget runs in chunks of the budget, ``1 / Σ step_time(chunk)`` (the same chunks as
    :func:`ttft_s` with no running batch). The per-request server overhead is latency, not
    throughput, and is left out."""
    p = max(1, prompt_tokens)
    if p <= max_num_batched_tokens:
        k = max(1, max_num_batched_tokens // p)
        one = prefill_batch(p, cost.window_tokens)
        step = BatchShape(
            num_tokens=k * one.num_tokens,
            num_seqs=k,
            kv_tokens=k * one.kv_tokens,
            window_kv_tokens=k * one.window_kv_tokens,
            attn_pairs=k * one.attn_pairs,
            window_attn_pairs=k * one.window_attn_pairs,
            prompt_tokens=k * p,
        )
        t = cost.step_time(step, eff).total_s
        return k / t if t > 0 else 0.0
    total = 0.0
    done = 0
    while done < p:
        n = min(max_num_batched_tokens, p - done)
        chunk = prefill_batch(n, cost.window_tokens, start_tokens=done)
        total += cost.step_time(chunk, eff).total_s
        done += n
    return 1.0 / total if total > 0 else 0.0


def decode_only_req_s(batch: int, decode_step_time_s: float, output_tokens: float, tokens_per_step: float) -> float:
    """Requests per second a decode-only replica (disaggregated P/D) finishes: ``batch`` sequences
    each emitting ``tokens_per_step`` tokens per pure decode step (no prefill chunks stall it),
    over ``output_tokens`` each: ``batch x tokens_per_step / step / O``."""
    if decode_step_time_s <= 0:
        return 0.0
    return batch * tokens_per_step / decode_step_time_s / max(1.0, output_tokens)


def kv_batch_limit(layout: KvLayout, num_blocks: int, request: RequestShape) -> int:
    """Requests of the typical shape the pool holds at once (each at its full P + O length)."""
    return num_blocks // max(1, layout.blocks_held(request.total_tokens))


def paged_mean_concurrency(layout: KvLayout, num_blocks: int, request: RequestShape) -> float:
    """Requests the pool holds on average with paged allocation: over its decode a request holds
    ``P + i`` tokens at step ``i`` (0 <= i < O), so it occupies the mean of ``blocks_held`` over
    those lengths, not its final length; ``num_blocks / that mean`` (no preemption headroom)."""
    steps = max(1, request.output_tokens)
    stride = max(1, steps // 256)  # sample long outputs; blocks_held is a step function
    lengths = range(request.prompt_tokens, request.prompt_tokens + steps, stride)
    if stride == 1:  # every length: the sum in closed form (the same integer)
        total = layout.blocks_held_sum(request.prompt_tokens, request.prompt_tokens + steps)
    else:
        total = sum(layout.blocks_held(t) for t in lengths)
    return num_blocks / (total / len(lengths))


@dataclass(frozen=True, slots=True)
class SloBatch:
    batch: int
    limited_by: str  # "kv_cache" | "max_num_seqs" | "tpot_slo" | "ttft_slo"


def slo_batch(
    cost: StepCost,
    request: RequestShape,
    eff: Efficiency,
    slo: Slo,
    *,
    kv_limit: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
) -> SloBatch:
    """The largest batch every limit allows (step time grows with the batch).

    A search over the batch keeping bisection's bracket (``lo`` meets every limit or is 0,
    ``hi`` fails one), so its answer is bisection's; its probes are guided by TPOT, which grows
    almost linearly with the batch: each guess interpolates the bracket's TPOTs to the SLO
    (regula falsi) and is confirmed by its neighbour, and every other round bisects, so a
    curved TPOT never costs more than twice bisection's probes. A plan searches six times (its
    levers), so the usual 3-5 probes instead of 8-10 are most of a plan's time saved."""
    upper = min(kv_limit, max_num_seqs)
    limited_by = "kv_cache" if kv_limit <= max_num_seqs else "max_num_seqs"
    tpot_slo = slo.tpot_s
    ttft_slo = slo.ttft_s

    def probe(b: int) -> tuple[str | None, float]:
        """(the limit ``b`` fails or None, its steady TPOT)."""
        tpot = steady_tpot_s(cost, b, request, eff, max_num_batched_tokens)
        if tpot_slo is not None and tpot > tpot_slo:
            return "tpot_slo", tpot
        if ttft_slo is not None and ttft_s(cost, b, request, eff, max_num_batched_tokens) > ttft_slo:
            return "ttft_slo", tpot
        return None, tpot

    if upper <= 0:
        return SloBatch(0, limited_by)
    failed, t_hi = probe(upper)
    if failed is None:
        return SloBatch(upper, limited_by)
    lo, hi = 0, upper  # probe(lo) passes (or lo == 0), probe(hi) fails
    t_lo = 0.0
    if tpot_slo is not None and hi > 1:
        first, t_lo = probe(1)
        if first is not None:
            return SloBatch(0, failed)
        lo = 1
    interpolate = tpot_slo is not None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if interpolate and tpot_slo is not None and t_hi > t_lo:
            guess = lo + int((tpot_slo - t_lo) / (t_hi - t_lo) * (hi - lo))
            mid = min(max(guess, lo + 1), hi - 1)
        reason, t_mid = probe(mid)
        if reason is None:
            lo, t_lo = mid, t_mid
            if interpolate and mid + 1 < hi:  # the neighbour above: closes the bracket if the guess was right
                reason, t_up = probe(mid + 1)
                if reason is None:
                    lo, t_lo = mid + 1, t_up
                else:
                    hi, t_hi = mid + 1, t_up
        else:
            hi, t_hi = mid, t_mid
            if interpolate and mid - 1 > lo:  # the neighbour below
                reason, t_down = probe(mid - 1)
                if reason is None:
                    lo, t_lo = mid - 1, t_down
                else:
                    hi, t_hi = mid - 1, t_down
        interpolate = not interpolate and tpot_slo is not None  # alternate with bisection
    return SloBatch(lo, failed)


def compute_bound_batch(cost: StepCost, context_tokens: float, eff: Efficiency, limit: int = 1 << 16) -> int | None:
    """Smallest decode batch at which compute time reaches memory time (None: never below limit)."""
    lo, hi = 1, limit
    if decode_step(cost, hi, context_tokens, eff).compute_s < decode_step(cost, hi, context_tokens, eff).memory_s:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        step = decode_step(cost, mid, context_tokens, eff)
        if step.compute_s >= step.memory_s:
            hi = mid
        else:
            lo = mid + 1
    return lo


def ridge_batch(peak_flops: float, bandwidth_bytes_s: float, bytes_per_param: float) -> float:
    """Batch where decode turns compute-bound, weights only: ``2 B / bytes_per_param`` FLOPs per
    byte read equals the machine balance ``peak / bandwidth``. B200 (4,500 TFLOP/s FP8,
    8 TB/s): 562.5 FLOP/byte -> B = 281 at one byte per parameter."""
    return peak_flops / bandwidth_bytes_s * bytes_per_param / 2.0


def mm1_wait_factor(utilization: float) -> float:
    """M/M/1 mean queueing delay in service times: rho / (1 - rho) (Kleinrock, Queueing Systems
    vol. 1, 1975): 50% -> 1x, 80% -> 4x, 95% -> 19x, 99% -> 99x."""
    if not 0.0 <= utilization < 1.0:
        raise ValueError("utilization must be in [0, 1)")
    return utilization / (1.0 - utilization)


def chat_prompt_tokens(new_tokens: float, output_tokens: float, turns: float, prefix_tokens: float = 0.0) -> float:
    """Mean prompt of a multi-turn chat that resends its history: turn ``k`` (1-based) carries the
    ``k - 1`` earlier turns of ``P + O`` tokens, so over ``T`` turns the mean prompt is
    ``prefix + P + (T - 1) / 2 x (P + O)``. Five turns of 1,024 + 128 tokens: 1,024 + 2 x 1,152 =
    3,328 tokens."""
    return prefix_tokens + new_tokens + max(0.0, turns - 1.0) / 2.0 * (new_tokens + output_tokens)


def closed_loop_users(batch: float, ttft_s: float, tpot_s: float, output_tokens: float, think_time_s: float) -> float:
    """Users a batch serves when each thinks ``Z`` between answers (Little's law): a user generates
    for ``G = TTFT + (O - 1) x TPOT`` then thinks ``Z``, a duty cycle ``d = G / (G + Z)``; a slot
    would serve ``(G + Z) / G`` users with the batch 100% busy, and :func:`busy_users` keeps the
    99th percentile of requests in flight within the batch: ``busy_users(batch, d)``."""
    generating = ttft_s + max(0.0, output_tokens - 1.0) * tpot_s
    if generating <= 0:
        return 0.0
    return float(busy_users(int(batch), generating / (generating + think_time_s)))


Z_99 = 2.3263478740408408
"""The standard normal's 99th percentile."""


def busy_users(batch: int, duty_cycle: float, z: float = Z_99) -> int:
    """Users a batch of ``B`` slots serves when each is generating a share ``d`` of the time:
    the most users ``N`` whose concurrent requests stay within ``B`` at the 99th percentile.

    ``N`` users each busy with probability ``d``, independently, keep ``Binomial(N, d)``
    requests in flight: the finite-source queue with as many servers as users (Engset's system;
    its busy-count distribution is binomial whatever the service time, L. Kleinrock, *Queueing
    Systems* vol. 1, 1975, ch. 3, the M/M/inf//M system). ``B / d`` users fill the batch *on
    average*, so half the time more are in flight than the batch holds and they queue (with
    ``B / d`` users, 987 for Llama-3.1-8B on an H100 at the default user model, servecap's
    simulation gives a mean TTFT of 2.06 s against the 2 s SLO). Asking that the 99th percentile
    fit, by the normal approximation ``N d + z sqrt(N d (1 - d)) <= B`` (``z = 2.326``), and
    solving the quadratic in ``s = sqrt(N)``:

        s = (-a + sqrt(a^2 + 4 d B)) / (2 d),   a = z sqrt(d (1 - d)),   N = floor(s^2),

    never below ``B`` (``B`` users never exceed ``B`` slots). The batch is then busy a fraction
    ``N d / B``: 0.91 for 390 slots at ``d`` = 0.395 (900 users, not 987); small batches derate
    more (40 slots at ``d`` = 0.4: 75 users, 0.75). By hand: ``B`` = 390, ``d`` = 0.395: ``a`` = 1.1373,
    ``s`` = (-1.1373 + sqrt(1.2935 + 616.2)) / 0.79 = 30.01, ``N`` = 900."""
    if batch <= 0 or not duty_cycle > 0:
        return 0
    d = min(1.0, duty_cycle)
    if d >= 1.0:
        return batch
    a = z * math.sqrt(d * (1.0 - d))
    s = (-a + math.sqrt(a * a + 4.0 * d * batch)) / (2.0 * d)
    return max(batch, int(s * s + 1e-9))


def busy_fraction(batch: int, duty_cycle: float) -> float:
    """The share of the batch :func:`busy_users` keep busy on average: ``N d / B``."""
    if batch <= 0 or not duty_cycle > 0:
        return 0.0
    return min(1.0, busy_users(batch, duty_cycle) * min(1.0, duty_cycle) / batch)


def inflight_at_rate(
    cost: StepCost,
    request: RequestShape,
    eff: Efficiency,
    max_num_batched_tokens: int,
    rate_req_s: float,
    max_batch: int,
) -> float | None:
    """Requests in flight on one replica serving ``rate_req_s`` in steady state: the fixed point
    of Little's law ``b = rate x E2E(b)``, ``E2E(b) = ttft_s(b) + (O - 1) x tpot_s(b)``
    (iterated with damping from ``b = 1``); None when it exceeds ``max_batch`` (the rate is
    beyond what the batch serves). The in-flight count grows much faster than the rate near
    capacity (Llama-3.1-8B on an H100, 1,024 + 128 tokens: 25 at half the service rate, 98 at
    90%, 390 at 100%), which is why an in-flight autoscaling target must sit well below it."""
    if rate_req_s <= 0:
        return 0.0
    out = max(0, request.output_tokens - 1)

    def e2e(b: float) -> float:
        n = max(1, round(b))
        tpot = steady_state(cost, n, request, eff, max_num_batched_tokens).tpot_s
        return ttft_s(cost, n, request, eff, max_num_batched_tokens) + out * tpot

    b = 1.0
    for _ in range(100):
        nb = rate_req_s * e2e(b)
        if nb > max_batch:
            return None
        if abs(nb - b) < 0.01:
            return nb
        b = 0.5 * b + 0.5 * nb
    return b
