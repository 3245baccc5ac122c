"""The fleet plan's "split prefill/decode" lever: the chosen candidate's GPUs as prefill and
decode pools instead of co-located replicas, re-simulated on the same peak window.

For a total of ``T`` replicas the split tries prefill shares :data:`SHARES` of ``T`` (rounded, at
least one replica a side; once a share met the targets at another size, the three nearest it,
nearest first) and stops at
the first that meets every target, skipping the ratios a failed one rules out (one that missed
TPOT, short of decode replicas, rules out those with no more decode replicas); ``T`` is searched like a
co-located fleet's replica count (:func:`servecap.fleet.plan_search.smallest_passing`, from the
chosen count) up to twice the chosen count (:data:`SIZE_LIMIT_FACTOR`: a split needing more
GPUs than that does not pay, and the row says so). That largest size is simulated first: when
no ratio of it meets the targets the answer is known (co-located wins) for the ratios of one
size; when one does, its share is the first tried at the smaller sizes. The row names the winning ``prefill + decode`` counts and its cost;
its note lists every ratio tried at the answer's size and one size below (where the ratio
stops paying). Both sides keep the candidate's TP (a per-role TP is a fleet file's two pools);
the KV crosses the ``infiniband`` link kind, one NIC per GPU, and the prefill side routes by the
plan's own router (the co-located fleet's, so the comparison is of the layout alone), the decode
side by least-kv (llm-d's decode scorer) — docs/fleet.md, "Disaggregated
prefill and decode". The ``split-tp`` lever does the same with the decode replicas at twice the
candidate's TP (a per-role TP: decode's KV reads spread over more GPUs), sizes counted in units
of the candidate's GPUs per replica.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servecap.fleet.file_schema import fleet_from_dict
from servecap.fleet.plan_search import SearchResult, smallest_passing
from servecap.planning.doc import FleetDoc, PoolDoc
from servecap.planning.model import FleetEval, FleetPlanRequest, LeverOut, pool_dict

if TYPE_CHECKING:
    from servecap.planning.model import CandidateModel, Context, Scored

SHARES = (0.5, 0.25, 0.375, 0.625, 0.75)  # prefill share of the replicas, in the order tried
SIZE_LIMIT_FACTOR = 2  # the largest split searched, in units of the chosen fleet's GPUs
NEAR_RATIOS = 3  # once a share met the targets: the ratios tried per size, nearest that share first


def split_fleet(
    request: FleetPlanRequest, c: CandidateModel, prefill: int, decode: int, decode_tp_factor: int = 1
) -> FleetDoc:
    """The fleet file of a split layout of candidate ``c`` (its decode side at
    ``decode_tp_factor`` times the candidate's TP)."""
    decode_pool: PoolDoc = {**pool_dict(request, c, decode, name="decode"), "role": "decode"}
    if decode_tp_factor != 1:
        decode_pool["tp"] = (c.tp or 1) * decode_tp_factor
    return {
        "pools": [{**pool_dict(request, c, prefill, name="prefill"), "role": "prefill"}, decode_pool],
        "pd_router": {"prefill": request.router, "decode": "least-kv"},
        "kv_link": {"kind": "infiniband"},
    }


def splits_of(total: int, decode_tp_factor: int = 1) -> list[tuple[int, int]]:
    """The (prefill, decode) replica counts tried for ``total`` units of the candidate's GPUs (a
    decode replica takes ``decode_tp_factor`` units), in order, without repeats: the prefill
    side takes each share of the units, the decode side what is left in whole replicas, and
    a remainder goes to the prefill side."""
    k = decode_tp_factor
    out: list[tuple[int, int]] = []
    for share in SHARES:
        p = min(total - k, max(1, round(total * share)))
        d = (total - p) // k
        if d < 1:
            continue
        p = total - k * d
        if (p, d) not in out:
            out.append((p, d))
    return out


def ratios_to_try(
    splits: list[tuple[int, int]], tried: dict[tuple[int, int], FleetEval], share: float | None
) -> list[tuple[int, int]]:
    """The (prefill, decode) counts of one size worth simulating, in order: every share of
    :data:`SHARES` until one met the targets at another size (``share``), then the
    :data:`NEAR_RATIOS` nearest that share; none a failed ratio of this size rules out. TPOT is the decode side's alone: a ratio that
    missed a TPOT target rules out every ratio with at least as many prefill replicas (so no
    more decode ones) — assuming, as the size search assumes more replicas never hurt, that
    more decode replicas never raise TPOT. A missed TTFT rules nothing out: it is the prefill
    side's queue, or the decode side's, when a decode pool short of KV room holds finished
    prefills back."""
    order = splits
    if share is not None:  # the nearest shares only
        order = sorted(splits, key=lambda pd: abs(pd[0] / (pd[0] + pd[1]) - share))[:NEAR_RATIOS]
    hi = 1 << 30  # prefill counts still open: p < hi
    for (p, d), ev in tried.items():
        if (p, d) in splits and not ev.slo_met and any(t.metric == "tpot_s" and not t.met for t in ev.targets):
            hi = min(hi, p)
    return [(p, d) for p, d in order if p < hi and (p, d) not in tried]


def split_lever(
    ctx: Context,
    request: FleetPlanRequest,
    c: CandidateModel,
    scored: Scored,
    n: int,
    decode_tp_factor: int = 1,
    *,
    chosen: FleetEval | None = None,
) -> LeverOut:
    """The lever's row: the cheapest split layout meeting the SLOs, searched from ``n`` units of
    the candidate's GPUs (``split``; ``split-tp``: the decode side at twice the TP). Per size,
    the ratios :func:`ratios_to_try` leaves, until one meets the targets."""
    k = decode_tp_factor
    tried: dict[tuple[int, int], FleetEval] = {}
    share: list[float] = []  # the prefill share of the last ratio that met the targets

    sizes_seen: dict[int, tuple[bool, tuple[int, int] | None]] = {}

    def evaluate(total: int) -> tuple[bool, tuple[int, int] | None]:
        if total not in sizes_seen:
            sizes_seen[total] = evaluate_size(total)
        return sizes_seen[total]

    def evaluate_size(total: int) -> tuple[bool, tuple[int, int] | None]:
        if total < 1 + k:
            return False, None
        splits = splits_of(total, k)
        while True:
            todo = ratios_to_try(splits, tried, share[-1] if share else None)
            if not todo:
                return False, None
            p, d = todo[0]
            ff = fleet_from_dict(split_fleet(request, c, p, d, k))
            ev = ctx.simulate(ff, scored, label=c.label(), replicas=p + d)
            tried[(p, d)] = ev
            if ev.slo_met:
                share.append(p / (p + d))
                return True, (p, d)

    # a split of more than twice the chosen GPUs does not pay: the search stops there, and starts
    # there — where no split of that size meets the targets, none smaller does (the size search's
    # assumption), and the answer costs the ratios of one size
    limit = min(request.max_replicas, max(SIZE_LIMIT_FACTOR * n, 2 + k))
    if evaluate(limit)[0]:
        res = smallest_passing(evaluate, max(1 + k, min(n, limit)), limit=limit, lowest=1 + k)
    else:
        res = SearchResult(None, {limit: sizes_seen[limit]})
    name = "split" if k == 1 else "split-tp"
    tp_note = "" if k == 1 else f", decode at TP {(c.tp or 1) * k}"
    sims = sum(1 for _ in tried)

    def ratios(sizes: tuple[int, ...]) -> str:
        return "ratios: " + ", ".join(
            f"{p}P+{d}D {'meets' if e.slo_met else 'fails'} ({e.attainment:.0%})"
            for (p, d), e in sorted(tried.items())
            if p + k * d in sizes
        )

    if res.answer is None:
        return LeverOut(
            name=name,
            change="split prefill/decode" + tp_note,
            replicas=None,
            usd_per_month=None,
            ttft_p99_s=None,
            tpot_p99_s=None,
            slo_met=False,
            simulations=sims,
            note=f"co-located wins: no split of up to {limit} replicas meets the SLOs"
            + (f" ({limit / n:.1f}x the chosen {n})" if limit < request.max_replicas and n > 0 else "")
            + f"; {ratios((limit,))}",
        )
    pd = res.evaluations[res.answer][1]
    assert pd is not None
    ev = tried[pd]
    note = ratios((res.answer, res.answer - 1))
    if chosen is not None:
        note = verdict(chosen, ev) + "; " + note
    return LeverOut(
        name=name,
        change=f"split prefill/decode: {pd[0]} prefill + {pd[1]} decode replicas ({c.label()}{tp_note}, "
        "InfiniBand KV link)",
        replicas=ev.replicas,
        usd_per_month=ev.usd_per_month,
        ttft_p99_s=ev.ttft_p99_s,
        tpot_p99_s=ev.tpot_p99_s,
        slo_met=True,
        simulations=sims,
        note=note,
        fleet_file=split_fleet(request, c, pd[0], pd[1], k),
    )


def verdict(colocated: FleetEval, split: FleetEval) -> str:
    """Which layout wins, by how much in $/month, and both p99s."""

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x * 1e3:,.0f}"

    a, b = colocated.usd_per_month, split.usd_per_month
    if b < a:
        head = f"split wins: {a / b:.2f}x cheaper (${b:,.0f} vs ${a:,.0f}/month co-located)"
    elif b > a:
        head = f"co-located wins: {b / a:.2f}x cheaper (${a:,.0f} vs ${b:,.0f}/month split)"
    else:
        head = f"a tie at ${a:,.0f}/month"
    return (
        f"{head}; p99 TTFT {ms(split.ttft_p99_s)} vs {ms(colocated.ttft_p99_s)} ms, "
        f"p99 TPOT {ms(split.tpot_p99_s)} vs {ms(colocated.tpot_p99_s)} ms (split vs co-located)"
    )
