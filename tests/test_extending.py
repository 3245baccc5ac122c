"""docs/extending.md kept true: the paths it names exist; every registered router, autoscaler
policy and preset reaches the CLI's choices, the HTTP API and the web pages' lists; one default
router everywhere."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import click
from fastapi.testclient import TestClient

from servecap.api import ServeSettings, create_app
from servecap.app.fleet_plan import FleetPlanRequest
from servecap.cli.fleet_cmd import fleet_simulate_command
from servecap.cli.fleet_plan_cmd import fleet_plan_command
from servecap.fleet.file_schema import AutoscalerModel, FleetFile, RouterModel
from servecap.fleet.spec import FleetSpec
from servecap.policy.autoscalers import AUTOSCALERS, DEFAULT_AUTOSCALER, PRESETS, AutoscalerSettings
from servecap.policy.routers import DEFAULT_ROUTER, ROUTERS

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
STATIC = ROOT / "src" / "servecap" / "web" / "static"


def _choices(command: click.Command, option: str) -> list[str]:
    param = next(p for p in command.params if p.name == option)
    assert isinstance(param.type, click.Choice)
    return list(param.type.choices)


def test_every_path_in_the_guide_exists() -> None:
    named = set(re.findall(r"`([\w./-]+\.(?:py|md|toml|html|js)|tests/[\w/]+/)`", DOC))
    assert len(named) > 30
    for path in sorted(named):
        if "NAME" in path or "ORG--" in path:
            continue  # a placeholder for the new file
        top = path.split("/")[0] in ("tests", "docs", "examples", "pyproject.toml", "README.md")
        where = ROOT / path if top else ROOT / "src" / "servecap" / path
        assert where.exists(), f"docs/extending.md names {path}, which does not exist"


def test_every_registered_policy_reaches_the_cli() -> None:
    simulate = fleet_simulate_command
    assert _choices(simulate, "router") == list(ROUTERS)
    assert _choices(fleet_plan_command, "router") == list(ROUTERS)
    assert _choices(simulate, "autoscaler") == list(PRESETS)
    for cmd in (simulate, fleet_plan_command):
        router = next(p for p in cmd.params if p.name == "router")
        assert f"default {DEFAULT_ROUTER}" in (getattr(router, "help", "") or "")


def test_every_registered_policy_reaches_the_api(tmp_path: Path) -> None:
    with TestClient(
        create_app(ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")), base_url="http://127.0.0.1"
    ) as c:
        got = c.get("/api/v1/policies").json()
        schema = c.get("/openapi.json").json()
    assert got == {
        "routers": list(ROUTERS),
        "default_router": DEFAULT_ROUTER,
        "autoscalers": list(AUTOSCALERS),
        "default_autoscaler": DEFAULT_AUTOSCALER,
        "presets": list(PRESETS),
        "default_preset": AUTOSCALERS[DEFAULT_AUTOSCALER].default_preset,
    }
    assert "/api/v1/policies" in schema["paths"]
    # the fleet file's own schema lists the registries as enums
    fleet = FleetFile.model_json_schema()["$defs"]
    assert fleet["RouterModel"]["properties"]["name"]["enum"] == list(ROUTERS)
    assert fleet["AutoscalerModel"]["properties"]["policy"]["enum"] == [*AUTOSCALERS, None]
    assert fleet["AutoscalerModel"]["properties"]["preset"]["enum"] == [*PRESETS, None]


def test_web_lists_come_from_the_registries() -> None:
    for page in ("fleet.html", "fleet-plan.html"):
        html = (STATIC / page).read_text(encoding="utf-8")
        selects = re.findall(r'<select name="router"[^>]*>(.*?)</select>', html, flags=re.S)
        assert selects, page
        assert '<select name="router" data-list="routers"></select>' in html, f"{page}: a hand-written router list"
        assert not any(name in html for name in ROUTERS if name != "session"), f"{page} names a router by hand"
    fleet = (STATIC / "fleet.html").read_text(encoding="utf-8")
    assert '<select name="preset" data-list="presets"></select>' in fleet
    js = (STATIC / "servecap.js").read_text(encoding="utf-8")
    assert 'api("/policies")' in js and "select[data-list]" in js
    for script in ("fleet.js", "fleet-plan.js"):
        text = (STATIC / script).read_text(encoding="utf-8")
        assert not any(f'"{name}"' in text for name in [*ROUTERS, *PRESETS]), f"{script} writes a default by hand"


def test_one_default_router() -> None:
    assert DEFAULT_ROUTER in ROUTERS
    assert RouterModel().name == DEFAULT_ROUTER
    assert FleetSpec.__dataclass_fields__["router"].default == DEFAULT_ROUTER
    assert FleetPlanRequest.model_fields["router"].default == DEFAULT_ROUTER
    assert FleetFile(pools=[{"model": "m", "gpu": "g"}]).router_model().name == DEFAULT_ROUTER  # type: ignore[list-item]


def test_one_default_autoscaler() -> None:
    assert AutoscalerSettings().policy == DEFAULT_AUTOSCALER
    settings = AutoscalerModel(max_replicas=4).to_settings()
    assert settings.policy == DEFAULT_AUTOSCALER
    assert settings == replace(PRESETS[AUTOSCALERS[DEFAULT_AUTOSCALER].default_preset], max_replicas=4)


def test_the_guide_names_every_registered_autoscaler_and_the_worked_example() -> None:
    assert "policy/kpa.py" in DOC and "tests/policy/test_kpa.py" in DOC
    for name in AUTOSCALERS:
        assert name in (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8"), f"docs/fleet.md lacks {name}"


def test_the_fleet_core_is_the_one_place_pools_are_scaled_started_and_failed() -> None:
    """Adding an autoscaler, a router or a pool role touches the one core (docs/extending.md):
    only fleet/pools.py builds autoscalers, draws cold starts, picks scale-downs and reads the
    signals; every layout is a Pools subclass that make_fleet builds."""
    from servecap.fleet.fleet import Fleet
    from servecap.fleet.pd.fleet import PdFleet
    from servecap.fleet.pools import Pools

    fleet_dir = ROOT / "src" / "servecap" / "fleet"
    for call in ("make_autoscaler(", "cold_start_draw_s(", "scale_down_choice(", "signal_value(", "mean_itl_s("):
        users = sorted(
            str(p.relative_to(fleet_dir))
            for p in fleet_dir.rglob("*.py")
            if call in p.read_text(encoding="utf-8") and f"def {call}" not in p.read_text(encoding="utf-8")
        )
        assert users == ["pools.py"], f"{call} is called outside the fleet core: {users}"
    from servecap.fleet.layouts import LAYOUTS

    assert set(LAYOUTS.values()) == {Fleet, PdFleet}
    for layout in LAYOUTS.values():
        assert issubclass(layout, Pools)
    assert "fleet/pools.py" in DOC and "A pool role" in DOC
