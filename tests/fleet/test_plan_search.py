"""The replica search: bracket from the closed-form guess, bisect; fewest evaluations."""

from __future__ import annotations

import math

import pytest

from servecap.errors import ServecapError
from servecap.fleet.plan_search import smallest_passing


def _search(guess: int, answer: int | None, limit: int = 512) -> tuple[int | None, list[int], dict[int, bool]]:
    calls: list[int] = []

    def evaluate(n: int) -> tuple[bool, str]:
        calls.append(n)
        return (answer is not None and n >= answer), f"run {n}"

    res = smallest_passing(evaluate, guess, limit=limit)
    return res.answer, calls, {k: v[0] for k, v in res.evaluations.items()}


def test_worked_examples_from_the_docstring() -> None:
    answer, calls, _ = _search(10, 13)
    assert answer == 13 and calls == [10, 11, 13, 12]
    answer, calls, _ = _search(41, 33)
    assert answer == 33 and calls == [41, 37, 29, 33, 31, 32]


@pytest.mark.parametrize("guess", [1, 2, 5, 9, 17, 40])
@pytest.mark.parametrize("truth", [1, 2, 3, 7, 16, 33])
def test_finds_the_smallest_passing_count_with_few_evaluations(guess: int, truth: int) -> None:
    answer, calls, seen = _search(guess, truth)
    assert answer == truth
    assert len(calls) == len(set(calls))  # nothing evaluated twice
    assert len(calls) <= 2 * math.ceil(math.log2(abs(truth - guess) + 1)) + 4
    if truth > 1:
        assert seen[truth - 1] is False  # the evidence: one fewer fails
    assert seen[truth] is True


def test_none_when_even_the_limit_fails() -> None:
    answer, calls, _ = _search(4, None, limit=20)
    assert answer is None and calls[-1] == 20


def test_evidence_pairs_the_answer_with_one_fewer() -> None:
    res = smallest_passing(lambda n: (n >= 6, n * 10), 3)
    assert res.answer == 6 and res.evidence() == (60, 50)


def test_bad_limit_is_one_line() -> None:
    with pytest.raises(ServecapError, match="limit"):
        smallest_passing(lambda n: (True, None), 1, limit=0)
