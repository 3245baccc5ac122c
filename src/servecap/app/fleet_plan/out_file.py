"""``fleet plan --out FILE``: the chosen fleet written as a fleet file, and the peak window it
was scored on as a workload file beside it, so the plan deploys as planned:

- ``servecap fleet simulate --fleet FILE --workload FILE.peak.yaml --seed S`` re-runs the plan's
  own evidence (the same window, the same seed);
- ``servecap export keda|kserve|ray-serve|production-stack|litellm|pd FILE`` reads it directly
  (``export`` also reads ``fleet plan --json`` itself, through its ``fleet_file``).

The fleet file carries the plan's SLO (the strictest p99 TTFT and TPOT of its targets, in ms:
the fleet file's ``slo``) so ``fleet simulate`` scores attainment against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from servecap.json_object import JsonObject
from servecap.planning.model import FleetPlanRequest, FleetPlanResponse


def slo_ms(request: FleetPlanRequest) -> tuple[float | None, float | None]:
    """The strictest p99 TTFT and TPOT of the plan's SLO in ms (the fleet file's ``slo``)."""
    from servecap.planning.run import DEFAULT_SLO

    slo = request.slo or DEFAULT_SLO
    ttft = [v for q, v in (slo.ttft_s or {}).items() if str(q) == "p99"]
    tpot = [v for q, v in (slo.tpot_s or {}).items() if str(q) == "p99"]
    return (min(ttft) * 1e3 if ttft else None, min(tpot) * 1e3 if tpot else None)


@dataclass(frozen=True, slots=True)
class PlanFiles:
    fleet_text: str
    workload_text: str
    workload_path: Path
    rerun: str  # the command that re-runs the plan's evidence
    split_text: str | None = None  # the P/D split that met the SLOs, as a fleet file
    split_path: Path | None = None


def workload_path_for(path: Path) -> Path:
    """``fleet.yaml`` -> ``fleet.peak.yaml`` (beside it, the same format)."""
    return path.with_name(f"{path.stem}.peak{path.suffix or '.yaml'}")


def plan_files(r: FleetPlanResponse, path: Path, seed: int, slo_ms: tuple[float | None, float | None]) -> PlanFiles:
    """The texts ``--out path`` writes (YAML, or JSON for a ``.json`` path)."""
    import json

    import yaml

    wl_path = workload_path_for(path)
    doc: JsonObject = dict(r.fleet_file)
    ttft_ms, tpot_ms = slo_ms
    slo = {k: v for k, v in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms)) if v is not None}
    if slo:
        doc["slo"] = slo
    rerun = f"servecap fleet simulate --fleet {path.name} --workload {wl_path.name} --seed {seed}"
    c = r.chosen
    header = [
        f"servecap fleet plan: {c.replicas} x {c.name} ({c.model}), ${c.usd_per_month or 0:,.0f}/month at the peak",
        f"peak {r.peak_rps:,.2f} req/s; SLOs: " + "; ".join(r.slo),
        f"re-run the plan's evidence: {rerun}",
        f"deploy: servecap export keda|kserve|ray-serve|production-stack|litellm {path.name}",
    ]
    split = next((lv for lv in r.levers if lv.fleet_file is not None and lv.slo_met), None)
    split_doc: JsonObject | None = None
    split_path = split_header = None
    if split is not None and split.fleet_file is not None:
        split_doc = dict(split.fleet_file)
        if slo:
            split_doc["slo"] = slo
        split_path = path.with_name(f"{path.stem}.{split.name}{path.suffix or '.yaml'}")
        split_rerun = f"servecap fleet simulate --fleet {split_path.name} --workload {wl_path.name} --seed {seed}"
        split_header = [
            f"servecap fleet plan's {split.name} lever: {split.change}, ${split.usd_per_month or 0:,.0f}/month",
            f"{split.note}",
            f"re-run its evidence: {split_rerun}",
            f"deploy: servecap export pd {split_path.name}",
        ]
    if path.suffix == ".json":
        return PlanFiles(
            json.dumps(doc, indent=2) + "\n",
            json.dumps(r.peak_workload, indent=2) + "\n",
            wl_path,
            rerun,
            None if split_doc is None else json.dumps(split_doc, indent=2) + "\n",
            split_path,
        )
    fleet_text = "".join(f"# {line}\n" for line in header) + yaml.safe_dump(doc, sort_keys=False)
    wl_text = f"# the peak window servecap fleet plan scored (for {path.name}; {rerun})\n" + yaml.safe_dump(
        r.peak_workload, sort_keys=False
    )
    split_text = None
    if split_doc is not None and split_header is not None:
        split_text = "".join(f"# {line}\n" for line in split_header) + yaml.safe_dump(split_doc, sort_keys=False)
    return PlanFiles(fleet_text, wl_text, wl_path, rerun, split_text, split_path)
