"""A fleet plan's answer as text: its summary lines and tables, the offline HTML page
(``servecap fleet plan --html``) and the worked example's block in docs/fleet.md."""

from __future__ import annotations

import html as html_lib
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servecap.planning.model import CandidateOut, FleetEval, FleetPlanResponse, LeverOut


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    return "failed" if x >= 1e8 else f"{x * 1e3:,.0f}"


def replicas_cell(o: CandidateOut) -> str:
    if o.replicas is not None:
        return str(o.replicas)
    if o.note.startswith("ruled out"):
        return "ruled out"
    if o.note and o.best is not None:
        return f"> {o.best.replicas} (costs more)"
    return "> 0 (costs more)" if o.note else "none meets"


def evidence_line(label: str, ev: FleetEval, *, fixed: bool = True) -> str:
    verdict = "meets" if ev.slo_met else "fails"
    failed = f"; fails {', '.join(ev.failed_targets)}" if ev.failed_targets else ""
    who = f"{ev.candidate} x {ev.replicas}" if fixed else f"{ev.candidate} (autoscaled)"
    cost = f", ${ev.usd_per_month:,.0f}/month" if fixed else ""
    return (
        f"{label}: {who} {verdict} the SLOs — {ev.attainment:.1%} of requests within "
        f"their class's targets, p99 TTFT {_ms(ev.ttft_p99_s)} ms, p99 TPOT {_ms(ev.tpot_p99_s)} ms{cost}{failed}"
    )


def interval_cells(r: FleetPlanResponse | LeverOut) -> tuple[str, str] | None:
    """The chosen fleet's (or a lever row's own) 80% intervals as table cells, ``("6–9",
    "$9,198–$13,797")``, or None when it carries none (``--json``'s ``interval``)."""
    n, usd = r.interval.get("replicas"), r.interval.get("usd_per_month")
    if n is None or usd is None:
        return None
    return f"{n['low']:,.0f}–{n['high']:,.0f}", f"${usd['low']:,.0f}–${usd['high']:,.0f}"


def interval_line(r: FleetPlanResponse) -> str | None:
    """The chosen fleet's intervals in a line: count, rent and what they come from."""
    cells = interval_cells(r)
    if cells is None:
        return None
    iv = r.interval["replicas"]
    line = (
        f"{iv['level']:.0%} interval: {cells[0]} replicas, {cells[1]}/month "
        f"(the throughput interval of {iv['count']} corpus values of {iv['basis']}, carried to the count)"
    )
    estimate = iv.get("estimate")
    if isinstance(estimate, float) and estimate == estimate and estimate != r.chosen.replicas:
        # the count at the corpus's median error lies inside the interval; the simulated count is the deployable one
        line += (
            f"; {estimate:,.0f} replicas at the corpus's median error, {r.chosen.replicas} as simulated on "
            "servecap's model (the count the fleet file deploys)"
        )
    return line


def shows_tier_hits(r: FleetPlanResponse) -> bool:
    """Whether the plan ran KV tiers (the chosen fleet's pools, or a tier lever): its text then
    says what share of the prompt tokens each tier found, for the chosen fleet and each lever."""
    return r.fleet.kv_tier_hits is not None or any(lv.hit_rates is not None for lv in r.levers)


def hits_text(hits: dict[str, float] | None) -> str:
    """Prompt tokens found per tier, ``"gpu 76%, cpu 4%, remote 2%"`` ("-": not measured)."""
    if not hits:
        return "-"
    return ", ".join(f"{tier} {x:.0%}" for tier, x in hits.items())


def chosen_hits(r: FleetPlanResponse) -> dict[str, float] | None:
    """The chosen fleet's hits per tier (its GPU prefix cache's alone where it has no tiers)."""
    if r.fleet.kv_tier_hits is not None:
        return r.fleet.kv_tier_hits
    rate = r.fleet.prefix_cache_hit_rate
    return None if rate is None else {"gpu": rate}


