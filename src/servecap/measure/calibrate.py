"""Fit the step-time model's coefficients to measured runs (``servecap calibrate``).

The model (:meth:`servecap.core.roofline.StepCost.step_time`) prices one engine step as::

    step_s = max(M / bandwidth_efficiency, C / compute_efficiency) + A / bandwidth_efficiency
             + comm_s + step_overhead_s + prefill_s_per_token x P

where ``M`` is the step's memory time at 100% of the spec sheet's HBM bandwidth, ``C`` its
compute time at 100% of peak FLOPs (both for the step's batch shape: weights, KV read, attention
pairs, ...), ``comm_s`` the tensor-parallel all-reduces and ``P`` the prompt tokens the step
prefills, ``A`` the memory time of the activation kernels between the GEMMs at 100% of the
bandwidth (``core/activation_traffic.py``). With ``a = 1/bandwidth_efficiency`` and ``b = 1/compute_efficiency`` this is
piecewise linear in ``(a, b, step_overhead_s, prefill_s_per_token)``, so it is fitted by least
squares once each step is known to be memory- or compute-bound.

**From token times to steps.** An iteration-level scheduler (vLLM, SGLang, TGI, the emulator)
emits one token for every running request at the end of each step, so:

1. Every token arrival of every request is sorted by time and grouped into steps: a new step
   starts when the gap since the previous arrival exceeds ``gap_s`` or when a request already
   in the current group shows up again (a request gets at most one token per step). A step's
   time is its earliest arrival (the least delayed by the client).
2. A step's duration is the time since the previous step, but only when some request has
   tokens in both (it was decoding, so the engine ran back to back: no idle gap between them).
3. Its batch: every request with a token in it and its previous token in the previous step is
   a decode with ``prompt + i`` tokens of context for its token ``i``; every request whose
   first token is in it prefilled its uncached prompt (``prompt - cached``) in that step.
   Steps whose tokens and prefills exceed ``max_num_batched_tokens`` (their prompts were
   chunked over earlier steps that emitted nothing for them) make every step that began after
   those requests were sent unusable, and so does a request resuming after a gap (a preemption and
   recompute of unknown size).
4. ``M``, ``C`` and ``comm_s`` of each usable step come from ``StepCost.step_time`` at unit
   efficiencies (the same code that times the simulator's and the emulator's steps).

**The fit.** Starting from the deployment's default efficiencies, each step is classified
memory- or compute-bound by the current ``a x M`` vs ``b x C``, the linear least-squares problem
``duration - comm = a (M [mem] + A) + b C [compute] + overhead + prefill_per_token x P`` is solved
(numpy ``lstsq``), and the classification is redone until it stops changing (a standard
alternating fit of a max-affine model; Magnani and Boyd, "Convex piecewise-linear fitting",
Optim. Eng. 2009). Steps with residuals beyond 6 median absolute deviations (a GC pause, a
client hiccup) are dropped once and the fit repeated. A coefficient the data cannot determine
(no compute-bound step, no prefill of varied length) keeps its starting value and is named in
``FitResult.fixed``. The all-reduce latency is not fitted (kept from the defaults).

**Which clock.** Token times are the client's arrival times (``MeasuredRequest.token_times_s``); when the
server reported its own schedule (the emulator's opt-in ``servecap_timing.token_times_s``),
``source="server"`` uses that instead, free of network and client jitter (``auto`` picks it
when every request has it). Client times carry a jitter of roughly a millisecond, so fits from
them need more steps (a few hundred) and are good to a few percent; server times fit exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from servecap.calibration import MAX_EFFICIENCY, MIN_EFFICIENCY
from servecap.core.roofline import BatchShape, StepCost, prefill_batch
from servecap.errors import ServecapError
from servecap.results.measured import MeasuredRequest
from servecap.specs.perf import Efficiency

Source = Literal["auto", "client", "server"]
_MAX_ITER = 100


@dataclass(frozen=True, slots=True)
class Timeline:
    """One request's token times on one clock, with what the step shapes need."""

    prompt_tokens: int
    cached_tokens: int
    sent_s: float
    token_times_s: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class StepSample:
    """One step whose duration and batch are both known (times in seconds)."""

    end_s: float
    duration_s: float
    memory_s: float  # at bandwidth_efficiency 1
    compute_s: float  # at compute_efficiency 1
    comm_s: float
    prompt_tokens: int  # prefilled in the step
    num_tokens: int
    num_decodes: int
    activation_s: float = 0.0  # the activation kernels' memory time at bandwidth_efficiency 1


