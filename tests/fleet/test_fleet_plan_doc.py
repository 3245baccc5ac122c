"""The worked example in docs/fleet.md is what `servecap fleet plan` computes for
examples/fleet-plan-chat.yaml (regenerate with `python scripts/fleet_plan_example.py --write`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecap.app.fleet_plan import fleet_plan, load_plan_file, plan_request_from_dict
from servecap.report.fleet_plan_text import DOC_BEGIN, DOC_END, markdown_block

ROOT = Path(__file__).parents[2]


@pytest.mark.slow  # about two minutes: the whole plan at the doc's figures
def test_docs_worked_example_is_recomputed() -> None:
    r = fleet_plan(plan_request_from_dict(load_plan_file(ROOT / "examples" / "fleet-plan-chat.yaml")))
    doc = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    shown = doc[doc.index(DOC_BEGIN) : doc.index(DOC_END) + len(DOC_END)]
    assert shown == markdown_block(r), "docs/fleet.md is stale: run python scripts/fleet_plan_example.py --write"
    # the story the doc tells: two tenants, a daily curve, the cheapest of H200 and H100, levers
    assert r.daily_curve and r.autoscaler is not None and r.peak_users == 2000
    assert {c.gpu for c in r.candidates} == {"H200", "H100"}
    assert r.chosen.usd_per_month == min(c.usd_per_month for c in r.candidates if c.usd_per_month is not None)
    assert r.next_cheaper is not None and not r.next_cheaper.slo_met and r.fleet.slo_met
    assert {"acme/chat: p99 TTFT <= 1,000 ms", "partner/api: p99 TTFT <= 2,000 ms"} <= set(r.slo)
    assert {lv.name for lv in r.levers} >= {"router", "fp8-kv", "scale-ahead", "warm-pool"}
