"""The fleet plan's split lever: the ratios it tries and its search, on a stand-in simulator
(the real one is exercised in docs/fleet.md's split-or-not examples)."""

from __future__ import annotations

from typing import Any

from servecap.fleet.file_schema import build_fleet, fleet_from_dict
from servecap.planning.model import CandidateModel, FleetEval, FleetPlanRequest
from servecap.planning.pd import ratios_to_try, split_fleet, split_lever, splits_of, verdict


def test_the_ratios_tried_per_size() -> None:
    # shares 1/2, 1/4, 3/8, 5/8, 3/4 of the replicas, at least one a side, without repeats
    assert splits_of(2) == [(1, 1)]
    assert splits_of(3) == [(2, 1), (1, 2)]
    assert splits_of(8) == [(4, 4), (2, 6), (3, 5), (5, 3), (6, 2)]


def _request() -> FleetPlanRequest:
    return FleetPlanRequest.model_validate(
        {"candidates": [{"gpu": "H100"}], "traffic": {"peak_rps": 10}, "max_replicas": 64}
    )


def test_a_split_layout_is_a_valid_disaggregated_fleet_file() -> None:
    req = _request()
    spec, _ = build_fleet(fleet_from_dict(split_fleet(req, req.candidates[0], 3, 5)))
    assert spec.is_disaggregated
    assert [(p.role, p.replicas) for p in spec.pools] == [("prefill", 3), ("decode", 5)]


class _Ctx:
    """Meets the SLOs when prefill >= 3 and decode >= 2 replicas; records what it simulated."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def simulate(self, ff: Any, scored: Any, *, label: str, replicas: int) -> FleetEval:
        p, d = (pool.replicas for pool in ff.pools)
        self.seen.append((p, d))
        ok = p >= 3 and d >= 2
        return FleetEval(
            candidate=label,
            replicas=replicas,
            usd_per_month=100.0 * replicas,
            requests=100,
            ttft_p99_s=0.5,
            tpot_p99_s=0.02,
            attainment=1.0 if ok else 0.5,
            slo_met=ok,
            failed_targets=[],
            targets=[],
            seed=0,
        )


def test_the_lever_finds_the_fewest_replicas_whose_some_ratio_passes() -> None:
    req = _request()
    ctx = _Ctx()
    row = split_lever(ctx, req, CandidateModel(gpu="H100"), None, 8)  # type: ignore[arg-type]
    # 5 is the fewest: 3P+2D (3/8 of 5 rounds to 2, 5/8 to 3); 4 cannot have both
    assert row.replicas == 5 and row.slo_met and row.usd_per_month == 500.0
    assert "3 prefill + 2 decode" in row.change
    assert "3P+2D meets" in row.note and "2P+2D fails" in row.note
    assert row.note.startswith("ratios: ")
    assert (3, 2) in ctx.seen


def test_the_layouts_with_decode_at_twice_the_tp() -> None:
    # units of the candidate's GPUs; a decode replica takes two; a remainder goes to prefill
    assert splits_of(3, 2) == [(1, 1)]
    assert splits_of(6, 2) == [(4, 1), (2, 2)]  # half the units: 3 -> one decode (2), prefill 4; a quarter: 2 + 2x2
    req = _request()
    spec, _ = build_fleet(fleet_from_dict(split_fleet(req, req.candidates[0], 2, 2, 2)))
    assert [(p.role, p.gpus_per_replica) for p in spec.pools] == [("prefill", 1), ("decode", 2)]


def test_the_verdict_names_the_winner_by_how_much_and_both_p99s() -> None:
    def ev(usd: float, ttft: float, tpot: float) -> FleetEval:
        return FleetEval(
            candidate="H100", replicas=1, usd_per_month=usd, requests=1, ttft_p99_s=ttft, tpot_p99_s=tpot,
            attainment=1.0, slo_met=True, failed_targets=[], targets=[], seed=0,
        )  # fmt: skip

    v = verdict(ev(9818.5, 0.401, 0.0174), ev(5891.1, 1.124, 0.0167))
    assert v == (
        "split wins: 1.67x cheaper ($5,891 vs $9,818/month co-located); p99 TTFT 1,124 vs 401 ms, "
        "p99 TPOT 17 vs 17 ms (split vs co-located)"
    )
    assert verdict(ev(5891.1, 0.1, 0.03), ev(7854.8, 0.08, 0.02)).startswith("co-located wins: 1.33x cheaper")


def _missed(*metrics: str) -> FleetEval:
    from servecap.planning.model import TargetOut

    targets = [
        TargetOut(
            group="all", target=m, metric=m, percentile=99.0, max_s=1.0, observed_s=2.0, share_within=0.9, met=False
        )
        for m in metrics
    ]
    return FleetEval(
        candidate="H100", replicas=8, usd_per_month=1.0, requests=1, ttft_p99_s=None, tpot_p99_s=None,
        attainment=0.9, slo_met=False, failed_targets=list(metrics), targets=targets, seed=0,
    )  # fmt: skip


def test_a_ratio_that_missed_tpot_rules_out_those_with_no_more_decode_replicas() -> None:
    splits = splits_of(8)  # [(4, 4), (2, 6), (3, 5), (5, 3), (6, 2)]
    assert ratios_to_try(splits, {}, None) == splits
    # once a share met the targets elsewhere: the three nearest it, 3/8 -> 3P+5D, 4P+4D, 2P+6D
    assert ratios_to_try(splits, {}, 0.375) == [(3, 5), (4, 4), (2, 6)]
    # 4P+4D missed TPOT (alone or with TTFT): short of decode; 4 or more prefill are out
    assert ratios_to_try(splits, {(4, 4): _missed("tpot_s")}, None) == [(2, 6), (3, 5)]
    assert ratios_to_try(splits, {(4, 4): _missed("ttft_s", "tpot_s")}, None) == [(2, 6), (3, 5)]
    # a missed TTFT alone, or another target, rules nothing out (a prefill queue, or a decode
    # side short of KV room holding finished prefills back)
    assert ratios_to_try(splits, {(4, 4): _missed("ttft_s")}, None) == splits[1:]
    assert ratios_to_try(splits, {(4, 4): _missed("e2e_s")}, None) == splits[1:]


class _Never(_Ctx):
    """No split meets the SLOs; every ratio misses TPOT (short of decode replicas)."""

    def simulate(self, ff: Any, scored: Any, *, label: str, replicas: int) -> FleetEval:
        super().simulate(ff, scored, label=label, replicas=replicas)  # records the layout
        return _missed("tpot_s").model_copy(update={"replicas": replicas})


def test_the_search_stops_at_twice_the_chosen_fleet() -> None:
    ctx = _Never()
    row = split_lever(ctx, _request(), CandidateModel(gpu="H100"), None, 8)  # type: ignore[arg-type]
    assert row.replicas is None and not row.slo_met
    assert row.note == (
        "co-located wins: no split of up to 16 replicas meets the SLOs (2.0x the chosen 8); "
        "ratios: 4P+12D fails (90%), 8P+8D fails (90%)"
    )
    # the largest size first: 8P+8D misses TPOT, 4P+12D too, leaving no ratio of 16 (fewer
    # decode replicas would not do better) and so no smaller size: two simulations in all
    assert ctx.seen == [(8, 8), (4, 12)]
    assert row.simulations == 2
