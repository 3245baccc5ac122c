"""Grafana dashboard and Prometheus rules from a plan: structure, thresholds, and every PromQL
expression through a PromQL parser (promql-parser, the Rust promql-parser's Python binding)."""

import json

import pytest
import yaml
from click.testing import CliRunner

from servecap.cli.main import cli
from servecap.errors import ServecapError
from servecap.monitor.exports import alert_rules, grafana_dashboard
from servecap.monitor.thresholds import thresholds_from_plan

promql_parser = pytest.importorskip("promql_parser")

PLAN = {"model": "meta-llama/Llama-3.1-8B", "batch_size": 40, "kv_batch_limit": 80, "ttft_s": 0.2, "tpot_s": 0.02}


def test_thresholds_from_the_plan() -> None:
    t = thresholds_from_plan(PLAN, ttft_slo_s=0.5)
    assert t.queue_depth == 4  # ceil(0.1 x 40)
    assert t.running == 36  # 0.9 x 40
    assert t.kv_usage == pytest.approx(0.6)  # 40 / 80 + 0.1
    assert (t.ttft_p99_s, t.ttft_from_slo) == (0.5, True)
    assert (t.itl_p99_s, t.itl_from_slo) == (pytest.approx(0.04), False)  # twice the planned TPOT


def test_missing_plan_key_is_one_error() -> None:
    with pytest.raises(ServecapError, match="batch_size"):
        thresholds_from_plan({"model": "m"})


def test_alert_rules_load_and_parse() -> None:
    rules = yaml.safe_load(yaml.safe_dump(alert_rules(thresholds_from_plan(PLAN, ttft_slo_s=0.5), source="t")))
    group = rules["groups"][0]
    names = {r["alert"] for r in group["rules"]}
    assert names == {
        "VllmQueueDepthHigh",
        "VllmKvCacheUsageHigh",
        "VllmTtftP99OverSlo",
        "VllmItlP99OverSlo",
        "VllmPreempting",
    }
    for r in group["rules"]:
        assert set(r) == {"alert", "expr", "for", "labels", "annotations"}
        promql_parser.parse(r["expr"])  # raises ValueError on a malformed expression
    ttft = next(r for r in group["rules"] if r["alert"] == "VllmTtftP99OverSlo")
    assert ttft["expr"].startswith("histogram_quantile(0.99, sum by (le, instance) (rate(vllm:time_to_first_token")
    assert ttft["expr"].endswith("> 0.5")


def test_the_parser_rejects_a_broken_expression() -> None:
    with pytest.raises(ValueError):
        promql_parser.parse("sum(rate(vllm:num_preemptions_total[5m])")


def test_grafana_dashboard_has_slo_lines() -> None:
    d = grafana_dashboard(thresholds_from_plan(PLAN, ttft_slo_s=0.5), source="t")
    titles = [p["title"] for p in d["panels"]]
    assert any("TTFT" in t for t in titles) and any("KV" in t for t in titles)
    ttft = next(p for p in d["panels"] if "TTFT" in p["title"])
    steps = ttft["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1]["value"] == 0.5
    assert ttft["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "line"
    for p in d["panels"]:
        for target in p["targets"]:
            promql_parser.parse(target["expr"])
    json.dumps(d)


def test_cli_export_from_plan_json(tmp_path) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(PLAN))
    out = tmp_path / "rules.yaml"
    res = CliRunner().invoke(cli, ["export", "alerts", str(plan_file), "--ttft-slo-ms", "500", "--output", str(out)])
    assert res.exit_code == 0, res.output
    assert yaml.safe_load(out.read_text())["groups"][0]["rules"]
    res = CliRunner().invoke(cli, ["export", "grafana", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["panels"]
