"""The synthetic agentic generator: its contexts grow by their block hashes, its fitted
parameters come back from its own output, and the shipped ``agentic`` sample is its output."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from servecap.errors import ServecapError
from servecap.workload import generate_requests, workload_from_dict
from servecap.workload.agentic import fit_agentic, generate_agentic
from servecap.workload.agentic_spec import AgenticArrival
from servecap.workload.arrival_trace import ArrivalTrace
from servecap.workload.samples import trace_path
from servecap.workload.trace import load_trace

SAMPLE_SPEC = AgenticArrival(
    sessions=40, session_rate_per_s=0.5, turns_mean=6, subagent_probability=0.2, subagent_turns_mean=3, system_prompts=2
)


def _as_trace(spec: AgenticArrival, seed: int) -> ArrivalTrace:
    a = generate_agentic(spec, np.random.default_rng(seed))
    return ArrivalTrace(
        a.arrival_s, a.prompt_tokens, a.output_tokens, a.prefix_group, a.prefix_tokens, a.hash_ids, a.hash_offsets, 512
    )


def test_a_turn_resends_the_previous_context_by_its_block_ids() -> None:
    spec = AgenticArrival(sessions=1, turns_mean=1000, subagent_probability=0.0, max_context_tokens=10**6)
    t = _as_trace(spec, 0)
    assert len(t) > 3
    for j in range(1, 4):
        before, now = t.hashes_of(j - 1).tolist(), t.hashes_of(j).tolist()
        full = int(t.prompt_tokens[j - 1]) // 512
        assert now[:full] == before[:full]  # the earlier prompt's full blocks, unchanged
        assert t.prompt_tokens[j] > t.prompt_tokens[j - 1] + t.output_tokens[j - 1]  # plus its answer and new tokens
        assert len(now) == -(-int(t.prompt_tokens[j]) // 512)
    assert t.hashes_of(0).tolist()[:4] == [0, 1, 2, 3]  # the 2048-token system prompt: 4 shared ids


def test_fit_recovers_the_parameters_of_its_own_output() -> None:
    spec = AgenticArrival(sessions=300, session_rate_per_s=2.0, subagent_probability=0.0)
    fit = fit_agentic(_as_trace(spec, 1))
    got = fit.spec
    assert got.system_prompt_tokens == 2048 and got.system_prompts == 1
    assert got.session_rate_per_s == pytest.approx(2.0, rel=0.15)
    assert got.turns_mean == pytest.approx(8.0, rel=0.15)  # compactions start a few "sessions" of their own
    assert got.first_prompt_tokens == pytest.approx(1500, rel=0.1)
    assert got.turn_new_tokens == pytest.approx(400, rel=0.1)
    assert got.output_tokens == pytest.approx(200, rel=0.05)
    assert got.output_sigma == pytest.approx(0.8, rel=0.1)
    assert got.turn_gap_s == pytest.approx(5.0, rel=0.1)


def test_fit_of_the_mooncake_sample_finds_its_shared_block() -> None:
    fit = fit_agentic(load_trace(trace_path("sample:mooncake-conversation")))
    assert fit.spec.system_prompt_tokens == 512  # id 0 opens every request
    assert fit.sessions_found == 75 and fit.continuations == 0  # the file's first minute: no second turns yet
    with pytest.raises(ServecapError, match="block-hash trace"):
        fit_agentic(load_trace(trace_path("sample:azure-code-2023")))


def test_the_agentic_sample_is_the_generator_output() -> None:
    a = generate_agentic(SAMPLE_SPEC, np.random.default_rng(2026))
    lines = Path(trace_path("sample:agentic")).read_text().splitlines()
    assert len(lines) == len(a)
    for i in (0, len(a) // 2, len(a) - 1):
        row = json.loads(lines[i])
        assert row["prompt_tokens"] == a.prompt_tokens[i] and row["output_tokens"] == a.output_tokens[i]
        assert row["hash_ids"] == a.hash_ids[a.hash_offsets[i] : a.hash_offsets[i + 1]].tolist()
        assert row["arrival_s"] == pytest.approx(a.arrival_s[i], abs=1e-6)


def test_workload_file_key_and_its_ranges() -> None:
    w = workload_from_dict({"arrival": {"kind": "agentic", "sessions": 3, "turns_mean": 2}, "num_requests": 4})
    reqs = generate_requests(w, np.random.default_rng(0))
    assert len(reqs) == 4 and all(r.hash_blocks is not None for r in reqs)
    assert generate_requests(w, np.random.default_rng(0)) == reqs  # the RNG passed in decides
    for bad, match in (
        ({"sessions": 0}, "sessions"),
        ({"turn_gap_s": -1}, "turn_gap_s"),
        ({"subagent_probability": 1.5}, "subagent_probability"),
        ({"session_rate_per_s": 1e-300}, "session_rate_per_s"),
        ({"output_tokens": 1e300}, "output_tokens"),
        ({"system_prompt_tokens": 200_000}, "max_context_tokens"),
        ({"sessions": 1_000_000, "turns_mean": 1000}, "over the limit"),
    ):
        with pytest.raises(ServecapError, match=match):
            workload_from_dict({"arrival": {"kind": "agentic", **bad}})
    with pytest.raises(ServecapError, match="supplies the lengths"):
        workload_from_dict({"arrival": {"kind": "agentic"}, "prompt_tokens": 5, "output_tokens": 5})
    with pytest.raises(ValidationError):
        AgenticArrival(turns_mean=float("nan"))


def test_sizes_whose_block_ids_would_not_fit_memory_are_refused_at_once() -> None:
    """Each value in range, together: 16-token blocks of 10M-token prompts (a million ids a
    request), or ten million requests of 131,072-token contexts. The ids every request carries are
    estimated from the lengths' means and refused past 200,000,000 (the draws took minutes and
    gigabytes before being refused by nothing)."""
    huge = {"first_prompt_tokens": 1e7, "turn_new_tokens": 1e7, "max_context_tokens": 2**24, "block_tokens": 16}
    for bad in (
        {"sessions": 10, "turns_mean": 1000, **huge},
        {"sessions": 10_000, "turns_mean": 1000, "subagent_probability": 0, "session_rate_per_s": 1e6},
    ):
        with pytest.raises(ServecapError, match=r"block ids expected .* over the limit of 200,000,000"):
            workload_from_dict({"arrival": {"kind": "agentic", **bad}, "num_requests": 20})
    # the benchmark's million requests (benchmarks/block_hash_speed.py) stay within it
    AgenticArrival(sessions=125_000, session_rate_per_s=32.0, max_context_tokens=65536)


def test_many_long_system_prompts_are_drawn_as_used() -> None:
    """100,000 system prompts of 1M tokens in 16-token blocks are 6.25e9 ids: only the ones the
    sessions draw are built."""
    spec = AgenticArrival(
        sessions=3, system_prompts=100_000, system_prompt_tokens=10**6, max_context_tokens=2**24, block_tokens=16
    )
    a = generate_agentic(spec, np.random.default_rng(0), max_requests=5)
    assert len(a) == 5 and int(a.prompt_tokens.min()) > 10**6


def test_a_fitted_value_past_its_range_is_named_not_a_raw_validation_error() -> None:
    """Four sessions behind a shared 2-block system prompt, one of them with a second turn two days
    (172,800 s) after its first: the fitted mean turn gap is past the schema's 86,400 s, and the
    fit names it in one line."""
    day2_s = 172_800.0
    starts = [[0, 1, 2, 3], [0, 1, 5, 6], [0, 1, 8, 9], [0, 1, 11, 12]]
    rows = [(10.0 * i, r) for i, r in enumerate(starts)] + [(day2_s, [0, 1, 2, 3, 4, 13])]
    ids = [i for _, r in rows for i in r]
    offsets = np.cumsum([0] + [len(r) for _, r in rows]).astype(np.int64)
    trace = ArrivalTrace(
        np.array([t for t, _ in rows]),
        np.array([len(r) * 512 - 10 for _, r in rows], dtype=np.int64),
        np.full(5, 100, dtype=np.int64),
        np.full(5, -1, dtype=np.int64),
        np.zeros(5, dtype=np.int64),
        np.array(ids, dtype=np.int64),
        offsets,
        512,
    )
    with pytest.raises(ServecapError, match=r"agentic fit.*turn_gap_s") as err:
        fit_agentic(trace)
    assert "\n" not in str(err.value)
