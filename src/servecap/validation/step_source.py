"""Where a corpus row's step times come from: the roofline with the fitted defaults, or
NVIDIA AIConfigurator's measured kernel timings (``servecap validate --step-model``).

AIConfigurator (0.12.0, Apache-2.0) is not a dependency: ``benchmarks/peer_step_source.py
--write-cache`` runs it in its own environment, samples its per-iteration estimate
(``run_mixed``: prefill tokens beside decoding requests) for each row it covers, fits the
roofline's three step-time coefficients (bandwidth and compute efficiency, per-step overhead)
to those samples, and writes them to ``validation/aic_steps.json`` — the cache this module reads.
The coefficients enter the simulation through the same :class:`~servecap.specs.perf.Efficiency`
seam a calibration file uses, so servecap's scheduler, KV pool, queue and percentiles run on
AIConfigurator's step times.

- ``auto`` (the default, servecap's own default step model): each row on the step model its
  class's training rows favour (``specs.step_choice``: the operations for MoE above 100B
  parameters on NVIDIA GPUs outside TensorRT-LLM and for AMD GPUs, the roofline elsewhere);
- ``roofline``: every row on the fitted defaults (what ``servecap validate`` did before ``auto``);
- ``operations``: every row on the step as the sum of its operations (``core.ops``): NVIDIA's
  measured kernel tables where they cover an operation (``specs.kernel_timings``), the roofline
  with the fitted efficiencies elsewhere;
- ``aiconfigurator``: only the rows the cache covers, on its coefficients;
- ``aiconfigurator-or-roofline``: the cache's coefficients where it covers a row, the roofline
  elsewhere.
"""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from pathlib import Path

from servecap.errors import ServecapError
from servecap.specs.perf import Efficiency
from servecap.validation.corpus import CorpusRow
from servecap.validation.predict import Adjustments

STEP_MODELS: tuple[str, ...] = ("auto", "roofline", "operations", "aiconfigurator", "aiconfigurator-or-roofline")
CACHE_SCHEMA = "servecap.step-cache/1"


def cache_path() -> Path:
    return Path(str(resources.files("servecap.validation") / "aic_steps.json"))


def load_step_cache(path: Path | None = None) -> dict[str, Efficiency]:
    """Row full id -> the efficiencies fitted to AIConfigurator's step times for it."""
    p = path or cache_path()
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ServecapError(
            "step_cache", str(p), "no such file (benchmarks/peer_step_source.py --write-cache)"
        ) from None
    if raw.get("schema") != CACHE_SCHEMA:
        raise ServecapError("step_cache.schema", raw.get("schema"), f"must be {CACHE_SCHEMA}")
    out: dict[str, Efficiency] = {}
    for row_id, c in raw["rows"].items():
        out[row_id] = Efficiency(
            bandwidth_efficiency=float(c["bandwidth_efficiency"]),
            compute_efficiency=float(c["compute_efficiency"]),
            step_overhead_s=float(c["step_overhead_s"]),
        )
    return out


def select_step_source(
    step_model: str, rows: list[CorpusRow], base: Adjustments | None = None, cache: dict[str, Efficiency] | None = None
) -> tuple[list[CorpusRow], dict[str, Adjustments]]:
    """The rows to run under ``step_model`` and the per-row adjustments replacing ``base``'s
    efficiency (the request overhead and everything else of ``base`` kept); ``auto`` with a
    ``base`` (a calibration) keeps ``base``'s own step model."""
    if step_model not in STEP_MODELS:
        raise ServecapError("step_model", step_model, "must be one of " + ", ".join(STEP_MODELS))
    if step_model in ("auto", "roofline", "operations"):
        if step_model == "auto" and base is not None:
            return rows, {}  # base's own step model (a calibration's coefficients: the roofline's)
        adj = base or Adjustments()
        each = replace(adj, efficiency=replace(adj.efficiency, step_model=step_model))
        return rows, {r.full_id: each for r in rows}
    fitted = cache if cache is not None else load_step_cache()
    adj = base or Adjustments()
    per_row = {
        r.full_id: replace(
            adj,
            efficiency=replace(fitted[r.full_id], request_overhead_s=adj.efficiency.request_overhead_s),
            compute_efficiency_low_precision=None,
        )
        for r in rows
        if r.full_id in fitted
    }
    if step_model == "aiconfigurator":
        rows = [r for r in rows if r.full_id in per_row]
    return rows, per_row