@dataclass(frozen=True, slots=True)
class StepStats:
    steps: int  # groups of token arrivals found
    usable: int  # with a known duration and batch
    contiguous: int  # steps following the previous one back to back
    tainted: int  # dropped: chunked prefills or recomputes of unknown size


@dataclass(frozen=True, slots=True)
class FitResult:
    efficiency: Efficiency
    num_samples: int
    num_memory_bound: int
    num_compute_bound: int
    rmse_s: float
    r2: float
    dropped_outliers: int
    fixed: tuple[str, ...] = ()  # coefficients the data could not determine (start values kept)
    iterations: int = 0
    notes: tuple[str, ...] = field(default=())


def timelines(traces: Sequence[MeasuredRequest], source: Source = "auto") -> tuple[list[Timeline], str]:
    """Each request's token times from the client or from the server's own report; returns
    the timelines and the source used. Requests without tokens are skipped."""
    served = [t for t in traces if t.token_times_s]
    has_server = bool(served) and all(
        isinstance(t.server_timing, dict) and isinstance(t.server_timing.get("token_times_s"), list) for t in served
    )
    if source == "server" and not has_server:
        raise ServecapError(
            "source", source, "the run has no server token times (the emulator's servecap_timing); use client"
        )
    use_server = source == "server" or (source == "auto" and has_server)
    out: list[Timeline] = []
    for t in served:
        if use_server:
            st = t.server_timing or {}
            times = tuple(float(x) for x in st.get("token_times_s") or ())
            sent = float(st.get("received_s", times[0] if times else 0.0))
            cached = int(st.get("cached_tokens", t.cached_prompt_tokens) or 0)
        else:
            times = tuple(t.token_times_s)
            sent = t.sent_s if t.sent_s is not None else t.scheduled_s
            cached = t.cached_prompt_tokens or 0
        if times:
            out.append(Timeline(t.measured_prompt_tokens, cached, sent, times))
    return out, "server" if use_server else "client"


def default_gap_s(lines: Sequence[Timeline]) -> float:
    """A quarter of the median inter-token gap (at least 0.1 ms): arrivals closer than that
    belong to one step."""
    gaps = [b - a for ln in lines for a, b in zip(ln.token_times_s, ln.token_times_s[1:], strict=False)]
    if not gaps:
        return 1e-4
    return max(1e-4, 0.25 * float(np.median(gaps)))


def step_samples(
    lines: Sequence[Timeline],
    cost: StepCost,
    *,
    max_num_batched_tokens: int,
    allreduce_latency_s: float = 10e-6,
    gap_s: float | None = None,
) -> tuple[list[StepSample], StepStats]:
    """The usable steps of one run (see the module docstring, steps 1-4)."""
    gap = default_gap_s(lines) if gap_s is None else gap_s
    events = sorted((t, r, i) for r, ln in enumerate(lines) for i, t in enumerate(ln.token_times_s))
    # 1. group arrivals into steps
    step_of: list[list[int]] = [[0] * len(ln.token_times_s) for ln in lines]
    starts: list[float] = []
    members: list[list[tuple[int, int]]] = []
    last_t = -np.inf
    current: set[int] = set()
    for t, r, i in events:
        if t - last_t > gap or r in current:
            starts.append(t)
            members.append([])
            current = set()
        current.add(r)
        members[-1].append((r, i))
        step_of[r][i] = len(starts) - 1
        last_t = t
    n = len(starts)
    # 3. steps whose prefills cannot all have happened inside them taint everything since
    tainted = [False] * n
    for k in range(n):
        decodes = prefill = 0
        sent_min = np.inf
        for r, i in members[k]:
            if i == 0:
                prefill += max(1, lines[r].prompt_tokens - lines[r].cached_tokens)
                sent_min = min(sent_min, lines[r].sent_s)
            elif step_of[r][i - 1] == k - 1:
                decodes += 1
            else:  # resumed after a gap: a recompute of unknown size
                tainted[k] = True
        if decodes + prefill > max_num_batched_tokens:
            # every step that began (at the previous step's end) after they arrived
            tainted[k] = True
            j = k - 1
            while j >= 1 and starts[j - 1] >= sent_min:
                tainted[j] = True
                j -= 1
    eff1 = Efficiency(
        bandwidth_efficiency=1.0,
        compute_efficiency=1.0,
        step_overhead_s=0.0,
        allreduce_latency_s=allreduce_latency_s,
        prefill_s_per_token=0.0,
    )
    window = cost.window_tokens
    out: list[StepSample] = []
    contiguous = 0
    for k in range(1, n):
        decoding = [(r, i) for r, i in members[k] if i > 0 and step_of[r][i - 1] == k - 1]
        if not decoding:
            continue
        contiguous += 1
        if tainted[k]:
            continue
        kv = wkv = 0.0
        for r, i in decoding:
            ctx = float(lines[r].prompt_tokens + i)
            kv += ctx
            wkv += min(ctx, window) if window else ctx
        nt = ns = len(decoding)
        prompt = 0
        pairs, wpairs = kv, wkv
        for r, i in members[k]:
            if i != 0:
                continue
            s = lines[r].cached_tokens
            chunk = max(1, lines[r].prompt_tokens - s)
            p = prefill_batch(chunk, window, start_tokens=s)
            kv += p.kv_tokens
            wkv += p.window_kv_tokens
            pairs += p.attn_pairs
            wpairs += p.window_attn_pairs
            nt += chunk
            ns += 1
            prompt += chunk
        shape = BatchShape(nt, ns, kv, wkv, pairs, wpairs, prompt)
        st = cost.step_time(shape, eff1)
        out.append(
            StepSample(
                starts[k],
                starts[k] - starts[k - 1],
                st.memory_s,
                st.compute_s,
                st.comm_s,
                prompt,
                nt,
                len(decoding),
                st.activation_s,
            )
        )
    return out, StepStats(n, len(out), contiguous, sum(tainted))


