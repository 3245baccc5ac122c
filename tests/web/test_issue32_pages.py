"""Issue 32 as a user sees it in the browser: a fleet job's progress (requests done, the simulated
clock) while it runs, the previous answer marked stale until the new one arrives, labelled SLO
lines, a streamed run plotted from its window sketches, compare's merged rows, and the fleet
pages' default SLOs (fleet plan's)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml
from click.testing import CliRunner
from tests.web.conftest import LABELS_INSIDE, TICK_OVERLAPS, Page, run_from_link

from servecap.app.compare import CandidateOut, dtype_columns, merged_rows
from servecap.cli.main import cli

pytestmark = pytest.mark.browser

# what the page's progress line says while a simulation runs (cli/console.py's progress_line)
PROGRESS = re.compile(r"^simulate: [\d,]+ of [\d,]+ requests \(\d+%\), [\d,]+ s simulated$")

# records every progress line and whether the old answer was ever marked stale during a run
WATCH = """() => {
  window.__labels = []; window.__stale = false;
  const label = document.getElementById("progress-label"), result = document.getElementById("result");
  new MutationObserver(() => { if (label.textContent) window.__labels.push(label.textContent); })
    .observe(label, { childList: true, characterData: true, subtree: true });
  new MutationObserver(() => {
    const note = document.getElementById("stale-note");
    if (result.classList.contains("stale") && result.querySelector("#answer") && note && note.offsetParent !== null)
      window.__stale = true;
  }).observe(result, { attributes: true, attributeFilter: ["class"] });
}"""


def _cli(*args: str) -> dict[str, Any]:
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_a_fleet_run_shows_its_progress_then_a_rerun_marks_the_old_answer_stale(desktop: Page, server_url: str) -> None:
    query = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM", "max_model_len": "8192", "replicas": "2",
             "rate": "20", "duration_s": "240", "seed": "0"}  # fmt: skip
    pg = desktop.page
    pg.goto(f"{server_url}/fleet?{urlencode(query)}")
    pg.wait_for_selector("#await-click")
    pg.evaluate(WATCH)
    run_from_link(pg)
    pg.wait_for_selector("#answer", timeout=120_000)
    labels = pg.evaluate("window.__labels")
    assert any(PROGRESS.match(x) for x in labels), labels  # requests done of the total, and the clock
    # defect 8: the SLO line says what it is (the form's default: fleet plan's 2,000 ms)
    assert "TTFT SLO 2,000 ms" in pg.evaluate(LABELS_INSIDE, "latency")
    assert pg.evaluate(TICK_OVERLAPS, "traffic") == [] and pg.evaluate(TICK_OVERLAPS, "latency") == []
    # defect 8: "utilisation 100%" is the share of time busy, beside the load and its capacity
    head = pg.inner_text("#result table tr")
    assert "busy (a request in flight)" in head and "load req/s (of capacity)" in head and "utilisation" not in head
    first = pg.inner_text("#answer")
    pg.fill("input[name=rate]", "24")
    pg.click("#form button[type=submit]")
    pg.wait_for_function("window.__stale === true", timeout=60_000)
    pg.wait_for_selector("#result:not(.stale) #answer", timeout=120_000)
    assert pg.locator("#stale-note").count() == 0 and pg.inner_text("#answer") != first
    desktop.shot("fleet-progress-rerun")
    assert desktop.errors == []


def test_a_streamed_run_is_plotted_from_its_window_sketches(
    desktop: Page, server_url: str, server_data: Path, tmp_path: Path
) -> None:
    """It showed an empty chart: a streamed run keeps no per-request records to scatter."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({
        "pools": [{"name": "main", "model": "meta-llama/Llama-3.1-8B", "gpu": "H100-SXM", "replicas": 2, "max_model_len": 8192}],
        "router": "least-outstanding", "slo": {"ttft_ms": 2000, "tpot_ms": 100},
    }), encoding="utf-8")  # fmt: skip
    db = server_data / "runs.sqlite"
    args = ["fleet", "simulate", "--fleet", str(fleet), "--rate", "20", "--duration-s", "120", "--sketch", "--save"]
    out = CliRunner().invoke(cli, [*args, "--db", str(db)])
    assert out.exit_code == 0, out.output
    run_id = _cli("runs", "--db", str(db), "--limit", "1")[0]["run_id"]
    pg = desktop.page
    pg.goto(f"{server_url}/runs?{urlencode({'run': run_id})}")
    pg.wait_for_selector("#sketch-note")
    pg.wait_for_selector("#scatter .main-svg")
    p99 = pg.evaluate("document.getElementById('scatter').data[0].y.filter((y) => y !== null)")
    assert len(p99) >= 8 and all(y > 0 for y in p99)  # a point per 15 s window
    assert "TTFT SLO 2,000 ms" in pg.evaluate(LABELS_INSIDE, "scatter")
    assert pg.evaluate(TICK_OVERLAPS, "scatter") == []
    whole = pg.locator("#result table tr", has_text="whole run").inner_text()
    want = _cli("runs", "show", run_id, "--db", str(db))["summary"]
    assert f"{want['num_requests']:,}" in whole
    desktop.shot("runs-streamed")
    assert desktop.errors == []


def test_compare_rows_are_merged_as_in_the_cli(desktop: Page, server_url: str) -> None:
    query = {"model": "meta-llama/Llama-3.1-8B", "gpus": "H100,L40S", "counts": "1", "weights_dtypes": "bf16,fp8,int4",
             "kv_dtypes": "auto,fp8", "tpot_slo_ms": "20"}  # fmt: skip
    pg = desktop.page
    pg.goto(f"{server_url}/compare?{urlencode(query)}")
    pg.wait_for_selector("#answer")
    want = _cli("compare", "-m", query["model"], "--gpus", query["gpus"], "--counts", "1", "--weights-dtypes",
                query["weights_dtypes"], "--kv-dtypes", query["kv_dtypes"], "--tpot-slo-ms", "20")  # fmt: skip
    merged = merged_rows([CandidateOut.model_validate(c) for c in want["candidates"]])
    assert len(merged) < len(want["candidates"])  # the case merges rows
    rows = pg.eval_on_selector_all(
        "#result table tr", "(trs) => trs.slice(1).map((tr) => [...tr.cells].map((td) => td.textContent))"
    )
    assert [(r[1], r[3], r[4]) for r in rows] == [(c.gpu, *dtype_columns(pairs)) for c, pairs in merged]
    assert "a row with several dtypes: each plans the same" in pg.inner_text("#distinct")
    assert desktop.errors == []


def test_the_fleet_pages_default_slos_are_fleet_plans(desktop: Page, server_url: str) -> None:
    """The fleet page said TTFT 1,000 ms / TPOT 50 ms beside fleet plan's 2,000 / 100."""
    from servecap.planning.run import DEFAULT_SLO

    assert DEFAULT_SLO.ttft_s is not None and DEFAULT_SLO.tpot_s is not None
    want = (f"{DEFAULT_SLO.ttft_s['p99'] * 1e3:g}", f"{DEFAULT_SLO.tpot_s['p99'] * 1e3:g}")
    pg = desktop.page
    for name in ("fleet", "fleet-plan"):
        pg.goto(f"{server_url}/{name}?seed=0")  # a link's state: the form waits, nothing runs
        pg.wait_for_selector("#await-click")
        assert (pg.input_value("input[name=ttft_ms]"), pg.input_value("input[name=tpot_ms]")) == want, name
    assert desktop.errors == []
