"""`servecap gpus` and `servecap models`: the catalogs, with their key figures."""

from __future__ import annotations

from pathlib import Path

import click

from servecap.cli import options as o
from servecap.files import dumps_json


@click.command("gpus")
@o.gpu_file_option
@o.json_option
def gpus_command(gpu_file: Path | None, as_json: bool) -> None:
    """List the GPU catalog (and a --gpu-file's rows)."""
    from servecap.app.catalog import gpu_rows
    from servecap.catalog import gpu_catalog, load_gpu_file

    gpus = list(gpu_catalog()) + (load_gpu_file(gpu_file) if gpu_file else [])
    if as_json:
        click.echo(dumps_json(gpu_rows(gpu_file)))
        return
    from rich.table import Table

    from servecap.cli.console import make_console, print_table

    t = Table(title=f"{len(gpus)} GPUs (dense tensor TFLOPS; bandwidth in TB/s; link GB/s one way)")
    for col in ("id", "memory", "GiB (vLLM)", "HBM TB/s", "BF16", "FP8", "FP4", "link GB/s", "$/h", "buy $"):
        t.add_column(col, justify="left" if col == "id" else "right")

    def f(v: float | None, fmt: str = "{:,.0f}") -> str:
        return fmt.format(v) if v is not None else "-"

    for g in gpus:
        seen = f"{g.total_memory_bytes / 2**30:.2f}" + ("" if g.memory_gib_reported else "*")
        t.add_row(
            g.id,
            f"{g.memory_gb:g} GB",
            seen,
            f(g.hbm_bandwidth_tb_s, "{:.2f}"),
            f(g.bf16_dense_tflops),
            f(g.fp8_dense_tflops),
            f(g.fp4_dense_tflops),
            f(g.interconnect_gb_s),
            f(g.rent_usd_per_hour, "{:.2f}"),
            f(g.purchase_usd),
        )
    console = make_console()
    print_table(console, t)
    console.print("[dim]* GiB from the spec sheet; unstarred: reported by the driver in a real vLLM log[/]")


@click.command("models")
@o.json_option
def models_command(as_json: bool) -> None:
    """List the model catalog with parameters and KV bytes per token."""
    from servecap.app.catalog import model_rows

    rows = model_rows()
    if as_json:
        click.echo(dumps_json(rows))
        return
    from rich.table import Table

    from servecap.cli.console import make_console, print_table

    t = Table(title=f"{len(rows)} models (KV at the model dtype, TP 1)")
    for col in ("id", "layers", "kinds", "total", "active", "KV B/token", "sliding B/token", "state B/req", "context"):
        t.add_column(col, justify="left" if col in ("id", "kinds") else "right")
    for r in rows:
        t.add_row(
            str(r["id"]),
            str(r["layers"]),
            ",".join(r["layer_kinds"]),
            f"{r['params_total'] / 1e9:.2f}B",
            f"{r['params_active'] / 1e9:.2f}B",
            f"{r['kv_bytes_per_token']:,}",
            f"{r['sliding_kv_bytes_per_token']:,}",
            f"{r['state_bytes_per_request']:,}",
            f"{r['max_position_embeddings']:,}",
        )
    print_table(make_console(), t)
