"""The README's accuracy figures are the validation baseline's (issue 20, defect 16: the README
said TTFT 32.5% where `validate` held out 15.5%)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_readme_accuracy_figures_are_the_baselines() -> None:
    base = json.loads((ROOT / "src/servecap/validation/baseline.json").read_text(encoding="utf-8"))
    err = base["median_abs_error"]
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    m = re.search(
        r"throughput ([\d.]+)%, TPOT/ITL ([\d.]+)%, TTFT ([\d.]+)%, E2E ([\d.]+)% "
        r"\(all rows: ([\d.]+)%, ([\d.]+)%, ([\d.]+)%, ([\d.]+)%\)",
        text,
    )
    assert m is not None, "the README's accuracy sentence"
    figures = [float(x) for x in m.groups()]
    want = [100 * err[split][k] for split in ("test", "all") for k in ("throughput", "tpot", "ttft", "e2e")]
    assert figures == [round(x, 1) for x in want]