def summary_lines(r: FleetPlanResponse) -> list[str]:
    """The answer in a few plain lines (the docs' worked example prints these)."""
    c = r.chosen
    users = f" ({r.peak_users:,} users, one request each per {r.request_interval_s:g} s)" if r.peak_users else ""
    lines = [
        f"traffic: peak {r.peak_rps:,.2f} req/s{users}; {'a daily curve' if r.daily_curve else 'steady'}",
        "SLOs: " + "; ".join(r.slo),
        f"peak window: {r.window['warmup_s']:,.0f} s warm-up + {r.window['duration_s'] - r.window['warmup_s']:,.0f} s "
        f"scored ({r.window['scored_requests']:,.0f} requests: >= {r.window['tail_samples']:,.0f} beyond each "
        "class's strictest percentile)",
        f"cheapest fleet: {c.replicas} x {c.name} ({c.gpus_per_replica} GPU per replica, {c.model}), "
        f"${c.usd_per_month or 0:,.0f}/month fixed at the peak ({c.price_per_gpu_hour:.2f} $/GPU-hour x 730 h)",
        evidence_line("chosen", r.fleet),
    ]
    if shows_tier_hits(r):
        lines.append(f"prompt tokens found (chosen fleet): {hits_text(chosen_hits(r))}")
    iv_line = interval_line(r)
    if iv_line is not None:
        lines.insert(lines.index(evidence_line("chosen", r.fleet)), iv_line)
    if r.next_cheaper is not None:
        lines.append(evidence_line("one fewer", r.next_cheaper))
    lines.append(evidence_line("verified (second seed)", r.verify))
    a = r.autoscaler
    if a is not None:
        lines.append(
            f"autoscaler: {a.preset} on {a.signal} target {a.target:g} every {a.interval_s:g} s, min {a.min_replicas}, "
            f"max {a.max_replicas}; scale ahead {a.scale_ahead_lead_s:,.0f} s early at "
            f"{a.scale_ahead_req_s_per_replica:,.2f} req/s per replica x {a.scale_ahead_headroom:g}; "
            f"~${a.usd_per_month:,.0f}/month over the day"
        )
        lines.append(
            f"steepest ramp {a.ramp_start_s / 3600:,.2f} h to {a.ramp_end_s / 3600:,.2f} h "
            f"({a.ramp_rate_from_req_s:,.1f} -> {a.ramp_rate_to_req_s:,.1f} req/s): "
            + evidence_line("ramp", a.ramp, fixed=False).removeprefix("ramp: ")
        )
    lines.append(f"simulations: {r.simulations}")
    return lines


def lever_header(r: FleetPlanResponse) -> tuple[str, ...]:
    """The lever table's columns: :data:`LEVER_HEADER`, and the prompt tokens each tier found
    where the plan ran KV tiers (:func:`shows_tier_hits`)."""
    return (*LEVER_HEADER, "prompt tokens found") if shows_tier_hits(r) else LEVER_HEADER


def lever_rows(r: FleetPlanResponse) -> list[tuple[str, ...]]:
    """The lever table's rows, the chosen fleet's first, as :func:`lever_header` names them."""
    rows: list[tuple[str, ...]] = []
    hits = shows_tier_hits(r)
    c = r.chosen
    cells = interval_cells(r)
    level = f"{r.interval['replicas']['level']:.0%}" if cells else ""
    n_iv, usd_iv = (f" ({level} {cells[0]})", f" ({level} {cells[1]})") if cells else ("", "")
    rows.append(
        (
            "chosen",
            f"{r.router} routing, {c.name}",
            f"{c.replicas}{n_iv}"
            if r.autoscaler is None
            else f"{c.replicas}{n_iv} at the peak ({r.autoscaler.min_replicas}-{r.autoscaler.max_replicas} autoscaled)",
            f"${c.usd_per_month or 0:,.0f}{usd_iv}",
            _ms(r.fleet.ttft_p99_s),
            _ms(r.fleet.tpot_p99_s),
            "yes" if r.fleet.slo_met else "no",
            *((hits_text(chosen_hits(r)),) if hits else ()),
        )
    )
    a = r.autoscaler
    for lv in r.levers:
        ramp = lv.name in ("scale-ahead", "warm-pool") and a is not None
        own = interval_cells(lv)  # a row's own interval (the P/D split's)
        lv_level = f"{lv.interval['replicas']['level']:.0%}" if own else ""
        lv_n, lv_usd = (f" ({lv_level} {own[0]})", f" ({lv_level} {own[1]})") if own else ("", "")
        rows.append(
            (
                lv.name,
                lv.change,
                f"{a.min_replicas}-{a.max_replicas}"
                if ramp and a is not None
                else ("-" if lv.replicas is None else f"{lv.replicas}{lv_n}"),
                "-" if lv.usd_per_month is None else f"${lv.usd_per_month:,.0f}{lv_usd}",
                _ms(lv.ttft_p99_s),
                _ms(lv.tpot_p99_s),
                "yes" if lv.slo_met else "no",
                *((hits_text(lv.hit_rates),) if hits else ()),
            )
        )
    return rows


