"""The fleet planner's decisions, worked by hand with a fake simulator (no engine runs): which
candidate is searched first, where the break-even count prunes one that cannot win, which
candidate wins, and why each lever is ruled out on a given winner."""

from __future__ import annotations

import math
from typing import Any, cast

import pytest

from servecap.errors import ServecapError
from servecap.fleet.file_schema import FleetFile
from servecap.fleet.plan_search import SearchResult
from servecap.planning.levers import run_levers
from servecap.planning.model import CandidateModel, FleetEval, FleetPlanRequest, Stage, TrafficModel
from servecap.planning.run import Closed, Searched, Winner, candidate_out, no_candidate_error, search_all

HOURS_PER_MONTH = 730.0


class FakeCtx:
    """The planner's Context as the search sees it: a candidate passes at ``need[label]``
    replicas or more; every simulation is logged as (label, replicas)."""

    def __init__(self, need: dict[str, int | None]) -> None:
        self.need = need
        self.calls: list[tuple[str, int]] = []
        self.notes: list[str] = []

    def enter(self, stage: Stage) -> None:
        pass

    def width(self, scored: object) -> int:
        return 1

    def count(self, ev: FleetEval) -> None:
        pass

    def simulate(
        self, ff: FleetFile, scored: object, *, label: str, replicas: int, seed: int | None = None
    ) -> FleetEval:
        assert ff.pools[0].replicas == replicas  # the fleet simulated is the count asked
        self.calls.append((label, replicas))
        need = self.need[label]
        ok = need is not None and replicas >= need
        attainment = 1.0 if ok else 0.5 + 0.01 * replicas
        return _eval(label, replicas, ok, attainment)


def _eval(label: str, replicas: int, ok: bool, attainment: float = 1.0) -> FleetEval:
    return FleetEval(
        candidate=label,
        replicas=replicas,
        usd_per_month=0.0,
        requests=100,
        ttft_p99_s=0.5,
        tpot_p99_s=0.02,
        attainment=attainment,
        slo_met=ok,
        failed_targets=[] if ok else ["all: p99 TTFT <= 2,000 ms"],
        targets=[],
        seed=0,
    )


def _request(*gpus: tuple[str, float], **kw: Any) -> FleetPlanRequest:
    cands = [CandidateModel(gpu=g, name=g, price_per_gpu_hour=price) for g, price in gpus]
    return FleetPlanRequest(candidates=cands, traffic=TrafficModel(peak_rps=40.0), **kw)


def _closed(price: float, req_s: float) -> Closed:
    return Closed(gpus_per_replica=1, price_per_gpu_hour=price, req_s_per_replica=req_s, e2e_s=1.0, cold_start_s=0.0)


def _search(request: FleetPlanRequest, ctx: FakeCtx, closed: list[Closed]) -> list[Searched]:
    return search_all(request, cast(Any, ctx), closed, cast(Any, None), 40.0)


def test_the_candidate_cheapest_in_closed_form_is_searched_first_and_prunes_a_dearer_one() -> None:
    # A: $2/h, 10 req/s a replica -> guess 4 replicas, $8/h; B: $3/h, 20 req/s -> 2, $6/h: B first.
    # B passes at 3 ($9/h). A's break-even: ceil(9 / 2) - 1 = 4 replicas ($8/h < $9/h); A needs 5,
    # so it fails there and its search stops after that one simulation.
    request = _request(("A", 2.0), ("B", 3.0))
    ctx = FakeCtx({"A": 5, "B": 3})
    a, b = _search(request, ctx, [_closed(2.0, 10.0), _closed(3.0, 20.0)])
    assert ctx.calls[0] == ("B", 2) and ("A", 4) in ctx.calls
    assert [c for c in ctx.calls if c[0] == "A"] == [("A", 4)]
    assert b.result.answer == 3 and a.result.answer is None and a.pruned_at == 4
    out_a = candidate_out(request, a, 40.0)
    assert out_a.replicas is None and out_a.simulations == 1
    assert out_a.note == "more than 4 replicas: it costs more than the cheapest (its break-even count fails)"
    out_b = candidate_out(request, b, 40.0)
    assert out_b.usd_per_month == pytest.approx(3 * 3.0 * HOURS_PER_MONTH)


def test_a_candidate_that_passes_at_its_break_even_count_wins_on_price() -> None:
    # the same, but A passes at 4 replicas: $8/h beats B's $9/h although B was found first
    request = _request(("A", 2.0), ("B", 3.0))
    ctx = FakeCtx({"A": 4, "B": 3})
    searched = _search(request, ctx, [_closed(2.0, 10.0), _closed(3.0, 20.0)])
    outs = [candidate_out(request, s, 40.0) for s in searched]
    usd = {o.name: o.usd_per_month for o in outs}
    assert usd == {"A": pytest.approx(4 * 2.0 * HOURS_PER_MONTH), "B": pytest.approx(3 * 3.0 * HOURS_PER_MONTH)}
    assert min((o.usd_per_month or math.inf, o.name) for o in outs)[1] == "A"  # run_plan's choice
    assert outs[0].req_s_per_replica == pytest.approx(10.0)  # 40 req/s over 4 replicas


def test_a_candidate_whose_one_replica_costs_more_is_not_simulated() -> None:
    # C: $20/h a replica; after B at $9/h its break-even is ceil(9 / 20) - 1 = 0 replicas
    request = _request(("B", 3.0), ("C", 20.0))
    ctx = FakeCtx({"B": 3, "C": 1})
    _, c = _search(request, ctx, [_closed(3.0, 20.0), _closed(20.0, 40.0)])
    assert all(label != "C" for label, _ in ctx.calls)
    assert c.pruned_at == 0 and candidate_out(request, c, 40.0).note.startswith("one replica already costs more")