def fit_coefficients(
    samples: Sequence[StepSample], start: Efficiency | None = None, *, fit_prefill: bool = True
) -> FitResult:
    """Least-squares fit of ``(1/bandwidth_eff, 1/compute_eff, overhead, prefill/token)`` to
    the steps' durations (alternating classification, one outlier pass; module docstring)."""
    eff0 = start or Efficiency()
    if len(samples) < 4:
        raise ServecapError(
            "runs",
            len(samples),
            "too few usable steps to fit (need at least 4; measure a run with several requests decoding at once)",
        )
    m = np.array([s.memory_s for s in samples])
    c = np.array([s.compute_s for s in samples])
    y = np.array([s.duration_s - s.comm_s for s in samples])
    p = np.array([float(s.prompt_tokens) for s in samples])
    g = np.array([s.activation_s for s in samples])
    keep = np.ones(len(samples), dtype=bool)
    # start from the explicit values, else the global defaults (BF16 compute)
    a, b = 1.0 / eff0.bandwidth_efficiency_on(""), 1.0 / eff0.compute_efficiency_at("bf16")
    o, q = eff0.step_overhead_on(""), eff0.prefill_s_per_token
    dropped = 0
    iterations = 0
    fixed: set[str] = set()
    for outlier_pass in range(2):
        mem = a * m >= b * c
        for _ in range(_MAX_ITER):
            iterations += 1
            a, b, o, q, fixed = _solve(
                m[keep], c[keep], p[keep], y[keep], mem[keep], (a, b, o, q), fit_prefill, g[keep]
            )
            new = a * m >= b * c
            if np.array_equal(new, mem):
                break
            mem = new
        if outlier_pass == 0:
            resid = y - (np.maximum(a * m, b * c) + a * g + o + q * p)
            mad = max(float(np.median(np.abs(resid - np.median(resid)))), 2e-5)
            ok = np.abs(resid - np.median(resid)) <= 6.0 * 1.4826 * mad
            dropped = int(np.sum(~ok))
            if dropped == 0:
                break
            keep = ok
    pred = np.maximum(a * m, b * c) + a * g + o + q * p
    resid = (y - pred)[keep]
    yk = y[keep]
    ss_tot = float(np.sum((yk - yk.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else 1.0
    mem = (a * m >= b * c)[keep]
    eff = Efficiency(
        bandwidth_efficiency=1.0 / a,
        compute_efficiency=1.0 / b,
        step_overhead_s=o,
        allreduce_latency_s=eff0.allreduce_latency_s,
        prefill_s_per_token=q,
    )
    return FitResult(
        eff,
        int(keep.sum()),
        int(mem.sum()),
        int((~mem).sum()),
        float(np.sqrt(np.mean(resid**2))),
        r2,
        dropped,
        tuple(sorted(fixed)),
        iterations,
    )


_MAX_RELATIVE_SE = 0.25  # a coefficient known to worse than +-25% (one standard error) is not fitted


def _relative_se(x: np.ndarray, y: np.ndarray, sol: np.ndarray, i: int) -> float:
    """Standard error of coefficient ``i`` of a least-squares fit, relative to its value
    (ordinary least squares: cov = s^2 (X^T X)^-1, s^2 = RSS / (n - k))."""
    n, k = x.shape
    if n <= k or sol[i] == 0:
        return float("inf") if sol[i] == 0 else 0.0
    resid = y - x @ sol
    s2 = float(resid @ resid) / (n - k)
    try:
        cov = s2 * np.linalg.inv(x.T @ x)
    except np.linalg.LinAlgError:
        return float("inf")
    return float(np.sqrt(max(cov[i, i], 0.0)) / abs(sol[i]))


_NAMES = {"a": "bandwidth_efficiency", "b": "compute_efficiency", "o": "step_overhead_s", "q": "prefill_s_per_token"}


def _solve(
    m: np.ndarray,
    c: np.ndarray,
    p: np.ndarray,
    y: np.ndarray,
    mem: np.ndarray,
    cur: tuple[float, float, float, float],
    fit_prefill: bool,
    g: np.ndarray,
) -> tuple[float, float, float, float, set[str]]:
    """One linear least-squares solve with the classification ``mem`` held fixed. A column the
    data cannot determine (no step in its regime, no varied prefill, rank deficiency) keeps its
    value in ``cur`` and is reported; a negative overhead or per-token cost is pinned at 0."""
    val = dict(zip("aboq", cur, strict=True))
    cols = {"a": np.where(mem, m, 0.0) + g, "b": np.where(mem, 0.0, c), "o": np.ones_like(y), "q": p}
    free = [n for n in "aboq" if np.any(cols[n] != 0) and (n != "q" or fit_prefill)]
    undetermined = {n for n in "aboq" if n not in free and (n != "q" or fit_prefill)}
    while free:
        x = np.column_stack([cols[n] for n in free])
        if np.linalg.matrix_rank(x) < len(free):
            drop = next(n for n in ("q", "b", "o", "a") if n in free)
            free.remove(drop)
            undetermined.add(drop)
            continue
        rhs = y - sum((val[n] * cols[n] for n in "aboq" if n not in free), np.zeros_like(y))
        sol, *_ = np.linalg.lstsq(x, rhs, rcond=None)
        got = dict(zip(free, (float(v) for v in sol), strict=True))
        neg = [n for n in ("o", "q") if got.get(n, 0.0) < 0]
        if neg:
            free.remove(neg[0])
            val[neg[0]] = 0.0
            continue
        if "q" in free and _relative_se(x, rhs, sol, free.index("q")) > _MAX_RELATIVE_SE:
            # the per-token prefill cost is near-collinear with compute time (both grow with
            # the prompt): with noisy step times it cannot be told apart, so it keeps its value
            free.remove("q")
            undetermined.add("q")
            continue
        val.update(got)
        break
    if val["a"] <= 0 or val["b"] <= 0:
        raise ServecapError(
            "runs",
            "fit",
            "the fit gave a non-positive efficiency: the steps do not "
            "follow the roofline model (wrong deployment for these runs?)",
        )
    for name in ("a", "b"):
        if not MIN_EFFICIENCY <= 1.0 / val[name] <= MAX_EFFICIENCY:
            raise ServecapError(
                "runs",
                "fit",
                f"the fit gave {_NAMES[name]} {1.0 / val[name]:.3g}, outside [{MIN_EFFICIENCY:g}, "
                f"{MAX_EFFICIENCY:g}]: the steps do not follow the roofline model (wrong deployment for these runs?)",
            )
    return val["a"], val["b"], val["o"], val["q"], {_NAMES[n] for n in undetermined}


def calibrate_runs(
    runs: Sequence[Sequence[MeasuredRequest]],
    cost: StepCost,
    *,
    max_num_batched_tokens: int,
    start: Efficiency | None = None,
    source: Source = "auto",
    fit_prefill: bool = True,
    gap_s: float | None = None,
) -> tuple[FitResult, list[StepStats], str]:
    """Steps of every run pooled, then one fit; also each run's step statistics and the clock
    used (``server`` only when every run has the server's times)."""
    eff0 = start or Efficiency()
    lines_per_run = []
    used: set[str] = set()
    for traces in runs:
        lines, src = timelines(traces, source)
        lines_per_run.append(lines)
        used.add(src)
    if source == "auto" and len(used) > 1:  # mixed: use the client clock everywhere
        lines_per_run = [timelines(traces, "client")[0] for traces in runs]
        used = {"client"}
    samples: list[StepSample] = []
    stats: list[StepStats] = []
    for lines in lines_per_run:
        s, st = step_samples(
            lines,
            cost,
            max_num_batched_tokens=max_num_batched_tokens,
            allreduce_latency_s=eff0.allreduce_latency_s,
            gap_s=gap_s,
        )
        samples += s
        stats.append(st)
    return fit_coefficients(samples, eff0, fit_prefill=fit_prefill), stats, used.pop()
