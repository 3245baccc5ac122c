"""AIConfigurator's step times through the efficiency seam: the cache, the row selection, and
that a cached row is simulated on the cache's coefficients."""

from __future__ import annotations

import pytest

from servecap.errors import ServecapError
from servecap.validation.corpus import load_corpus
from servecap.validation.predict import Adjustments, predict_row
from servecap.validation.step_source import load_step_cache, select_step_source

ROW = "tenstorrent-issue340-a100/qwen3-1.7b-a100-bf16-c1-128-128"


def test_cache_rows_are_corpus_rows_with_physical_coefficients() -> None:
    cache = load_step_cache()
    ids = {r.full_id for r in load_corpus()}
    assert len(cache) >= 40 and set(cache) <= ids
    for eff in cache.values():
        assert eff.bandwidth_efficiency is not None and 0.0 < eff.bandwidth_efficiency <= 1.0
        assert eff.compute_efficiency is not None and 0.0 < eff.compute_efficiency <= 1.0
        assert 0.0 <= eff.step_overhead_s <= 0.05


def test_step_models_select_rows_and_coefficients() -> None:
    rows = load_corpus()
    cache = load_step_cache()
    same, roof = select_step_source("roofline", rows)
    assert same == rows and {a.efficiency.step_model for a in roof.values()} == {"roofline"}
    default_rows, default = select_step_source("auto", rows)  # servecap's default: per class
    assert default_rows == rows and {a.efficiency.step_model for a in default.values()} == {"auto"}
    auto_rows, auto = select_step_source("aiconfigurator-or-roofline", rows)
    aic_rows, aic = select_step_source("aiconfigurator", rows)
    assert auto_rows == rows and len(aic_rows) == len(cache) == len(aic) == len(auto)
    assert all(r.full_id in cache for r in aic_rows)
    # the coefficients replace the efficiency; the per-request server cost stays the default's
    adj = aic[ROW]
    assert adj.efficiency.bandwidth_efficiency == cache[ROW].bandwidth_efficiency
    assert adj.efficiency.request_overhead_s == Adjustments().efficiency.request_overhead_s
    with pytest.raises(ServecapError, match="step_model"):
        select_step_source("measured", rows)


def test_a_cached_row_runs_on_aiconfigurators_step_times() -> None:
    crow = next(r for r in load_corpus() if r.full_id == ROW)
    _, per_row = select_step_source("aiconfigurator-or-roofline", [crow])
    roofline, aic = predict_row(crow, select_step_source("roofline", [crow])[1][ROW]), predict_row(crow, per_row[ROW])
    # one request in flight: TPOT is the decode step, which the coefficients set
    assert aic.values["tpot.mean"] != roofline.values["tpot.mean"]
    eff = per_row[ROW].efficiency
    assert aic.values["tpot.mean"] > eff.step_overhead_s
