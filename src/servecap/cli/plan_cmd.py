"""`servecap plan`: the closed-form capacity plan of one deployment."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from servecap.cli import options as o


def register(app: typer.Typer) -> None:
    app.command("plan")(plan_command)


def plan_command(
    model: o.ModelOpt = None,
    gpu: o.GpuOpt = None,
    gpu_file: o.GpuFileOpt = None,
    num_gpus: o.NumGpusOpt = None,
    tp: o.TpOpt = None,
    pp: o.PpOpt = 1,
    weights_dtype: o.WeightsDtypeOpt = None,
    kv_cache_dtype: o.KvDtypeOpt = "auto",
    max_model_len: o.MaxModelLenOpt = None,
    gpu_memory_utilization: o.GpuUtilOpt = None,
    kv_cache_memory_bytes: o.KvBytesOpt = None,
    block_size: o.BlockSizeOpt = None,
    max_num_seqs: o.MaxSeqsOpt = None,
    max_num_batched_tokens: o.MaxBatchedOpt = None,
    prompt_tokens: Annotated[int, typer.Option("--prompt-tokens", "-p", help="Typical prompt length.")] = 1024,
    output_tokens: Annotated[int, typer.Option("--output-tokens", "-o", help="Typical output length.")] = 128,
    duty_cycle: Annotated[float, typer.Option("--duty-cycle", help="Share of a user's session spent generating.")] = 0.2,
    ttft_slo_ms: Annotated[float | None, typer.Option("--ttft-slo-ms", help="TTFT target (ms).")] = None,
    tpot_slo_ms: Annotated[float | None, typer.Option("--tpot-slo-ms", help="TPOT target (ms).")] = None,
    price_per_hour: Annotated[float | None, typer.Option("--price-per-hour", help="USD per GPU-hour (default: catalog).")] = None,
    purchase_price: Annotated[float | None, typer.Option("--purchase-price", help="USD per GPU (default: catalog).")] = None,
    peak_users: Annotated[int | None, typer.Option("--peak-users", help="Size replicas for this many users.")] = None,
    peak_tok_s: Annotated[float | None, typer.Option("--peak-tok-s", help="Size replicas for this many output tokens/s.")] = None,
    calibration: o.CalibrationOpt = None,
    as_json: o.JsonOpt = False,
) -> None:
    """How many users one deployment serves, how fast, at what cost (closed form)."""
    from servecap.cli.inputs import cost_inputs, request_shape, slo_from_ms
    from servecap.core.levers import levers
    from servecap.core.plan import plan
    from servecap.core.summary import plan_to_dict

    dep, notes = o.deployment_from_options(
        model=model, gpu=gpu, gpu_file=gpu_file, num_gpus=num_gpus, tp=tp, pp=pp,
        weights_dtype=weights_dtype, kv_cache_dtype=kv_cache_dtype, max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization, kv_cache_memory_bytes=kv_cache_memory_bytes,
        block_size=block_size, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
    )
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
        typer.echo(json.dumps(data, indent=2))
        return
    from servecap.cli.render_plan import render_plan

    render_plan(p, lever_rows, notes, peak_users=peak_users, replicas=replicas,
                peak_tok_s=peak_tok_s, replicas_tok_s=replicas_tok_s)
