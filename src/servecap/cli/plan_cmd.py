"""`servecap plan`: the closed-form capacity plan of one deployment."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from servecap.app.plan import PlanRequest
from servecap.cli import options as o
from servecap.cli.fields import field_option
from servecap.cli.numbers import FINITE


def _opt(name: str, *decls: str, **attrs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return field_option(PlanRequest, name, *decls, **attrs)


@click.command("plan")
@o.deployment_options
@_opt("prompt_tokens", "--prompt-tokens", "-p", type=click.INT)
@_opt("output_tokens", "--output-tokens", "-o", type=click.INT)
@_opt("turns", "--turns", type=click.IntRange(1, 1000))
@_opt("duty_cycle", "--duty-cycle", type=FINITE)
@_opt("think_time_s", "--think-time-s", type=FINITE)
@_opt("request_interval_s", "--request-interval-s", type=click.FLOAT)
@_opt("ttft_slo_ms", "--ttft-slo-ms", type=FINITE)
@_opt("tpot_slo_ms", "--tpot-slo-ms", type=FINITE)
@_opt("no_slo", "--no-slo", is_flag=True)
@_opt("price_per_hour", "--price-per-hour", type=FINITE)
@_opt("purchase_price", "--purchase-price", type=FINITE)
@_opt("peak_users", "--peak-users", type=click.INT)
@_opt("peak_tok_s", "--peak-tok-s", type=FINITE)
@_opt("calibration", "--calibration", type=o.PATH)
@_opt("step_model", "--step-model", type=click.Choice(["auto", "roofline", "operations"]))
@_opt("explain_step", "--explain-step", is_flag=True)
@_opt("explain_batch", "--explain-batch", type=click.IntRange(1, 1_000_000))
@o.json_option
def plan_command(deployment: o.DeploymentFlags, as_json: bool, **settings: Any) -> None:
    """How many users one deployment serves, how fast, at what cost (closed form)."""
    from servecap.app.plan import plan

    response = plan(PlanRequest(deployment=deployment, **settings))
    if as_json:
        click.echo(response.to_json())
        return
    from servecap.cli.render_plan import render_plan

    render_plan(response)