def lever_notes(levers: Sequence[LeverOut]) -> list[str]:
    """The reason under the lever table for each row that shows "-" or "no" (and the P/D split's
    ratios, a KV tier's hit rates): a row never fails without saying why."""
    out = []
    for lv in levers:
        if not lv.slo_met or lv.replicas is None:
            out.append(f"{lv.name}: {lv.note or NO_COUNT}")
        elif (lv.name.startswith("split") or lv.hit_rates is not None) and lv.note:
            out.append(f"{lv.name}: {lv.note}")  # the P/D split's ratios; a KV tier's hit rates
    return out


NO_COUNT = "no replica count the search tried meets the SLOs"

LEVER_HEADER = ("lever", "change", "replicas", "$/month", "p99 TTFT (ms)", "p99 TPOT (ms)", "SLO met")


def plan_html(r: FleetPlanResponse) -> str:
    """One offline page: the answer, the candidates and the lever table."""
    esc = html_lib.escape

    def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
        head = "".join(f"<th>{esc(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{esc(x)}</td>" for x in row) + "</tr>" for row in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    cands = [
        (
            o.name,
            str(o.closed_form_replicas),
            replicas_cell(o),
            "-" if o.usd_per_month is None else f"${o.usd_per_month:,.0f}",
            str(o.simulations),
        )
        for o in r.candidates
    ]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>servecap fleet plan</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}</style></head><body>",
        f"<h1>servecap fleet plan: {esc(r.model)}</h1>",
        "".join(f"<p>{esc(line)}</p>" for line in summary_lines(r)),
        "<h2>Candidates (peak window, fixed fleet)</h2>",
        table(("candidate", "closed-form replicas", "simulated replicas", "$/month", "simulations"), cands),
        "<h2>Levers (each re-simulated)</h2>",
        table(lever_header(r), [tuple(x) for x in lever_rows(r)]),
        "".join(f"<p>{esc(line)}</p>" for line in lever_notes(r.levers)),
        "".join(f"<p><small>lever left out: {esc(s)}</small></p>" for s in r.levers_skipped),
        "".join(f"<p><small>why: {esc(s)}</small></p>" for s in r.story),
        "</body></html>",
    ]
    return "\n".join(parts)


DOC_BEGIN = "<!-- fleet-plan-example:begin (scripts/fleet_plan_example.py writes this block) -->"
DOC_END = "<!-- fleet-plan-example:end -->"


def markdown_block(r: FleetPlanResponse) -> str:
    """The worked example's block in docs/fleet.md: the answer, the candidates, the levers."""
    out = [DOC_BEGIN, "", "```"]
    out.extend(summary_lines(r))
    out += ["```", "", "| candidate | closed-form replicas | simulated replicas | $/month | users/GPU | simulations |"]
    out.append("|---|---|---|---|---|---|")
    for o in r.candidates:
        users = (
            "-"
            if o.users_per_gpu is None
            else f"{o.users_per_gpu:,.0f} ({o.closed_form_users_per_gpu:,.0f} closed form)"
        )
        out.append(
            f"| {o.name} | {o.closed_form_replicas} | {replicas_cell(o)} | "
            f"{'-' if o.usd_per_month is None else f'${o.usd_per_month:,.0f}'} | {users} | {o.simulations} |"
        )
    header = lever_header(r)
    out += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out.extend("| " + " | ".join(row) + " |" for row in lever_rows(r))
    notes = [f"- {line}" for line in lever_notes(r.levers)]
    if notes:
        out.append("")
        out.extend(notes)
    if r.levers_skipped:
        out.append("")
        out.extend(f"- left out: {s}" for s in r.levers_skipped)
    out += ["", DOC_END]
    return "\n".join(out)
