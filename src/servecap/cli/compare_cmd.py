"""`servecap compare`: rank GPUs x counts x dtypes for one model by cost per user meeting SLOs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from servecap.app.compare import CompareRequest
from servecap.cli import options as o
from servecap.cli.fields import field_default_and_help, field_option
from servecap.cli.numbers import FINITE


def _list(text: str | None) -> list[str] | None:
    """The names of a comma-separated flag; None when the flag is not given (an empty one is an
    empty list, refused by name: it never means the default)."""
    return [part.strip() for part in text.split(",") if part.strip()] if text is not None else None


def _opt(name: str, *decls: str, **attrs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return field_option(CompareRequest, name, *decls, **attrs)


def _text(name: str) -> str:
    """A list field's default as the comma-separated text its flag takes."""
    value, _ = field_default_and_help(CompareRequest, name)
    assert isinstance(value, list)
    return ",".join(str(v) for v in value)


@click.command("compare")
@o.model_option
@click.option("--gpus", type=click.STRING, default=None, help="Comma-separated GPU names (default: every GPU).")
@o.gpu_file_option
@_opt("counts", "--counts", type=click.STRING, default=_text("counts"))
@_opt("weights_dtypes", "--weights-dtypes", type=click.STRING, default=_text("weights_dtypes"))
@_opt("kv_dtypes", "--kv-dtypes", type=click.STRING, default=_text("kv_dtypes"))
@o.max_model_len_option
@_opt("prompt_tokens", "--prompt-tokens", "-p", type=click.INT)
@_opt("output_tokens", "--output-tokens", "-o", type=click.INT)
@_opt("duty_cycle", "--duty-cycle", type=FINITE)
@_opt("request_interval_s", "--request-interval-s", type=FINITE)
@_opt("ttft_slo_ms", "--ttft-slo-ms", type=FINITE)
@_opt("tpot_slo_ms", "--tpot-slo-ms", type=FINITE)
@click.option(
    "--price-per-hour",
    type=click.STRING,
    default=None,
    help="USD per GPU-hour: one price for every GPU (2.5) or per GPU (H100=2.5,L40S=0.9); over the catalog's.",
)
@click.option("--top", type=click.IntRange(min=1), default=15, help="Rows to show.")
@o.calibration_option
@o.json_option
def compare_command(
    model: str | None,
    gpus: str | None,
    gpu_file: Path | None,
    counts: str,
    weights_dtypes: str,
    kv_dtypes: str,
    max_model_len: int | None,
    prompt_tokens: int,
    output_tokens: int,
    duty_cycle: float | None,
    request_interval_s: float | None,
    ttft_slo_ms: float | None,
    tpot_slo_ms: float | None,
    price_per_hour: str | None,
    top: int,
    calibration: Path | None,
    as_json: bool,
) -> None:
    """Rank deployments of a model by $ per user per month within the SLOs."""
    from servecap.app.compare import compare, compare_request, parse_prices
    from servecap.errors import ServecapError

    try:
        count_list = [int(c) for c in counts.split(",") if c.strip()]
    except ValueError:
        raise ServecapError("counts", counts, "must be comma-separated integers") from None
    one_price, prices = parse_prices(price_per_hour)
    response = compare(
        compare_request(
            model=model or o.DEFAULT_MODEL,
            gpus=_list(gpus),
            gpu_file=gpu_file,
            counts=count_list,
            weights_dtypes=_list(weights_dtypes) or [],
            kv_dtypes=_list(kv_dtypes) or [],
            max_model_len=max_model_len,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            duty_cycle=duty_cycle,
            request_interval_s=request_interval_s,
            ttft_slo_ms=ttft_slo_ms,
            tpot_slo_ms=tpot_slo_ms,
            price_per_hour=one_price,
            gpu_prices=prices,
            calibration=calibration,
        )
    )
    if as_json:
        click.echo(response.model_dump_json(by_alias=True, indent=2))
        return
    from rich.table import Table

    from servecap.app.compare import dtype_columns, merged_rows, users_text
    from servecap.app.defaults import shape_line
    from servecap.app.plan import SloUsed, slo_line
    from servecap.cli.console import make_console, print_table

    console = make_console()
    rows = response.candidates
    merged = merged_rows(rows)
    console.print(shape_line(response.prompt_tokens, response.output_tokens, users=users_text(response)))
    console.print(slo_line(SloUsed(**response.slo.model_dump())))
    t = Table(
        title=f"{response.model}: deployments by $ per user per month (top {min(top, len(merged))} of "
        f"{len(merged)} distinct, {len(rows)} planned)"
    )
    for col in (
        "#",
        "GPU",
        "n",
        "weights",
        "KV",
        "users",
        "TPOT",
        "TTFT",
        "limited by",
        "$/GPU-h",
        "$/user/mo",
        "$/Mtok",
        "problem",
    ):
        t.add_column(col, justify="left" if col in ("GPU", "weights", "KV", "limited by", "problem") else "right")

    def money(x: float | None) -> str:
        return f"${x:,.2f}" if x is not None else "-"

    def ms(x: float | None) -> str:
        return f"{x * 1e3:,.0f} ms" if x is not None else "-"

    for i, (r, pairs) in enumerate(merged[:top], 1):
        weights, kvs = dtype_columns(pairs)
        limit = f"{r.limited_by} ({r.bottleneck}-bound)" if r.limited_by and r.bottleneck else (r.limited_by or "")
        t.add_row(
            str(i),
            r.gpu,
            str(r.num_gpus),
            weights,
            kvs,
            f"{r.users_served:,}" if r.users_served is not None else "-",
            ms(r.tpot_s),
            ms(r.ttft_s),
            limit,
            money(r.usd_per_hour / r.num_gpus if r.usd_per_hour is not None else None)
            + ("*" if r.price_source == "request" and r.usd_per_hour is not None else ""),
            money(r.usd_per_user_month),
            money(r.usd_per_million_tokens),
            r.problem or "",
        )
    print_table(console, t)
    if any(len(pairs) > 1 for _, pairs in merged[:top]):
        console.print("a row with several dtypes: each plans the same (the batch is not limited by memory there)")
    if any(r.price_source == "request" for r, _ in merged[:top]):
        console.print("* price from --price-per-hour")
    if response.unpriced_gpus:
        console.print(
            f"unpriced (no catalog price; ranked after the priced, by users per GPU): "
            f"{', '.join(response.unpriced_gpus)}; price them with --price-per-hour GPU=USD,..."
        )