def test_without_pruning_every_candidate_is_searched_to_its_answer() -> None:
    request = _request(("A", 2.0), ("B", 3.0), prune_candidates=False)
    ctx = FakeCtx({"A": 5, "B": 3})
    a, b = _search(request, ctx, [_closed(2.0, 10.0), _closed(3.0, 20.0)])
    assert (a.result.answer, b.result.answer) == (5, 3) and a.pruned_at is None
    # A: 5 x $2 = $10/h, B: 3 x $3 = $9/h: B wins
    assert candidate_out(request, b, 40.0).usd_per_month < candidate_out(request, a, 40.0).usd_per_month  # type: ignore[operator]


def test_no_candidate_passing_names_the_failed_target_and_the_best_attainment() -> None:
    request = _request(("A", 2.0), ("B", 3.0), max_replicas=6)
    ctx = FakeCtx({"A": None, "B": None})
    searched = _search(request, ctx, [_closed(2.0, 10.0), _closed(3.0, 20.0)])
    err = no_candidate_error([candidate_out(request, s, 40.0) for s in searched], 6)
    # the best attainment seen is the most replicas tried (0.5 + 0.01 x 6 at the limit)
    assert err.field == "slo" and err.value == "all: p99 TTFT <= 2,000 ms"
    assert "up to 6 replicas" in str(err) and "x 6, has 56.0% of requests" in str(err)


def _winner(c: CandidateModel, others: list[tuple[CandidateModel, float]] = ()) -> Winner:  # type: ignore[assignment]
    best = Searched(c, _closed(c.price_per_gpu_hour or 2.0, 10.0), 4, SearchResult(4, {4: (True, _eval("w", 4, True))}))
    searched = [best, *(Searched(o, _closed(p, 10.0), 4, SearchResult(None, {})) for o, p in others)]
    return Winner(best, searched, cast(Any, None), 4, 40.0, None, cast(Any, None), 3600.0, {})


def test_each_lever_ruled_out_says_why_without_a_simulation() -> None:
    c = CandidateModel(gpu="H100", name="H100", kv_cache_dtype="fp8", price_per_gpu_hour=2.0)
    request = FleetPlanRequest(
        candidates=[c],
        traffic=TrafficModel(peak_rps=40.0),
        levers=["fp8-kv", "cheaper-gpu", "scale-ahead", "warm-pool", "overflow"],
        small_model="meta-llama/Llama-3.1-8B",  # the model the fleet runs
    )
    ctx = FakeCtx({})
    rows, skipped = run_levers(request, cast(Any, ctx), _winner(c))
    assert rows == [] and ctx.calls == []
    assert skipped == [
        "fp8-kv: the chosen fleet already stores its KV cache in FP8",
        "cheaper-gpu: no candidate has a lower $/GPU-hour than the chosen one (set cheaper_gpu)",
        "scale-ahead: the traffic has no daily curve (a fixed fleet)",
        "warm-pool: the traffic has no daily curve (a fixed fleet)",
        "overflow: the chosen fleet already runs meta-llama/Llama-3.1-8B, the overflow model: "
        "name a smaller model with small_model (--small-model)",
    ]


def test_a_larger_overflow_model_is_ruled_out_by_its_size() -> None:
    c = CandidateModel(gpu="H100", name="H100", price_per_gpu_hour=2.0)
    request = FleetPlanRequest(
        candidates=[c], traffic=TrafficModel(peak_rps=40.0), levers=["overflow"], small_model="meta-llama/Llama-3.1-70B"
    )
    _, skipped = run_levers(request, cast(Any, FakeCtx({})), _winner(c))
    assert skipped == [
        "overflow: meta-llama/Llama-3.1-70B is not smaller than the chosen fleet's meta-llama/Llama-3.1-8B: "
        "name a smaller model with small_model (--small-model)"
    ]


def test_a_cheaper_searched_candidate_is_the_cheaper_gpu_levers_row_without_a_simulation() -> None:
    c = CandidateModel(gpu="H100", name="H100", price_per_gpu_hour=3.0)
    cheap = CandidateModel(gpu="L40S", name="L40S", price_per_gpu_hour=1.0)
    request = FleetPlanRequest(candidates=[c, cheap], traffic=TrafficModel(peak_rps=40.0), levers=["cheaper-gpu"])
    ctx = FakeCtx({})
    rows, skipped = run_levers(request, cast(Any, ctx), _winner(c, [(cheap, 1.0)]))
    assert skipped == [] and ctx.calls == [] and len(rows) == 1
    row = rows[0]
    assert row.name == "cheaper-gpu" and row.change.startswith("L40S (1.00 $/GPU-hour, 1 per replica)")
    assert row.replicas is None and not row.slo_met and row.note == "no count meets the SLOs"


def test_an_unknown_lever_is_one_line_with_a_suggestion() -> None:
    c = CandidateModel(gpu="H100", name="H100", price_per_gpu_hour=2.0)
    request = FleetPlanRequest(candidates=[c], traffic=TrafficModel(peak_rps=40.0), levers=["fp8kv"])
    with pytest.raises(ServecapError, match=r"levers.*fp8kv.*fp8-kv"):
        run_levers(request, cast(Any, FakeCtx({})), _winner(c))
