"""The fleet ``fleet simulate`` builds from its flags (servecap.app.fleet_flags)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecap.app.flags import DeploymentFlags
from servecap.app.fleet_flags import FLEET_DEFAULT_GPU, FLEET_DEFAULT_MODEL, FleetFlags, choices_of, fleet_from_flags
from servecap.errors import ServecapError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_no_flags_is_one_default_pool_of_one_replica_setting() -> None:
    ff, base_dir = fleet_from_flags(FleetFlags())
    assert base_dir is None
    assert [(p.model, p.gpu, p.replicas, p.role) for p in ff.pools] == [
        (FLEET_DEFAULT_MODEL, FLEET_DEFAULT_GPU, None, "both")
    ]


def test_prefill_and_decode_replicas_make_two_pools_sharing_the_deployment() -> None:
    flags = FleetFlags(
        deployment=DeploymentFlags(tp=2), prefill_replicas=1, decode_replicas=3, decode_tp=4, kv_link="roce"
    )
    ff, _ = fleet_from_flags(flags)
    assert [(p.name, p.role, p.replicas, p.tp) for p in ff.pools] == [
        ("prefill", "prefill", 1, 2),
        ("decode", "decode", 3, 4),
    ]
    assert ff.kv_link is not None and ff.kv_link.kind == "roce"


def test_autoscaler_takes_the_minimum_default_and_the_router_flags_override() -> None:
    ff, _ = fleet_from_flags(FleetFlags(autoscaler="keda-vllm", max_replicas=3, router="least-kv"))
    auto = ff.pools[0].autoscaler
    assert auto is not None and (auto.min_replicas, auto.max_replicas) == (1, 3)
    assert ff.router_model().name == "least-kv"


def test_a_fleet_file_keeps_its_pools_and_takes_the_slo_flags() -> None:
    ff, base_dir = fleet_from_flags(FleetFlags(fleet_file=EXAMPLES / "fleet-simple.yaml", ttft_slo_ms=500))
    assert base_dir == EXAMPLES
    assert [(p.name, p.replicas) for p in ff.pools] == [("h100", 8)]
    assert ff.slo is not None and (ff.slo.ttft_ms, ff.slo.tpot_ms) == (500, None)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (FleetFlags(autoscaler="keda-vllm"), "max_replicas=None: --autoscaler needs --max-replicas"),
        (FleetFlags(max_replicas=2), "autoscaler=None: --min-replicas/--max-replicas need --autoscaler"),
        (FleetFlags(prefill_replicas=1), "decode_replicas=None: give --prefill-replicas and --decode-replicas"),
        (FleetFlags(decode_tp=2), "decode_tp=2: needs --prefill-replicas and --decode-replicas"),
        (
            FleetFlags(fleet_file=EXAMPLES / "fleet-simple.yaml", replicas=2),
            "give --fleet or -m/-g/--replicas, not both",
        ),
    ],
)
def test_contradicting_flags_are_one_line_errors(flags: FleetFlags, message: str) -> None:
    with pytest.raises(ServecapError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        fleet_from_flags(flags)
    assert "\n" not in str(err.value)


def test_choices_read_the_literal_of_an_optional_field() -> None:
    assert choices_of(FleetFlags, "kv_link") == ["nvlink", "infiniband", "roce", "tcp"]
    assert choices_of(FleetFlags, "cold_start") == ["default", "instant"]
