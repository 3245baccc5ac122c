"""The four ways the co-located and the P/D fleet had drifted apart (issue 28), each pinned: a
KPA pool on a P/D fleet scales as KPA; a sketched P/D run simulates P/D; ``--router`` reaches a
P/D fleet's pools; a gateway in front of a P/D fleet runs; the fleet planner takes every
autoscaler preset; engine, signal and preset names come from their registries."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fleet_helpers import open_loop, setup_8b

from servecap.app.fleet_flags import FleetFlags, fleet_from_flags
from servecap.catalog import resolve_model
from servecap.cli.main import cli
from servecap.core.kv_transfer import kv_footprint
from servecap.fleet import INSTANT, FleetSpec, Pool, simulate_fleet
from servecap.fleet.file_schema import AutoscalerModel, FleetFile, PoolModel
from servecap.planning.model import AutoscalerPlanModel
from servecap.policy.autoscalers import AUTOSCALERS, PRESETS, AutoscalerSettings
from servecap.policy.gateway.config import gateway_from_dict
from servecap.policy.signals import SIGNALS
from servecap.results.sketch import DEFAULT_RELATIVE_ACCURACY
from servecap.specs.dtypes import kv_dtype_named
from servecap.specs.engines import ENGINE_PROFILES
from servecap.workload import generate_arrays

EXAMPLE = Path(__file__).parents[2] / "examples" / "fleet-pd.yaml"
_FP = kv_footprint(resolve_model("meta-llama/Llama-3.1-8B"), 1, kv_dtype_named("bf16"), 3.35e12)


def pd_spec(**kw: typing.Any) -> FleetSpec:
    scaler = kw.pop("decode_autoscaler", None)
    p = Pool("p", setup_8b(), replicas=1, cold_start=INSTANT, role="prefill", kv=_FP)
    d = Pool("d", setup_8b(), replicas=1, cold_start=INSTANT, role="decode", kv=_FP, autoscaler=scaler)
    return FleetSpec((p, d), **kw)


def test_a_kpa_pool_on_a_pd_fleet_scales_as_kpa() -> None:
    from servecap.fleet.layouts import make_fleet

    def settings(policy: str) -> AutoscalerSettings:
        return AutoscalerSettings(signal="inflight", target=2.0, interval_s=2.0, max_replicas=4, policy=policy)

    fleet = make_fleet(pd_spec(decode_autoscaler=settings("kpa")), 0)
    assert type(fleet.autoscalers[1]) is AUTOSCALERS["kpa"]
    work = open_loop(30, 300, 512, 256)
    kpa = simulate_fleet(pd_spec(decode_autoscaler=settings("kpa")), work, 0)
    assert kpa.scale_events and all(pool == "d" for _, pool, _, _ in kpa.scale_events)
    assert kpa.pd is not None


def test_a_sketched_pd_run_simulates_pd_and_reports_the_hand_off() -> None:
    arrays = generate_arrays(open_loop(8, 300, 2000, 100), np.random.default_rng(0))
    exact = simulate_fleet(pd_spec(), arrays, 0)
    sketch = simulate_fleet(pd_spec(), arrays, 0, stream=True)
    assert exact.pd is not None and sketch.pd is not None
    assert sketch.pd.transfers == exact.pd.transfers
    assert sketch.summary.completed == exact.summary.completed
    a, b = exact.summary.ttft_s, sketch.summary.ttft_s
    assert a is not None and b is not None
    assert abs(b.p50 - a.p50) <= 2 * DEFAULT_RELATIVE_ACCURACY * a.p50


def test_router_reaches_a_pd_fleets_pools() -> None:
    ff, _ = fleet_from_flags(FleetFlags(fleet_file=EXAMPLE, router="round-robin"))
    spec_pd = ff.pd_router
    assert spec_pd is not None and not isinstance(spec_pd, str)
    assert (spec_pd.prefill, spec_pd.decode) == ("round-robin", "round-robin")


def test_router_and_pd_router_together_are_one_line() -> None:
    from servecap.errors import ServecapError

    with pytest.raises(ServecapError, match="router"):
        fleet_from_flags(FleetFlags(fleet_file=EXAMPLE, router="round-robin", pd_router="sglang"))


def test_router_on_the_cli_reaches_the_pd_replicas() -> None:
    args = ["fleet", "simulate", "--fleet", str(EXAMPLE), "--rate", "8", "--num-requests", "40"]
    args += ["--prompt-tokens", "256", "--output-tokens", "32", "--router", "round-robin", "--json"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)  # progress goes to stderr
    # round-robin on both sides: 40 requests split 20/20 on each side's two replicas
    assert [r["routed"] for r in d["replicas"]] == [20, 20, 20, 20]


def test_a_gateway_in_front_of_a_pd_fleet_runs() -> None:
    gw = gateway_from_dict({"rate_limits": {"default": {"rpm": 300.0, "burst_requests": 5}}})
    res = simulate_fleet(pd_spec(gateway=gw), open_loop(20, 100, 256, 32), 0)
    assert res.gateway is not None and res.pd is not None
    assert res.outcomes.get("rate_limited_rpm", 0) > 0
    assert res.summary.completed + sum(v for k, v in res.outcomes.items() if k != "ok") == 100


@pytest.mark.parametrize("preset", list(PRESETS))
def test_the_fleet_planner_takes_every_autoscaler_preset(preset: str) -> None:
    assert AutoscalerPlanModel(preset=preset).preset == preset


def _literal(model: type, field: str) -> list[str] | None:
    ann = model.model_fields[field].annotation  # type: ignore[attr-defined]
    stack: list[object] = [ann]
    out: list[str] = []
    while stack:
        t = stack.pop()
        if typing.get_origin(t) is typing.Literal:
            out.extend(str(x) for x in typing.get_args(t))
        else:
            stack.extend(typing.get_args(t))
    return out or None


def test_names_come_from_their_registries() -> None:
    # no field re-spells a registry as a Literal: each takes a str checked against the registry
    assert _literal(PoolModel, "engine") is None
    assert _literal(AutoscalerModel, "signal") is None
    assert _literal(FleetFile, "pd_router") is None
    assert _literal(AutoscalerPlanModel, "preset") is None
    for name in ENGINE_PROFILES:
        assert PoolModel(model="m", gpu="g", engine=name).engine == name
    for sig in SIGNALS:
        assert AutoscalerModel(signal=sig, max_replicas=2).signal == sig
    from servecap.cli.options import engine_option

    @engine_option
    def probe(engine: str) -> None: ...

    param = next(p for p in probe.__click_params__ if p.name == "engine")  # type: ignore[attr-defined]
    assert list(param.type.choices) == list(ENGINE_PROFILES)
    with pytest.raises(ValueError, match="did you mean"):
        PoolModel(model="m", gpu="g", engine="vlm")
    with pytest.raises(ValueError, match="did you mean"):
        AutoscalerModel(signal="inflght", max_replicas=2)


def test_a_scrape_interval_on_a_pd_fleet_is_one_line() -> None:
    from servecap.errors import ServecapError

    with pytest.raises(ServecapError, match="live gauges"):
        pd_spec(scrape_interval_s=1.0)
