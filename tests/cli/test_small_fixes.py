"""Issue 20, defect 16's smaller items: each one line of the old behaviour pinned."""

from __future__ import annotations

import json

from click.testing import CliRunner

from servecap.app.compare import CandidateOut, dtype_columns, merged_rows
from servecap.cli.main import cli

runner = CliRunner()


def _out(args: list[str]) -> str:
    res = runner.invoke(cli, args)
    assert res.exit_code == 0, res.output
    return res.stdout


def test_fp4_on_a_gpu_without_fp4_is_explained_not_silent() -> None:
    data = json.loads(_out(["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "-w", "fp4", "--json"]))
    (note,) = [n for n in data["notes"] if "fp4" in n]
    assert "-w fp4 read as nvfp4" in note and "no FP4 tensor cores" in note and "FP8 rate" in note
    b200 = json.loads(_out(["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "B200", "-w", "nvfp4", "--json"]))
    assert not any("fp4" in n for n in b200["notes"])  # FP4 tensor cores, the name given: nothing to say


def test_vllms_prefix_caching_flag_spelling_is_accepted() -> None:
    args = ["-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "-l", "4096", "--rate", "2", "--num-requests", "20"]
    ours = json.loads(_out(["simulate", *args, "--no-prefix-caching", "--json"]))
    vllms = json.loads(_out(["simulate", *args, "--no-enable-prefix-caching", "--json"]))
    ours.pop("elapsed_s", None), vllms.pop("elapsed_s", None)
    assert ours == vllms


def _cand(w: str, k: str, users: int = 100) -> CandidateOut:
    return CandidateOut(
        gpu="L40S",
        num_gpus=1,
        weights_dtype=w,
        kv_cache_dtype=k,
        users_served=users,
        tpot_s=0.1,
        ttft_s=0.05,
        usd_per_hour=0.79,
        price_source="catalog",
        usd_per_user_month=0.5,
        usd_per_million_tokens=0.1,
        problem=None,
        limited_by="tpot_slo",
        bottleneck="compute",
    )


def test_compare_shows_identical_plans_once_with_their_dtypes() -> None:
    rows = [_cand("bf16", "bf16"), _cand("fp8", "fp8", 200), _cand("int4", "bf16"), _cand("bf16", "fp8")]
    merged = merged_rows(rows)
    assert [len(p) for _, p in merged] == [3, 1]
    assert dtype_columns(merged[0][1]) == ("bf16/bf16, int4/bf16, bf16/fp8", "(weights/KV)")  # not a full product
    assert dtype_columns([("bf16", "bf16"), ("int4", "bf16")]) == ("bf16, int4", "bf16")
    text = _out(["compare", "-m", "meta-llama/Llama-3.1-8B", "--gpus", "L40S,H100", "--top", "30"])
    assert "limited by" in text and "compute-bound" in text and "distinct" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("│")]
    cells = [tuple(c.strip() for c in ln.split("│")[2:9]) for ln in lines]
    figures = [(c[0], c[1], c[4], c[5], c[6]) for c in cells]  # GPU, n, users, TPOT, TTFT
    assert len(figures) == len(set(figures))  # no two rows plan the same


def test_bench_rate_check_names_the_scheduled_rate() -> None:
    """`bench --rate 10` reported "target 10.05 req/s": the schedule's drawn rate, read as a bug."""
    from servecap.measure.checks import rate_check
    from servecap.measure.trace import ClientTrace

    traces = [
        ClientTrace(request_id=str(i), scheduled_s=i / 10.05, prompt_tokens=1, output_tokens=1) for i in range(11)
    ]
    for t in traces:
        t.sent_s = t.scheduled_s
    check = rate_check(traces)
    assert check.ok and "vs 10.05 req/s as scheduled" in check.message and "target" not in check.message


def test_fleet_simulate_shows_load_against_capacity(monkeypatch: object) -> None:
    """Defect 12: "utilisation 100%" on replicas at 5 of ~29 req/s (it meant "had a request in flight")."""
    from pathlib import Path

    import pytest

    mp = monkeypatch
    assert isinstance(mp, pytest.MonkeyPatch)
    mp.chdir(Path(__file__).parents[2])
    args = ["fleet", "simulate", "--fleet", "examples/fleet-simple.yaml", "--rate", "16", "--num-requests", "800"]
    data = json.loads(_out([*args, "--json"]))
    plan = json.loads(_out(["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "-l", "8192", "--json"]))
    loads = [r["load_req_s"] for r in data["replicas"]]
    assert sum(loads) == pytest.approx(16, rel=0.25)  # 8 replicas share the offered 16 req/s
    for r in data["replicas"]:
        assert r["capacity_req_s"] == pytest.approx(plan["output_tokens_per_s_total"] / 128)
    text = _out(args)
    assert "load req/s (of capacity)" in text and "busy" in text and "utilisation" not in text


def test_fleet_plan_reports_progress_off_a_terminal(monkeypatch: object) -> None:
    """Defect 8: `fleet plan` was silent on stderr off a terminal; now a line every interval."""
    import pytest

    import servecap.cli.console as console_mod

    mp = monkeypatch
    assert isinstance(mp, pytest.MonkeyPatch)
    # a line for every event rather than every 5 s, for the test
    mp.setitem(console_mod.progress_reporter.__wrapped__.__kwdefaults__, "interval_s", 0.0)
    res = CliRunner().invoke(
        cli, ["fleet", "plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "-l", "4096", "--peak-users", "300"]
    )
    assert res.exit_code == 0, res.output
    assert "fleet-plan:" in res.stderr and "simulations" in res.stderr and "the SLOs" in res.stderr
