"""A ``router:`` key in a P/D fleet file is honoured or refused in one line (issue 28): it sets
both sides' policy, as ``--router`` does (SGLang's router: ``--policy`` sets both sides unless
``--prefill-policy``/``--decode-policy`` name one); with a ``pd_router:`` that says otherwise it
is refused, naming both; a scrape interval is refused (a P/D fleet's routers read live gauges);
a ``router:`` inside a pool is refused with where the key goes. Before, the name was dropped
in silence and the fleet routed with prefix-affinity / least-kv."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from servecap.app.fleet_flags import FleetFlags, fleet_from_flags
from servecap.errors import ServecapError
from servecap.fleet.file_schema import PdRouterModel, build_fleet, fleet_from_dict

EXAMPLE = Path(__file__).parents[2] / "examples" / "fleet-pd.yaml"


def _pd(**top: Any) -> dict[str, Any]:
    raw = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    del raw["pd_router"]
    return {**raw, **top}


def _sides(raw: dict[str, Any]) -> tuple[str, str]:
    spec, _ = build_fleet(fleet_from_dict(raw))
    assert spec.pd_router is not None
    return spec.pd_router.prefill, spec.pd_router.decode


def test_a_router_name_sets_both_sides() -> None:
    assert _sides(_pd(router="round-robin")) == ("round-robin", "round-robin")
    assert _sides(_pd(router={"name": "least-kv"})) == ("least-kv", "least-kv")


def test_router_settings_alone_keep_the_pd_default_sides() -> None:
    spec, _ = build_fleet(fleet_from_dict(_pd(router={"settings": {"load_factor": 1.0}})))
    assert spec.pd_router is None or (spec.pd_router.prefill, spec.pd_router.decode) == (
        PdRouterModel().prefill,
        PdRouterModel().decode,
    )
    assert spec.router_settings == {"load_factor": 1.0}


def test_router_agreeing_with_pd_router_is_kept() -> None:
    raw = _pd(router="round-robin", pd_router={"prefill": "round-robin", "decode": "round-robin"})
    assert _sides(raw) == ("round-robin", "round-robin")


def test_router_and_a_different_pd_router_are_one_line() -> None:
    with pytest.raises(ServecapError) as err:
        fleet_from_dict(_pd(router="round-robin", pd_router={"prefill": "prefix-affinity", "decode": "least-kv"}))
    line = str(err.value)
    assert "\n" not in line and "router" in line and "round-robin" in line and "pd_router" in line


def test_an_unknown_router_name_is_named() -> None:
    with pytest.raises(ServecapError, match=r"router.*no-such-router"):
        fleet_from_dict(_pd(router="no-such-router"))


def test_a_scrape_interval_on_a_pd_fleet_is_refused_naming_the_file_key() -> None:
    with pytest.raises(ServecapError, match=r"router\.scrape_interval_ms.*live gauges"):
        build_fleet(fleet_from_dict(_pd(router={"name": "round-robin", "scrape_interval_ms": 500})))


def test_a_router_inside_a_pool_says_where_the_key_goes() -> None:
    raw = _pd()
    raw["pools"][0]["router"] = "round-robin"
    with pytest.raises(ServecapError) as err:
        fleet_from_dict(raw)
    line = str(err.value)
    assert "\n" not in line and "pd_router" in line


def test_a_file_router_round_trips_and_the_flags_override_it(tmp_path: Path) -> None:
    path = tmp_path / "pd.yaml"
    path.write_text(yaml.safe_dump(_pd(router="round-robin")), encoding="utf-8")
    ff = fleet_from_dict(fleet_from_dict(_pd(router="round-robin")).model_dump())
    assert _sides(ff.model_dump()) == ("round-robin", "round-robin")
    ff, _ = fleet_from_flags(FleetFlags(fleet_file=path, pd_router="sglang"))
    assert ff.pd_router == "sglang"
    ff, _ = fleet_from_flags(FleetFlags(fleet_file=path, router="least-kv"))
    assert ff.pd_router is not None and not isinstance(ff.pd_router, str)
    assert (ff.pd_router.prefill, ff.pd_router.decode) == ("least-kv", "least-kv")
