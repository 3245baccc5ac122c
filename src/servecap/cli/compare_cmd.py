"""`servecap compare`: rank GPUs x counts x dtypes for one model by cost per user meeting SLOs."""

from __future__ import annotations

import json
from pathlib import Path

import click

from servecap.cli import options as o


@click.command("compare")
@o.model_option
@click.option("--gpus", type=click.STRING, default=None, help="Comma-separated GPU names (default: all priced GPUs).")
@o.gpu_file_option
@click.option("--counts", type=click.STRING, default="1,2,4,8", help="GPUs per replica to try (TP sizes).")
@click.option("--weights-dtypes", type=click.STRING, default="auto,fp8,int4", help="Weight dtypes to try.")
@click.option("--kv-dtypes", type=click.STRING, default="auto,fp8", help="KV cache dtypes to try.")
@o.max_model_len_option
@click.option("--prompt-tokens", "-p", type=click.INT, default=1024)
@click.option("--output-tokens", "-o", type=click.INT, default=128)
@click.option("--duty-cycle", type=click.FLOAT, default=0.2)
@o.slo_options(2000.0, 100.0, "candidates must meet it")
@click.option("--top", type=click.INT, default=15, help="Rows to show.")
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
    duty_cycle: float,
    ttft_slo_ms: float | None,
    tpot_slo_ms: float | None,
    top: int,
    calibration: Path | None,
    as_json: bool,
) -> None:
    """Rank deployments of a model by $ per user per month within the SLOs."""
    from servecap.catalog import gpu_catalog, load_gpu_file, lookup_gpu, resolve_model
    from servecap.cli.inputs import cost_inputs, request_shape, slo_from_ms
    from servecap.core.search import compare
    from servecap.errors import ServecapError

    spec = resolve_model(model or o.DEFAULT_MODEL)
    extra = load_gpu_file(gpu_file) if gpu_file else []
    if gpus:
        gpu_list = [lookup_gpu(name, extra) for name in gpus.split(",") if name.strip()]
    else:
        gpu_list = [g for g in gpu_catalog() if g.rent_usd_per_hour is not None] + extra
    try:
        count_list = [int(c) for c in counts.split(",") if c.strip()]
    except ValueError:
        raise ServecapError("counts", counts, "must be comma-separated integers") from None
    eff, _ = o.efficiency_from_options(calibration)
    cands = compare(
        spec, gpu_list, gpu_counts=count_list,
        weights_dtypes=[w.strip() for w in weights_dtypes.split(",") if w.strip()],
        kv_dtypes=[k.strip() for k in kv_dtypes.split(",") if k.strip()],
        max_model_len=max_model_len, request=request_shape(prompt_tokens, output_tokens),
        slo=slo_from_ms(ttft_slo_ms, tpot_slo_ms), efficiency=eff,
        costs=cost_inputs(None, None, duty_cycle),
    )
    rows = [
        {
            "gpu": c.gpu, "num_gpus": c.num_gpus, "weights_dtype": c.weights_dtype,
            "kv_cache_dtype": c.kv_cache_dtype,
            "users_served": c.plan.users_served if c.plan else None,
            "tpot_s": c.plan.tpot_s if c.plan else None,
            "ttft_s": c.plan.ttft_s if c.plan else None,
            "usd_per_user_month": c.usd_per_user_month,
            "usd_per_million_tokens": c.plan.cost.usd_per_million_tokens if c.plan else None,
            "problem": c.problem,
        }
        for c in cands
    ]
    if as_json:
        click.echo(json.dumps({"model": spec.id, "candidates": rows}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{spec.id}: deployments by $ per user per month (top {top} of {len(rows)})")
    for col in ("#", "GPU", "n", "weights", "KV", "users", "TPOT", "TTFT", "$/user/mo", "$/Mtok", "problem"):
        t.add_column(col)
    for i, r in enumerate(rows[:top], 1):
        t.add_row(
            str(i), str(r["gpu"]), str(r["num_gpus"]), str(r["weights_dtype"]), str(r["kv_cache_dtype"]),
            f"{r['users_served']:,}" if r["users_served"] is not None else "-",
            f"{r['tpot_s'] * 1e3:.0f} ms" if r["tpot_s"] is not None else "-",  # type: ignore[operator]
            f"{r['ttft_s'] * 1e3:.0f} ms" if r["ttft_s"] is not None else "-",  # type: ignore[operator]
            f"${r['usd_per_user_month']:.2f}" if r["usd_per_user_month"] is not None else "-",
            f"${r['usd_per_million_tokens']:.2f}" if r["usd_per_million_tokens"] is not None else "-",
            str(r["problem"] or ""),
        )
    Console().print(t)
