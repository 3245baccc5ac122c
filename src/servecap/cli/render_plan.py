"""Human report of a plan: rich tables for memory, KV cache, speed, users, cost and levers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from servecap.app.plan import PlanResponse, slo_line
from servecap.cli.console import make_console, print_table
from servecap.units import gib, human_bytes, human_seconds

if TYPE_CHECKING:
    from servecap.core.ops.operation import StepExplanation
    from servecap.specs.deployment import Deployment


def _money(value: float | None, fmt: str = "${:,.2f}") -> str:
    return fmt.format(value) if value is not None else "n/a"


def render_plan(response: PlanResponse, console: Console | None = None) -> None:
    c = console or make_console()
    p, lever_rows, notes = response.plan, response.levers, response.notes
    peak_users, replicas = response.peak_users, response.replicas
    peak_tok_s, replicas_tok_s = response.peak_tok_s, response.replicas_for_tok_s
    dep, eng, st = p.deployment, p.deployment.engine, p.stage
    c.print(
        f"[bold]{dep.model.id}[/] on [bold]{dep.num_gpus}x {dep.gpu.name}[/] "
        f"({_layout(dep)}) · weights {dep.weights_dtype.name} · "
        f"KV {dep.kv_dtype.name} · max_model_len {eng.max_model_len:,}"
    )
    c.print(
        f"params {p.params.total / 1e9:.2f}B total, {p.params.active / 1e9:.2f}B active · "
        f"request {p.request.prompt_tokens:,} in / {p.request.output_tokens:,} out · "
        f"duty cycle {p.costs_in.duty_cycle:.1%}"
        + (f" (think time {response.think_time_s:g} s)" if response.think_time_s is not None else "")
        + (
            f" (a request every {response.request_interval_s:g} s per user)"
            if response.request_interval_s is not None
            else ""
        )
        + (f" · {response.turns}-turn chats" if response.turns > 1 else "")
    )
    c.print(slo_line(response.slo), style="bold" if response.slo.source == "default" else None)

    mem = Table(title="Memory per GPU", show_header=True)
    mem.add_column("item")
    mem.add_column("bytes", justify="right")
    mem.add_column("GiB", justify="right")
    b = st.budget
    fraction = {
        "vllm": f"x gpu_memory_utilization {b.gpu_memory_utilization:g}",
        "sglang": f"x mem_fraction_static {b.gpu_memory_utilization:g} (+ activations)",
        "trtllm": f"taken: the rest + {b.gpu_memory_utilization:g} x the free memory for KV",
    }.get(eng.engine.split("-")[0], f"x {b.gpu_memory_utilization:g}")
    rows = [
        ("total (as the engine sees it)", b.total_gpu_memory_bytes),
        (fraction, b.requested_bytes),
        ("- weights", b.weights_bytes),
        ("- peak activation (estimate)", b.activation_bytes),
        ("- CUDA context / NCCL (estimate)", b.non_torch_bytes),
        ("= KV cache budget" + (" (--kv-cache-memory-bytes)" if b.kv_budget_overridden else ""), b.kv_budget_bytes),
    ]
    for name, value in rows:
        mem.add_row(name, human_bytes(value), f"{gib(value):.2f}")
    print_table(c, mem)

    kv = Table(title="KV cache (vLLM block arithmetic)")
    kv.add_column("quantity")
    kv.add_column("value", justify="right")
    kv.add_row("KV bytes per token per GPU", f"{p.kv_bytes_per_token_per_gpu:,}")
    kv.add_row(f"KV per {eng.max_model_len:,}-token request per GPU", human_bytes(p.kv_bytes_per_request))
    kv.add_row("block size (tokens) · groups", f"{p.layout.block_size} · {len(p.layout.groups)}")
    kv.add_row("GPU blocks", f"{st.kv.num_blocks:,}")
    kv.add_row("GPU KV cache size (tokens)", f"{st.kv.kv_cache_tokens:,}")
    kv.add_row(f"maximum concurrency for {eng.max_model_len:,} tokens", f"{st.kv.max_concurrency:.2f}x")
    kv.add_row(f"requests of {p.request.total_tokens:,} tokens held at once", f"{p.kv_batch_limit:,}")
    kv.add_row("  on average, paged (each at its current length)", f"{p.paged_concurrency:,.1f}")
    print_table(c, kv)

    speed = Table(title="Speed (roofline, no queueing)")
    speed.add_column("quantity")
    speed.add_column("value", justify="right")
    speed.add_row("concurrent requests (batch)", f"{p.batch:,}  (limited by {p.batch_limited_by})")
    speed.add_row("decode step at that batch", human_seconds(p.decode_step_time_s))
    tpot_iv = response.intervals.get("tpot_s")
    tpot_text = human_seconds(p.tpot_s)
    if tpot_iv is not None:  # the corrected figure, inside its interval; the model's beside it
        tpot_text = (
            f"{human_seconds(tpot_iv.estimate)} ({tpot_iv.level:.0%}: {human_seconds(tpot_iv.low)}–"
            f"{human_seconds(tpot_iv.high)}; model {human_seconds(p.tpot_s)})"
        )
    speed.add_row("TPOT with chunked prefill", tpot_text)
    speed.add_row("TTFT beside that batch", human_seconds(p.ttft_s))
    speed.add_row(
        "single request TTFT / TPOT",
        f"{human_seconds(p.single_request_ttft_s)} / {human_seconds(p.single_request_tpot_s)}",
    )
    speed.add_row("output tokens/s per user", f"{p.output_tokens_per_s_per_user:,.1f}")
    speed.add_row("output tokens/s total", f"{p.output_tokens_per_s_total:,.0f}")
    speed.add_row("bottleneck", p.bottleneck)
    cb = p.compute_bound_batch
    speed.add_row("decode turns compute-bound at batch", f"{cb:,}" if cb else "never (memory-bound)")
    print_table(c, speed)

    users = Table(title="Users and cost")
    users.add_column("quantity")
    users.add_column("value", justify="right")
    iv = response.intervals.get("users_served")
    busy = response.busy_fraction
    model_row = f"servecap's model: the batch {busy:.0%} busy (99th percentile in flight fits)"
    if iv is not None:
        users.add_row("users served (corrected by the corpus's median error)", f"{int(iv.estimate):,}")
        users.add_row(f"  {iv.level:.0%} interval", f"{iv.low:,.0f}–{iv.high:,.0f}")
        users.add_row(f"  {model_row}", f"{p.users_served:,}")
    else:
        users.add_row(f"users served ({model_row})", f"{p.users_served:,}")
    users.add_row("$ per hour (rent)", _money(p.cost.usd_per_hour))
    users.add_row("$ per user per month (rent)", _money(p.cost.usd_per_user_month))
    users.add_row("$ per million output tokens", _money(p.cost.usd_per_million_tokens))
    users.add_row("$ per user over the hardware's life (own)", _money(p.cost.usd_per_user_lifetime))
    if peak_users is not None:
        users.add_row(f"replicas for {peak_users:,} users", str(replicas) if replicas is not None else "n/a")
    if peak_tok_s is not None:
        users.add_row(
            f"replicas for {peak_tok_s:,.0f} output tokens/s",
            str(replicas_tok_s) if replicas_tok_s is not None else "n/a",
        )
    print_table(c, users)

    lv = Table(title="Levers (each re-planned)")
    for col in ("lever", "flag", "max conc.", "users", "TPOT", "TTFT", "$/user/mo"):
        lv.add_column(col, no_wrap=col == "flag", justify="left" if col in ("lever", "flag") else "right")
    for r in lever_rows:
        lv.add_row(
            r.name,
            r.change,
            f"{r.max_concurrency:.2f}x" if r.max_concurrency is not None else "-",
            f"{r.users_served:,}" if r.users_served is not None else "-",
            human_seconds(r.tpot_s) if r.tpot_s is not None else "-",
            human_seconds(r.ttft_s) if r.ttft_s is not None else "-",
            _money(r.usd_per_user_month),
        )
    print_table(c, lv)
    if response.step is not None:
        render_step(response.step, c)
    for r in lever_rows:
        if r.note:
            c.print(f"[dim]{r.name}: {r.note}[/]")
    for name, iv in response.intervals.items():
        notes = [*notes, f"{name}: {iv.note}"]
    for note in notes:
        c.print(f"[dim]note: {note}[/]")
    for warning in p.warnings:
        c.print(f"[yellow]warning: {warning}[/]")


def render_step(step: StepExplanation, c: Console) -> None:
    """``--explain-step``: one decode step's operations with their times and sources."""
    t = Table(
        title=f"One decode step: batch {step.batch:,}, {step.context_tokens:,.0f} tokens of context each "
        f"(step model: {step.step_model})"
    )
    for name, justify in (("operation", "left"), ("calls", "right"), ("time", "right"), ("share", "right")):
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    t.add_column("source")
    for o in step.operations:
        share = o.time_s / step.total_s if step.total_s > 0 else 0.0
        t.add_row(o.name, f"{o.count:,}", f"{o.time_s * 1e3:,.3f} ms", f"{share:.1%}", o.source)
    t.add_row("[bold]step[/]", "", f"[bold]{step.total_s * 1e3:,.3f} ms[/]", "100.0%", "the simulator's step")
    print_table(c, t)
    if step.choice:
        c.print(f"[dim]step model {step.choice}[/]")
    if step.step_model == "operations":
        c.print(f"[dim]{step.fallback_share:.0%} of the operations' time from the roofline fallback[/]")


def _layout(dep: Deployment) -> str:
    """``tp 8, pp 1``, plus attention DP, EP, nodes and speculative decoding where set."""
    par = dep.parallelism
    parts = [f"tp {par.tp}", f"pp {par.pp}"]
    if par.dp > 1:
        parts.append(f"attention dp {par.dp}")
    if par.ep > 1:
        parts.append(f"ep {par.ep}")
    if par.nodes > 1:
        parts.append(f"{par.nodes} nodes of {par.gpus_per_node}")
    if dep.speculative is not None:
        spec = dep.speculative
        parts.append(f"{spec.method} k={spec.num_speculative_tokens}")
    return ", ".join(parts)
