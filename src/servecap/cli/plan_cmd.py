"""`servecap plan`: the closed-form capacity plan of one deployment."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from servecap.cli import options as o


@click.command("plan")
@o.deployment_options
@click.option("--prompt-tokens", "-p", type=click.INT, default=1024, help="Typical prompt length.")
@click.option("--output-tokens", "-o", type=click.INT, default=128, help="Typical output length.")
@click.option("--duty-cycle", type=click.FLOAT, default=0.2, help="Share of a user's session spent generating.")
@o.slo_options(None, None, "the largest batch meeting it")
@click.option("--price-per-hour", type=click.FLOAT, default=None, help="USD per GPU-hour (default: catalog).")
@click.option("--purchase-price", type=click.FLOAT, default=None, help="USD per GPU (default: catalog).")
@click.option("--peak-users", type=click.INT, default=None, help="Size replicas for this many users.")
@click.option("--peak-tok-s", type=click.FLOAT, default=None, help="Size replicas for this many output tokens/s.")
@o.calibration_option
@o.json_option
def plan_command(
    deployment: o.DeploymentFlags,
    prompt_tokens: int,
    output_tokens: int,
    duty_cycle: float,
    ttft_slo_ms: float | None,
    tpot_slo_ms: float | None,
    price_per_hour: float | None,
    purchase_price: float | None,
    peak_users: int | None,
    peak_tok_s: float | None,
    calibration: Path | None,
    as_json: bool,
) -> None:
    """How many users one deployment serves, how fast, at what cost (closed form)."""
    from servecap.cli.inputs import cost_inputs, request_shape, slo_from_ms
    from servecap.core.levers import levers
    from servecap.core.plan import plan
    from servecap.core.summary import plan_to_dict

    dep, notes = o.deployment_from_options(deployment)
    eff, eff_note = o.efficiency_from_options(calibration)
    if eff_note:
        notes.append(eff_note)
    if prompt_tokens == 1024 and output_tokens == 128:
        notes.append("request shape 1,024 prompt + 128 output tokens (vLLM's benchmark random-dataset default)")
    p = plan(
        dep,
        request=request_shape(prompt_tokens, output_tokens),
        slo=slo_from_ms(ttft_slo_ms, tpot_slo_ms),
        efficiency=eff,
        costs=cost_inputs(price_per_hour, purchase_price, duty_cycle),
    )
    lever_rows = levers(p)
    from servecap.core.cost import replicas_needed
    from servecap.errors import ServecapError

    replicas = replicas_tok_s = None
    if peak_users is not None:
        if peak_users < 0:
            raise ServecapError("peak_users", peak_users, "must be >= 0")
        replicas = replicas_needed(peak_users, p.users_served) if p.users_served else None
    if peak_tok_s is not None:
        if not 0 <= peak_tok_s < 1e12:
            raise ServecapError("peak_tok_s", peak_tok_s, "must be a non-negative rate")
        total = p.output_tokens_per_s_total
        replicas_tok_s = replicas_needed(peak_tok_s, total) if total > 0 else None
    if as_json:
        data = plan_to_dict(p)
        data["notes"] = notes
        data["levers"] = [asdict(lever) for lever in lever_rows]
        if peak_users is not None:
            data["peak_users"] = peak_users
            data["replicas"] = replicas
        if peak_tok_s is not None:
            data["peak_tok_s"] = peak_tok_s
            data["replicas_for_tok_s"] = replicas_tok_s
        click.echo(json.dumps(data, indent=2))
        return
    from servecap.cli.render_plan import render_plan

    render_plan(p, lever_rows, notes, peak_users=peak_users, replicas=replicas,
                peak_tok_s=peak_tok_s, replicas_tok_s=replicas_tok_s)
