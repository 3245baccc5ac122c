"""The replica search: bracket from the closed-form guess, bisect; fewest evaluations."""

from __future__ import annotations

import math
import random
from typing import Any

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


@pytest.mark.parametrize("width", [2, 3, 4, 8])
def test_the_speculative_search_asks_what_the_serial_one_asks(width: int) -> None:
    """Batches of ``width`` counts: the same answer and evaluations (in the same order) as the
    serial search, on monotone and on noisy (non-monotone) outcomes."""
    rng = random.Random(width)
    for _ in range(400):
        answer, guess, limit = rng.randint(1, 80), rng.randint(1, 80), rng.choice([40, 100, 512])
        noise = {rng.randint(1, 80): rng.random() < 0.5 for _ in range(rng.randint(0, 4))}

        def f(n: int, answer: int = answer, noise: dict[int, bool] = noise) -> tuple[bool, int]:
            return noise.get(n, n >= answer), n

        serial = smallest_passing(f, guess, limit=limit)
        batches: list[list[int]] = []

        def many(ks: list[int], batches: list[list[int]] = batches, f: Any = f) -> list[tuple[bool, int] | None]:
            batches.append(ks)
            return [f(k) for k in ks]

        par = smallest_passing(f, guess, limit=limit, evaluate_many=many, width=width)
        assert par.answer == serial.answer
        assert list(par.evaluations.items()) == list(serial.evaluations.items())
        assert all(len(b) <= width for b in batches)
        assert len(batches) <= len(serial.evaluations)


def test_speculation_saves_rounds_on_the_worked_example() -> None:
    """guess 41, answer 33: six serial evaluations; three rounds of three."""
    rounds: list[list[int]] = []

    def many(ks: list[int]) -> list[tuple[bool, int] | None]:
        rounds.append(ks)
        return [(k >= 33, k) for k in ks]

    res = smallest_passing(lambda n: (n >= 33, n), 41, evaluate_many=many, width=3)
    assert res.answer == 33 and list(res.evaluations) == [41, 37, 29, 33, 31, 32]
    assert len(rounds) == 3 and res.speculated == sum(len(r) for r in rounds) - 6
