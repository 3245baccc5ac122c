"""`servecap plan`: the closed-form capacity plan of one deployment."""

from __future__ import annotations

from pathlib import Path

import click

from servecap.cli import options as o
from servecap.cli.numbers import FINITE


@click.command("plan")
@o.deployment_options
@click.option("--prompt-tokens", "-p", type=click.INT, default=1024, help="Typical prompt length (new tokens).")
@click.option("--output-tokens", "-o", type=click.INT, default=128, help="Typical output length.")
@o.turns_option
@click.option(
    "--duty-cycle",
    type=FINITE,
    default=None,
    help="Share of a user's session spent generating [default: from --request-interval-s].",
)
@o.think_time_option
@click.option(
    "--request-interval-s",
    type=click.FLOAT,
    default=None,
    help="Mean seconds between a user's requests, the answer included (default 30, as fleet plan).",
)
@o.slo_options(None, None, "steady-state mean; default: the interactive SLO, 2000 ms / 100 ms")
@click.option("--no-slo", is_flag=True, default=False, help="Plan without an SLO (users at any speed).")
@click.option("--price-per-hour", type=FINITE, default=None, help="USD per GPU-hour (default: catalog).")
@click.option("--purchase-price", type=FINITE, default=None, help="USD per GPU (default: catalog).")
@click.option("--peak-users", type=click.INT, default=None, help="Size replicas for this many users.")
@click.option("--peak-tok-s", type=FINITE, default=None, help="Size replicas for this many output tokens/s.")
@o.calibration_option
@o.json_option
def plan_command(
    deployment: o.DeploymentFlags,
    prompt_tokens: int,
    output_tokens: int,
    turns: int | None,
    duty_cycle: float | None,
    think_time_s: float | None,
    request_interval_s: float | None,
    ttft_slo_ms: float | None,
    tpot_slo_ms: float | None,
    no_slo: bool,
    price_per_hour: float | None,
    purchase_price: float | None,
    peak_users: int | None,
    peak_tok_s: float | None,
    calibration: Path | None,
    as_json: bool,
) -> None:
    """How many users one deployment serves, how fast, at what cost (closed form)."""
    from servecap.app.plan import PlanRequest, plan

    response = plan(
        PlanRequest(
            deployment=deployment,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            turns=turns or 1,
            duty_cycle=duty_cycle,
            think_time_s=think_time_s,
            request_interval_s=request_interval_s,
            ttft_slo_ms=ttft_slo_ms,
            tpot_slo_ms=tpot_slo_ms,
            no_slo=no_slo,
            price_per_hour=price_per_hour,
            purchase_price=purchase_price,
            peak_users=peak_users,
            peak_tok_s=peak_tok_s,
            calibration=calibration,
        )
    )
    if as_json:
        click.echo(response.to_json())
        return
    from servecap.cli.render_plan import render_plan

    render_plan(response)
