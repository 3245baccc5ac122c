"""`servecap validate` on a small subset (fast), the CLI's one-line errors, and the fit's pieces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from servecap.app.validate import validate
from servecap.cli.main import cli, run
from servecap.report.validate_html import render_html
from servecap.specs.gpu import gpu_family
from servecap.validation.corpus import load_corpus, select
from servecap.validation.evaluate import Comparison, by_family, compare_rows
from servecap.validation.fit import nelder_mead, ttft_overhead
from servecap.validation.predict import Adjustments, predict_row

SMALL = "vllm-recipes-pr431-mi300x"


def test_validate_small_source() -> None:
    resp = validate(source=SMALL)
    assert resp.rows == 1 and resp.sources == [SMALL]
    assert {v.metric for v in resp.values} >= {"output_throughput.total", "ttft.mean", "tpot.median"}
    for v in resp.values:
        assert v.predicted is not None and v.predicted > 0
        assert v.error == pytest.approx(v.predicted / v.measured - 1.0)
    assert set(resp.by_metric) == {"throughput", "ttft", "tpot"}
    assert "MI300X" in resp.by_gpu
    assert "<table>" in render_html(resp)


def test_prediction_is_deterministic() -> None:
    crow = select(load_corpus(), source=SMALL)[0]
    assert predict_row(crow).values == predict_row(crow).values


def test_ttft_overhead_adds_to_ttft_and_e2e_only() -> None:
    crow = select(load_corpus(), source="vllm-issue-20710-b200")[0]
    base = predict_row(crow).values
    shifted = predict_row(crow, Adjustments(ttft_overhead_s=0.1)).values
    assert shifted["ttft.mean"] == pytest.approx(base["ttft.mean"] + 0.1)
    assert shifted["e2e.mean"] == pytest.approx(base["e2e.mean"] + 0.1)
    assert shifted["tpot.mean"] == pytest.approx(base["tpot.mean"])


def test_cli_json_and_html(tmp_path: Path) -> None:
    html = tmp_path / "v.html"
    result = CliRunner().invoke(cli, ["validate", "--source", SMALL, "--json", "--html", str(html)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["rows"] == 1 and data["schema_version"] == "servecap.validate/1"
    assert html.read_text().startswith("<!doctype html>")


def test_cli_table() -> None:
    result = CliRunner().invoke(cli, ["validate", "--source", SMALL, "--split", "all"])
    assert result.exit_code == 0, result.output
    assert "MAPE" in result.output


def test_unknown_source_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", ["servecap", "validate", "--source", "no-such-source"])
    with pytest.raises(SystemExit) as exc:
        run()
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert "source='no-such-source'" in err


def _cmp(measured: float, predicted: float, family: str = "ttft") -> Comparison:
    return Comparison("s/r", "s", "H100-SXM", "H100", "train", f"{family}.mean", family, measured, predicted, "w")


def test_error_tables_worked_by_hand() -> None:
    comps = [_cmp(1.0, 1.1, "throughput"), _cmp(2.0, 1.0, "throughput"), _cmp(4.0, 5.0, "throughput")]
    s = by_family(comps)["throughput"]
    # errors +10%, -50%, +25%: MAPE (0.10 + 0.50 + 0.25) / 3, median |error| 0.25, median error +0.10
    assert s.mape == pytest.approx(0.85 / 3) and s.median_abs == pytest.approx(0.25)
    assert s.median_signed == pytest.approx(0.10)


def test_ttft_overhead_closed_form_worked_by_hand() -> None:
    # residuals m - p: 0.05 at m = 0.1 and 0.2 at m = 1.0 -> o = (5 + 0.2) / (100 + 1) = 0.0514851...
    assert ttft_overhead([_cmp(0.1, 0.05), _cmp(1.0, 0.8)]) == pytest.approx(5.2 / 101)
    assert ttft_overhead([_cmp(0.1, 0.2)]) == 0.0  # never negative


def test_nelder_mead_finds_a_quadratic_minimum() -> None:
    x, value, evals = nelder_mead(
        lambda v: float(np.sum((v - np.array([1.0, -2.0])) ** 2)), np.zeros(2), step=0.5, max_evaluations=200, tol=1e-12
    )
    assert x == pytest.approx([1.0, -2.0], abs=1e-3) and value < 1e-6 and evals <= 200


def test_gpu_family() -> None:
    assert gpu_family("H100-SXM") == "H100"
    assert gpu_family("A100-80GB-SXM") == "A100"
    assert gpu_family("RTX-4090") == "RTX-4090"
    assert gpu_family("MI300X") == "MI300X"


def test_calibration_file_replaces_the_efficiencies(tmp_path: Path) -> None:
    cal = tmp_path / "cal.json"
    cal.write_text(
        json.dumps(
            {
                "model": "any",
                "gpu": "any",
                # 0.2: half the MI300X default bandwidth efficiency (0.418, fitted to the corpus;
                # 0.4 was half of the 0.80 planning assumption before), so a memory-bound TPOT doubles
                "coefficients": {"bandwidth_efficiency": 0.2, "compute_efficiency": 0.6, "step_overhead_s": 0.002},
            }
        )
    )
    slow = validate(source=SMALL, calibration=cal)
    base = validate(source=SMALL)
    tpot = {v.metric: v.predicted for v in base.values}["tpot.median"]
    assert slow.calibration == str(cal)
    assert {v.metric: v.predicted for v in slow.values}["tpot.median"] > 1.5 * tpot


def test_fit_improves_its_objective_on_one_row() -> None:
    from servecap.validation.fit import fit, squared_log_error

    rows = select(load_corpus(), source="tenstorrent-issue340-a100")[:2]
    before = squared_log_error(compare_rows(rows))
    result = fit(rows, max_evaluations=12)
    assert result.objective <= before
    eff = result.adjustments.efficiency
    assert 0 < eff.bandwidth_efficiency <= 1.0 and 0 < eff.compute_efficiency <= 1.0
    assert result.adjustments.ttft_overhead_s >= 0


def test_golden_section_finds_a_parabola_minimum() -> None:
    from servecap.validation.fit import golden_section

    x, value = golden_section(lambda v: (v - 0.3) ** 2 + 1.0, -1.0, 1.0, evaluations=30)
    assert x == pytest.approx(0.3, abs=1e-4)
    assert value == pytest.approx(1.0, abs=1e-8)


def test_family_fit_skips_a_family_with_too_few_values() -> None:
    from servecap.validation.fit import fit_bandwidth_by_family

    rows = select(load_corpus(), source=SMALL)
    assert fit_bandwidth_by_family(rows, Adjustments(), min_values=10**6) == []
