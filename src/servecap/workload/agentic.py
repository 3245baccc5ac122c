"""Synthetic agentic sessions with block hashes (:class:`AgenticArrival`), and the parameters
fitted to a block-hash trace (:func:`fit_agentic`).

A context is a token count and the ids of its ``block_tokens``-token blocks, prefix ids in the
Mooncake sense (equal id at a position, equal tokens up to the block's end): growing a context
keeps the ids of its full blocks and gives fresh ids to the rest (the old partial tail block
gains tokens, so its content, hence its id, changes). Draw order per session is fixed (start,
task, turns; per turn: new tokens, answer, gap, sub-agent draw), so one spec and one seed give
one stream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from servecap.errors import ServecapError, from_validation_error
from servecap.workload.agentic_spec import AgenticArrival
from servecap.workload.arrays import RequestArrays
from servecap.workload.arrival_trace import ArrivalTrace


@dataclass(slots=True)
class _Context:
    tokens: int
    ids: list[int]


class _Ids:
    """Fresh block ids (system prompts' ids come first, shared by every session)."""

    __slots__ = ("next",)

    def __init__(self, start: int) -> None:
        self.next = start

    def grow(self, ctx: _Context, add: int, block: int) -> None:
        full = ctx.tokens // block
        ctx.tokens += add
        need = -(-ctx.tokens // block)
        del ctx.ids[full:]
        ctx.ids.extend(range(self.next, self.next + need - full))
        self.next += need - full


def _lognormal(rng: np.random.Generator, median: float, sigma: float) -> int:
    return max(1, round(median * math.exp(sigma * rng.standard_normal()))) if sigma else max(1, round(median))


def _turns(rng: np.random.Generator, mean: float) -> int:
    return int(rng.geometric(1.0 / mean))  # support 1, 2, ...: mean turns


def generate_agentic(
    spec: AgenticArrival, rng: np.random.Generator, *, max_requests: int | None = None
) -> RequestArrays:
    """The sessions' requests, sorted by arrival (ties: in the order drawn)."""
    b = spec.block_tokens
    sys_full = spec.system_prompt_tokens // b

    def system_ids(k: int) -> list[int]:  # system prompt k's full blocks (built when used)
        return list(range(k * sys_full, (k + 1) * sys_full))

    ids = _Ids(spec.system_prompts * sys_full)
    rows: list[tuple[float, int, int, int, list[int]]] = []  # (arrival, order, prompt, output, ids)
    starts = np.cumsum(rng.exponential(1.0 / spec.session_rate_per_s, spec.sessions))
    limit = max_requests if max_requests is not None else 10_000_000

    def run_agent(t: float, system: int, task: int, turns: int, depth: int) -> tuple[float, int]:
        """One agent's turns from ``t``; returns when its last answer is back and its length."""
        ctx = _Context(sys_full * b, system_ids(system))
        ids.grow(ctx, spec.system_prompt_tokens - sys_full * b + task, b)
        answer = 0
        for turn in range(turns):
            if len(rows) >= limit:  # nothing more is kept: the draws after it change no row
                break
            if turn:
                ids.grow(ctx, _lognormal(rng, spec.turn_new_tokens, spec.turn_new_sigma), b)
            if ctx.tokens > spec.max_context_tokens:  # compaction: the system prompt and a summary
                ctx = _Context(sys_full * b, system_ids(system))
                ids.grow(ctx, spec.system_prompt_tokens - sys_full * b + max(1, round(spec.turn_new_tokens)), b)
            answer = _lognormal(rng, spec.output_tokens, spec.output_sigma)
            if len(rows) < limit:
                rows.append((t, len(rows), ctx.tokens, answer, list(ctx.ids)))
            ids.grow(ctx, answer, b)
            t += float(rng.exponential(spec.turn_gap_s)) if spec.turn_gap_s else 0.0
            if depth == 0 and turn + 1 < turns and rng.uniform() < spec.subagent_probability:
                sub_task = _lognormal(rng, spec.first_prompt_tokens, spec.first_prompt_sigma)
                t, sub_answer = run_agent(t, system, sub_task, _turns(rng, spec.subagent_turns_mean), depth + 1)
                ids.grow(ctx, sub_answer, b)  # the parent reads the sub-agent's result
        return t, answer

    for s in range(spec.sessions):
        system = int(rng.integers(spec.system_prompts))
        task = _lognormal(rng, spec.first_prompt_tokens, spec.first_prompt_sigma)
        run_agent(float(starts[s]), system, task, _turns(rng, spec.turns_mean), 0)
        if len(rows) >= limit:
            break
    rows.sort(key=lambda r: (r[0], r[1]))
    n = len(rows)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(r[4]) for r in rows], out=offsets[1:])
    return RequestArrays(
        np.array([r[0] for r in rows], dtype=np.float64),
        np.array([r[2] for r in rows], dtype=np.int64),
        np.array([r[3] for r in rows], dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
        hash_ids=np.fromiter((x for r in rows for x in r[4]), dtype=np.int64, count=int(offsets[-1])),
        hash_offsets=offsets,
        trace_block_tokens=b,
    )


# ---- fitting ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgenticFit:
    """:func:`fit_agentic`'s answer: the parameters, and what they were read from."""

    spec: AgenticArrival
    sessions_found: int
    continuations: int  # requests found to extend an earlier request's context


def _lognormal_fit(values: list[float]) -> tuple[float, float]:
    x = np.log(np.maximum(np.asarray(values, dtype=np.float64), 1.0))
    return float(np.exp(x.mean())), float(min(4.0, x.std()))


def fit_agentic(trace: ArrivalTrace) -> AgenticFit:
    """Parameters of :class:`AgenticArrival` read off a block-hash trace.

    A request *continues* an earlier one when its ids start with all of the earlier request's
    full-block ids and reach past them (the earlier prompt, then its answer and new tokens:
    the next turn of the same agent) past the prefix at least half of all requests share (the
    system prompt); the latest such request is its predecessor. Requests with
    no predecessor start sessions. Read off: the session rate (starts over the span), turns per
    session, the shared system prompt (the longest id prefix shared by at least half the
    session starts, and how many distinct ones), the first prompt past it and each turn's new
    tokens (prompt minus the predecessor's prompt and answer) and answers (log-normal: the
    median and the deviation of the logs), and the gap between consecutive turns (mean). A
    block-hash trace does not mark sub-agents: ``subagent_probability`` is 0 (a sub-agent shows
    as a session of its own sharing the system prompt)."""
    n = len(trace)
    if not trace.has_hashes or n < 2:
        raise ServecapError("trace", trace.format, "fitting agentic sessions needs a block-hash trace of 2+ requests")
    b = trace.trace_block_tokens
    all_ids = [trace.hashes_of(j).tolist() for j in range(n)]
    shared, _ = _system_prefix(all_ids)  # the prefix every agent starts with
    ends: dict[tuple[int, int], int] = {}  # (last full-block id, its position) -> request
    pred = [-1] * n
    for j in range(n):
        ids = all_ids[j]
        for k in range(len(ids) - 2, shared - 1, -1):
            i = ends.get((ids[k], k))
            if i is not None:
                pred[j] = i
                break
        full = int(trace.prompt_tokens[j]) // b
        if full > shared:  # a prompt no longer than the shared prefix continues nothing of its own
            ends[(ids[full - 1], full - 1)] = j
    starts = [j for j in range(n) if pred[j] < 0]
    cont = [j for j in range(n) if pred[j] >= 0]
    _, systems = _system_prefix([all_ids[j] for j in starts])
    sys_tokens = shared * b
    first_s, last_s = float(trace.arrival_s[starts[0]]), float(trace.arrival_s[starts[-1]])
    # session starts over the time they span (n starts span n - 1 gaps); one start: the trace's span
    rate = (len(starts) - 1) / (last_s - first_s) if last_s > first_s else 1.0 / max(1e-6, float(trace.arrival_s[-1]))
    first = [max(1.0, float(trace.prompt_tokens[j]) - sys_tokens) for j in starts]
    new = [
        max(1.0, float(trace.prompt_tokens[j] - trace.prompt_tokens[pred[j]] - trace.output_tokens[pred[j]]))
        for j in cont
    ]
    gaps = [float(trace.arrival_s[j] - trace.arrival_s[pred[j]]) for j in cont]
    fp, fs = _lognormal_fit(first)
    nt, ns = _lognormal_fit(new) if new else (400.0, 1.0)
    out, osig = _lognormal_fit([float(x) for x in trace.output_tokens])
    max_ctx = int(trace.prompt_tokens.max())
    try:  # a fitted value past its schema range is named, as a hand-written one would be
        spec = AgenticArrival(
            sessions=len(starts),
            session_rate_per_s=max(1e-6, min(1e6, rate)),
            turns_mean=max(1.0, n / len(starts)),
            system_prompts=systems,
            system_prompt_tokens=min(sys_tokens, max_ctx - 1),
            first_prompt_tokens=fp,
            first_prompt_sigma=fs,
            turn_new_tokens=nt,
            turn_new_sigma=ns,
            output_tokens=out,
            output_sigma=osig,
            turn_gap_s=float(np.mean(gaps)) if gaps else 0.0,
            subagent_probability=0.0,
            max_context_tokens=max(16, max_ctx),
            block_tokens=max(16, b),
        )
    except ValueError as err:  # pydantic's ValidationError
        raise from_validation_error(err, "agentic fit") from None
    return AgenticFit(spec, len(starts), len(cont))


def _system_prefix(start_ids: list[list[int]]) -> tuple[int, int]:
    """(blocks of the longest id prefix shared by at least half the session starts, how many
    distinct prefixes of that length at least two starts share)."""
    if not start_ids:
        return 0, 1
    k = 0
    while True:
        counts: dict[tuple[int, ...], int] = {}
        for ids in start_ids:
            if len(ids) > k + 1:  # a start's own last block is its task, never the system prompt
                key = tuple(ids[: k + 1])
                counts[key] = counts.get(key, 0) + 1
        if not counts or max(counts.values()) * 2 < len(start_ids):
            break
        k += 1
    if k == 0:
        return 0, 1
    counts = {}
    for ids in start_ids:
        if len(ids) > k:
            key = tuple(ids[:k])
            counts[key] = counts.get(key, 0) + 1
    return k, max(1, sum(1 for c in counts.values() if c >= 2))


__all__ = ["AgenticFit", "fit_agentic", "generate_agentic"]
