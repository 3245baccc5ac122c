"""servecap fleet plan: the cheapest fleet with its evidence, levers, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from servecap.app.fleet_plan import FleetPlanResponse, fleet_plan, plan_request_from_dict
from servecap.catalog import lookup_gpu
from servecap.cli.main import cli, run
from servecap.errors import ServecapError
from servecap.validation.interval import replica_interval

SMALL_WORKLOAD: dict[str, Any] = {
    "arrival": {"kind": "poisson", "rate_per_s": 1},
    "prompt_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.5, "max": 2000},
    "output_tokens": {"kind": "lognormal", "median": 100, "sigma": 0.5, "max": 500},
    "duration_s": 600,
}


def _request(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "model": "meta-llama/Llama-3.1-8B",
        "candidates": [{"gpu": "H100", "max_model_len": 4096}, {"gpu": "A100-80GB", "max_model_len": 4096}],
        "traffic": {"peak_rps": 150, "workload": SMALL_WORKLOAD},
        "slo": {"ttft_s": {"p99": 0.5}, "tpot_s": {"p99": 0.03}},
        "tail_samples": 10,
        "levers": ["router", "fp8-kv", "cheaper-gpu"],
    }
    raw.update(over)
    return raw


@pytest.fixture(scope="module")
def planned() -> FleetPlanResponse:
    return fleet_plan(plan_request_from_dict(_request()))


def test_the_chosen_fleet_passes_and_one_fewer_fails(planned: FleetPlanResponse) -> None:
    r = planned
    assert r.fleet.slo_met and r.verify.slo_met and r.fleet.replicas == r.chosen.replicas
    assert r.chosen.replicas is not None and r.chosen.replicas >= 2
    assert r.next_cheaper is not None and not r.next_cheaper.slo_met
    assert r.next_cheaper.replicas == r.chosen.replicas - 1 and r.next_cheaper.failed_targets
    assert r.next_cheaper.usd_per_month < r.fleet.usd_per_month
    # the cheapest of the candidates that pass, by $/month
    costs = [c.usd_per_month for c in r.candidates if c.usd_per_month is not None]
    assert r.chosen.usd_per_month == min(costs)
    assert r.chosen.usd_per_month == pytest.approx(r.chosen.replicas * r.chosen.price_per_gpu_hour * 730)


def test_percentiles_are_stated_and_simulations_counted(planned: FleetPlanResponse) -> None:
    r = planned
    assert r.slo == ["all: p99 TTFT <= 500 ms", "all: p99 TPOT <= 30 ms"]
    assert all(t.target.startswith("p99 ") for t in r.fleet.targets)
    searched = sum(c.simulations for c in r.candidates)
    levers = sum(lv.simulations for lv in r.levers if lv.name != "cheaper-gpu")
    assert r.simulations == searched + 1 + levers  # + the verification
    assert r.simulations <= 16
    # users per GPU: the same conversion for the closed form and the simulation
    c = r.chosen
    assert c.users_per_gpu == pytest.approx(150 * 30 / (c.replicas or 1))
    assert any("closed form" in line and "percentiles" in line for line in r.story)


def test_levers_are_re_simulated(planned: FleetPlanResponse) -> None:
    names = {lv.name: lv for lv in planned.levers}
    assert set(names) <= {"router", "fp8-kv", "cheaper-gpu"}
    assert names["router"].change.startswith("prefix-affinity") and names["router"].simulations >= 1
    assert names["fp8-kv"].slo_met and names["fp8-kv"].replicas is not None
    assert names["fp8-kv"].replicas <= (planned.chosen.replicas or 0)  # twice the KV blocks never hurt
    assert planned.fleet_file["pools"][0]["replicas"] == planned.chosen.replicas


def test_gateway_levers_are_left_out_where_the_fleet_file_has_no_gateway() -> None:
    from servecap.planning.levers import cache_gateway, gateway_accepted, overflow_gateway

    req = plan_request_from_dict(_request())
    for gw in (cache_gateway(req), overflow_gateway(1.0)):
        why = gateway_accepted(req, gw)
        assert why is None or "gateway" in why
    assert cache_gateway(req) == {"cache": {"kind": "semantic", "hit_rate": 0.2}}


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"candidates": []}, "candidates"),
        ({"candidates": [{"gpu": "H1000"}]}, "gpu"),
        ({"traffic": {"peak_rps": 0}}, "plan.traffic.peak_rps"),
        ({"traffic": {"peak_rps": -3}}, "plan.traffic.peak_rps"),
        ({"traffic": {}}, "traffic"),
        ({"router": "fastest"}, "router"),
        ({"levers": ["turbo"]}, "levers"),
        ({"candidatez": []}, "plan.candidatez"),
    ],
)
def test_bad_input_is_one_error_naming_the_field(over: dict[str, Any], field: str) -> None:
    with pytest.raises(ServecapError) as err:
        fleet_plan(plan_request_from_dict(_request(**over)))
    assert err.value.field.startswith(field) and "\n" not in str(err.value)


def test_an_slo_no_candidate_meets_says_which_and_the_best_attainment() -> None:
    raw = _request(
        candidates=[{"gpu": "H100", "max_model_len": 4096}],
        slo={"tpot_s": {"p99": 0.001}},
        traffic={"peak_rps": 2, "workload": SMALL_WORKLOAD},
        max_replicas=3,
    )
    with pytest.raises(ServecapError) as err:
        fleet_plan(plan_request_from_dict(raw))
    text = str(err.value)
    assert (
        "all: p99 TPOT <= 1 ms" in text
        and "no candidate meets it with up to 3 replicas" in text
        and "% of requests within" in text
    )


def test_cli_flags_json_and_html(tmp_path: Path) -> None:
    page = tmp_path / "plan.html"
    args = ["fleet", "plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "-l", "4096", "--peak-rps", "20"]
    args += ["--slo-ttft-p99-s", "1", "--slo-tpot-p99-s", "0.05", "--levers", "fp8-kv", "--json", "--html", str(page)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["slo"] == ["all: p99 TTFT <= 1,000 ms", "all: p99 TPOT <= 50 ms"] and data["simulations"] >= 2
    assert "servecap fleet plan" in page.read_text() and "p99 TTFT (ms)" in page.read_text()
    # the 80% interval of the count and the rent, from the winner's engine and GPU family
    n, usd, chosen = data["interval"]["replicas"], data["interval"]["usd_per_month"], data["chosen"]
    want, want_usd = replica_interval(
        chosen["replicas"], chosen["usd_per_month"], engine="vllm", gpu_family=lookup_gpu("H100").family
    )
    assert (n["low"], n["high"]) == (want.low, want.high) and n["low"] <= chosen["replicas"] <= n["high"]
    assert (usd["low"], usd["high"]) == (pytest.approx(want_usd.low), pytest.approx(want_usd.high))
    assert f"{n['low']:,.0f}–{n['high']:,.0f} replicas" in page.read_text()
    text = CliRunner().invoke(cli, [a for a in args if a not in ("--json", "--html", str(page))]).stdout
    assert f"80% {n['low']:,.0f}–{n['high']:,.0f}" in text
    assert "cheapest fleet:" in text and "levers (each re-simulated)" in text and "simulations:" in text


@pytest.mark.parametrize(
    "args",
    [
        ["fleet", "plan", "-m", "meta-llama/Llama-3.1-8B", "--peak-rps", "10"],
        ["fleet", "plan", "-g", "H1000", "--peak-rps", "10"],
        ["fleet", "plan", "-g", "H100", "--peak-rps", "-1"],
        ["fleet", "plan", "--plan", "missing.yaml"],
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.argv", ["servecap", *args])
    with pytest.raises(SystemExit) as exc:
        run()
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.count("\n") == 0


def test_rent_of_a_scale_ahead_floor_by_hand() -> None:
    from servecap.planning.run import floor_usd_per_month

    # 2 replicas for half the day, 4 for the other half: 3 on average, x $3/replica-hour x 730 h
    assert floor_usd_per_month([(0.0, 2), (43_200.0, 4)], 86_400.0, 3.0) == pytest.approx(3 * 3 * 730)
