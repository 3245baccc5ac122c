"""plan, compare, simulate and capacity state each default once, in the request: the CLI's
``--help`` (its options' defaults and help), the HTTP API's OpenAPI schema and the request model
agree field by field (issue 19)."""

from __future__ import annotations

from typing import Any

import click
import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from servecap.api import ServeSettings, create_app
from servecap.api.bodies import CapacityBody, CompareBody, PlanBody, SimulateBody
from servecap.app.compare import CompareRequest
from servecap.app.plan import PlanRequest
from servecap.app.simulate_request import CapacityRequest, SimulateRequest
from servecap.cli.fields import field_default_and_help
from servecap.cli.main import COMMANDS, load_command

# command, the request that states the defaults, the HTTP body and its schema's name
REQUESTS: list[tuple[str, type, type[BaseModel]]] = [
    ("plan", PlanRequest, PlanBody),
    ("compare", CompareRequest, CompareBody),
    ("simulate", SimulateRequest, SimulateBody),
    ("capacity", CapacityRequest, CapacityBody),
]
# the deployment's fields of plan's request are its nested DeploymentFlags (flat in the body)
NOT_OPTIONS = {"as_json", "html", "top"}  # flags of the interface, not of the request
LIST_FLAGS = {"counts", "weights_dtypes", "kv_dtypes"}  # comma-separated text on the command line
# flags the command reads differently from the field of the same name, so their help differs:
# compare's --price-per-hour also takes per-GPU prices (the body's gpu_prices), capacity's
# --users/--rate choose the loop and a target (the body's closed_loop and target)
# the body's field is another shape than the flag's (``trace``: the CLI's --trace names a file, the
# body an object of format, window and time scale, with the file a shipped sample)
MAPPED = {
    ("compare", "price_per_hour"),
    ("compare", "gpus"),
    ("capacity", "rate"),
    ("capacity", "users"),
    ("simulate", "trace"),
}


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("api")
    app = create_app(ServeSettings(data_dir=d, db=d / "runs.sqlite"))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        schema: dict[str, Any] = client.get("/openapi.json").json()
    return schema


def _model_default(request: type, name: str) -> object:
    if request is PlanRequest and name not in PlanRequest.__dataclass_fields__:
        from servecap.app.flags import DeploymentFlags

        return field_default_and_help(DeploymentFlags, name)[0]
    return field_default_and_help(request, name)[0]


def _cli_default(option: click.Option) -> object:
    value = option.default
    if option.name in LIST_FLAGS and isinstance(value, str):
        items = value.split(",")
        return [int(x) for x in items] if option.name == "counts" else items
    return value


@pytest.mark.parametrize(("command", "request_cls", "body"), REQUESTS, ids=[r[0] for r in REQUESTS])
def test_cli_help_openapi_and_model_defaults_agree(
    command: str, request_cls: type, body: type[BaseModel], openapi: dict[str, Any]
) -> None:
    cmd = load_command(COMMANDS[command].target)
    props = openapi["components"]["schemas"][body.__name__]["properties"]
    options = {p.name: p for p in cmd.params if isinstance(p, click.Option) and p.name not in NOT_OPTIONS}
    checked = 0
    for name, option in options.items():
        if name not in body.model_fields:  # a flag the command maps (capacity's --users/--rate)
            continue
        want = _model_default(request_cls, name)
        if name == "model" and command == "compare":
            want = None  # -m is optional on the command line; the request fills the default model
        else:
            assert _cli_default(option) == want, (command, name)
        if name in props:  # local-only fields (file paths) are left out of the HTTP schema
            assert props[name].get("default") == _model_default(request_cls, name), (command, name)
            assert body.model_fields[name].get_default(call_default_factory=True) == props[name].get("default")
        checked += 1
    assert checked >= 12, checked


@pytest.mark.parametrize(("command", "request_cls", "body"), REQUESTS, ids=[r[0] for r in REQUESTS])
def test_every_body_field_is_a_request_field_with_its_help(
    command: str, request_cls: type, body: type[BaseModel], openapi: dict[str, Any]
) -> None:
    """The schema documents each field with the help the CLI prints for its flag."""
    props = openapi["components"]["schemas"][body.__name__]["properties"]
    cmd = load_command(COMMANDS[command].target)
    helps = {p.name: p.help for p in cmd.params if isinstance(p, click.Option)}
    documented = 0
    for name, prop in props.items():
        assert name in body.model_fields
        if name in helps and (command, name) not in MAPPED and prop.get("description") is not None:
            assert prop["description"] == helps[name], (command, name)
            documented += 1
    assert documented >= 8, documented


def test_defaults_in_words() -> None:
    """The defaults themselves (app/defaults.py's request shape): one figure, three readers."""
    assert SimulateRequest().prompt_tokens == CapacityRequest().prompt_tokens == PlanRequest().prompt_tokens == 1024
    assert SimulateRequest().output_tokens == CompareRequest().output_tokens == PlanRequest().output_tokens == 128
    assert CompareRequest().counts == [1, 2, 4, 8] and SimulateBody().seed == 0 and CapacityBody().closed_loop


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (SimulateBody, "workload"),
        (SimulateBody, "calibration"),
        (CapacityBody, "gpu_file"),
        (PlanBody, "gpu_file"),
        (CompareBody, "calibration"),
    ],
)
def test_http_bodies_refuse_file_paths(body: type[BaseModel], field: str, openapi: dict[str, Any]) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=field):
        body.model_validate({field: "/etc/passwd"})
    assert field not in openapi["components"]["schemas"][body.__name__]["properties"]


def test_plan_body_has_every_field_of_the_plan_request() -> None:
    """plan's request is a dataclass (``servecap plan`` stays free of pydantic) and PlanBody its
    schema: the two name the same settings, the body flat, less the local calibration file."""
    from dataclasses import fields

    from servecap.app.flags import DeploymentFlags

    settings = {f.name for f in fields(PlanRequest)} - {"deployment", "calibration"}
    assert set(PlanBody.model_fields) == settings | {f.name for f in fields(DeploymentFlags)}
    body = PlanBody(model="meta-llama/Llama-3.1-8B", gpu="H100", tp=2, turns=3, request_interval_s=20)
    request = body.request()
    assert request.deployment.tp == 2 and request.turns == 3 and request.request_interval_s == 20
    assert request == PlanRequest(deployment=body.flags(), turns=3, request_interval_s=20)
