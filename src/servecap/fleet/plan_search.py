"""The fewest replicas that pass: bracket from a closed-form guess, then bisect.

``passes(n)`` (a simulation of ``n`` replicas) is assumed monotone in ``n`` — more replicas of
the same kind never make a latency percentile worse, up to the noise of one seed. The search:

1. evaluate the guess ``g`` (the closed form's replica count);
2. if it passes, the answer is in ``[1, g]``: step down geometrically (``g - s``, ``g - 3s``,
   ``g - 7s``, ...) until a count fails or 1 passes; if it fails, step up (``g + s``, ``g + 3s``,
   ``g + 7s``, ...) until one passes or ``limit`` fails. The first step ``s`` is
   ``max(1, round(g / 10))``: a closed form is usually within some tens of percent, so the
   bracket is found in one or two steps;
3. bisect the bracket ``(fail, pass]`` to width one.

It costs ``O(log |answer - guess|)`` evaluations (by hand: guess 10, answer 13, s = 1 → 10 ✗,
11 ✗, 13 ✓, 12 ✗: four; guess 41, answer 33, s = 4 → 41 ✓, 37 ✓, 29 ✗, 33 ✓, 31 ✗, 32 ✗: six). Every evaluation is kept, so the caller can report the count, the answer's
figures and those of the next smaller count, which failed.

In parallel (:func:`smallest_passing` with ``evaluate_many`` and ``width`` > 1) the search is
the same, run speculatively: when it needs a count it has not evaluated, the counts it would
need next under either outcome (breadth first over the decision tree, ``width`` in all) are
evaluated together in one batch — on ``width`` workers about ``log2(width + 1)`` steps of the
search per batch. The search itself only reads outcomes it asked for, so its answer and its
``evaluations`` (the counts it asked for, in the order it asked) are those of the serial search,
whatever was evaluated beyond them (``speculated`` counts those).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from servecap.errors import ServecapError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SearchResult(Generic[T]):
    answer: int | None  # the fewest replicas that passed (None: not even ``limit``)
    evaluations: dict[int, tuple[bool, T]]  # replicas -> (passed, what the evaluation returned)
    speculated: int = 0  # counts evaluated in parallel that the search did not need

    @property
    def count(self) -> int:
        return len(self.evaluations)

    def evidence(self) -> tuple[T | None, T | None]:
        """The answer's evaluation and that of one replica fewer (None where not run)."""
        if self.answer is None:
            return None, None
        below = self.evaluations.get(self.answer - 1)
        return self.evaluations[self.answer][1], (below[1] if below is not None else None)


class _Need(Exception):
    def __init__(self, n: int) -> None:
        self.n = n


def smallest_passing(
    evaluate: Callable[[int], tuple[bool, T]],
    guess: int,
    *,
    limit: int = 512,
    lowest: int = 1,
    evaluate_many: Callable[[list[int]], list[tuple[bool, T] | None]] | None = None,
    width: int = 1,
) -> SearchResult[T]:
    """The smallest ``n`` in ``[lowest, limit]`` with ``evaluate(n)[0]`` true (see the module);
    with ``evaluate_many`` and ``width`` > 1, speculatively in batches of ``width`` counts
    (``evaluate_many`` may answer None for a speculative count it could not evaluate, never
    for the first, which the search needs)."""
    if lowest < 1 or limit < lowest:
        raise ServecapError("limit", limit, f"must be >= {max(1, lowest)}")
    if evaluate_many is None or width <= 1:
        seen: dict[int, tuple[bool, T]] = {}

        def ev(n: int) -> bool:
            if n not in seen:
                seen[n] = evaluate(n)
            return seen[n][0]

        return SearchResult(*_search(ev, guess, limit, lowest, seen))
    known: dict[int, tuple[bool, T]] = {}
    while True:
        asked: dict[int, tuple[bool, T]] = {}
        try:
            answer, _ = _search(_replay(known, {}, asked), guess, limit, lowest, asked)
            return SearchResult(answer, asked, speculated=len(known) - len(asked))
        except _Need as need:
            batch = _speculate(known, need.n, guess, limit, lowest, width)
            outs = evaluate_many(batch)
            for n, out in zip(batch, outs, strict=True):
                if out is not None:
                    known[n] = out
            if batch[0] not in known:
                raise ServecapError("replicas", batch[0], "the search's evaluation gave no result") from None


def _replay(
    known: dict[int, tuple[bool, T]], hypothesis: dict[int, bool], asked: dict[int, tuple[bool, T]] | None
) -> Callable[[int], bool]:
    """An outcome function from what is known (then a hypothesis); raises _Need beyond both."""

    def ev(n: int) -> bool:
        if n in known:
            if asked is not None:
                asked[n] = known[n]
            return known[n][0]
        if n in hypothesis:
            return hypothesis[n]
        raise _Need(n)

    return ev


def _speculate(
    known: dict[int, tuple[bool, T]], first: int, guess: int, limit: int, lowest: int, width: int
) -> list[int]:
    """``first`` and the counts the search would need next, breadth first over both outcomes of
    each, up to ``width`` counts."""
    batch = [first]
    frontier: list[dict[int, bool]] = [{first: True}, {first: False}]
    while frontier and len(batch) < width:
        hypothesis = frontier.pop(0)
        try:
            _search(_replay(known, hypothesis, None), guess, limit, lowest, {})
            continue  # the search ends under this hypothesis
        except _Need as need:
            n = need.n
        if n not in batch:
            batch.append(n)
        frontier += [{**hypothesis, n: True}, {**hypothesis, n: False}]
    return batch


def _search(
    ev: Callable[[int], bool], guess: int, limit: int, lowest: int, seen: dict[int, tuple[bool, T]]
) -> tuple[int | None, dict[int, tuple[bool, T]]]:
    """The search of the module doc on an outcome function; (answer, seen)."""

    g = min(max(guess, lowest), limit)
    first = max(1, round(g / 10))
    if ev(g):
        hi, step = g, first
        while True:
            n = hi - step
            if n < lowest:
                if hi == lowest or ev(lowest):
                    return lowest, seen
                lo = lowest
                break
            if not ev(n):
                lo = n
                break
            hi, step = n, step * 2
    else:
        lo, step = g, first
        hi = -1
        while lo < limit:
            n = min(lo + step, limit)
            if ev(n):
                hi = n
                break
            lo, step = n, step * 2
        if hi < 0:
            return None, seen
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ev(mid):
            hi = mid
        else:
            lo = mid
    if hi - 1 >= lowest:
        ev(hi - 1)  # the evidence: one fewer fails (already run in all but edge cases)
    return hi, seen
