"""One default request shape and user model across plan, capacity and fleet plan (issue 20,
defect 2): the same flags, the shape printed first, and the same closed-form users per replica."""

from __future__ import annotations

import json
import re
import shlex

from click.testing import CliRunner

from servecap.cli.main import cli

runner = CliRunner()
DEP = ["-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "-l", "4096"]
SLO = ["--ttft-slo-ms", "1000", "--tpot-slo-ms", "50"]


def _run(args: list[str]) -> str:
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_plan_capacity_and_fleet_plan_share_one_user_model() -> None:
    plan = json.loads(_run(["plan", *DEP, *SLO, "--json"]))
    # the default user model: a request every 30 s, the answer included
    assert plan["request_interval_s"] == 30 and plan["prompt_tokens"] == 1024 and plan["output_tokens"] == 128
    generating = plan["ttft_s"] + 127 * plan["tpot_s"]
    assert plan["duty_cycle"] == generating / 30
    cap = json.loads(_run(["capacity", *DEP, *SLO, "--duration-s", "60", "--json"]))
    # capacity's users think 30 s minus the time generating, one turn: its closed form is plan's
    assert int(cap["planner_users"]) == plan["users_served"] == int(cap["plan_users"])
    assert any("one request every 30 s" in n for n in cap["notes"])
    fp = json.loads(_run(["fleet", "plan", *DEP, *SLO, "--peak-users", "2000", "--levers", "none", "--json"]))
    assert fp["request_interval_s"] == 30 and fp["levers"] == []
    closed_form_users = fp["chosen"]["closed_form_users_per_gpu"]  # 1 GPU per replica here
    assert abs(closed_form_users / plan["users_served"] - 1) < 0.02


def test_each_answer_prints_its_shape_first() -> None:
    text = _run(["plan", *DEP, *SLO])
    assert "request 1,024 in / 128 out" in text.splitlines()[1] and "a request every 30 s" in text
    fp = _run(["fleet", "plan", *DEP, *SLO, "--peak-users", "500", "--levers", "none"])
    assert fp.splitlines()[0].startswith("request shape: 1,024 prompt + 128 output tokens (fixed)")
    fp2 = _run(["fleet", "plan", *DEP, *SLO, "--peak-users", "500", "--levers", "none", "-p", "512", "-o", "64"])
    assert fp2.splitlines()[0].startswith("request shape: 512 prompt + 64 output tokens (fixed)")


def test_plans_fleet_plan_pointer_runs_as_printed() -> None:
    """Defect 3: the suggested command kept only -m, -g and --peak-users (and failed for a 70B)."""
    args = ["plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--tp", "2", "-l", "4096", "-w", "fp8"]
    data = json.loads(_run([*args, *SLO, "--peak-users", "300", "--json"]))
    (note,) = [n for n in data["notes"] if "servecap fleet plan" in n]
    command = note.split("`")[3]
    suggested = shlex.split(command)
    assert suggested[:3] == ["servecap", "fleet", "plan"]
    for flag in ("--tp", "-l", "-w", "--ttft-slo-ms", "--tpot-slo-ms", "--peak-users", "--request-interval-s"):
        assert flag in suggested
    out = json.loads(_run([*suggested[1:], "--levers", "none", "--json"]))
    assert out["chosen"]["replicas"] >= 1 and out["peak_users"] == 300


def test_fleet_plan_levers_overflow_and_cache_inputs() -> None:
    """Defect 11: overflow from Llama-3.1-8B to Llama-3.1-8B; a 20% cache hit rate no flag set."""
    base = ["fleet", "plan", *DEP, *SLO, "--peak-users", "300", "--json"]
    out = json.loads(_run([*base, "--levers", "overflow"]))
    assert out["levers"] == []
    (why,) = out["levers_skipped"]
    assert why.startswith("overflow: the chosen fleet already runs meta-llama/Llama-3.1-8B") and "--small-model" in why
    bigger = json.loads(_run([*base, "--levers", "overflow", "--small-model", "meta-llama/Llama-3.1-70B"]))
    assert "is not smaller" in bigger["levers_skipped"][0]
    cache = json.loads(_run([*base, "--levers", "cache", "--cache-hit-rate", "0.4"]))
    (row,) = cache["levers"]
    assert "40% hit rate (given)" in row["change"]


def test_fleet_plans_why_line_names_the_offered_load_as_a_bound() -> None:
    """Defect 7: "users per GPU: 300 simulated vs 1,477 closed form", where 300 was the offered load."""
    out = json.loads(_run(["fleet", "plan", *DEP, *SLO, "--peak-users", "3000", "--levers", "none", "--json"]))
    n = out["chosen"]["replicas"]
    line = out["story"][0]
    assert line.startswith("users per GPU: between" if n > 1 else "users per GPU: at least")
    assert f"over {n} and {n - 1} replicas' GPUs" in line and "do not" in line


def test_compare_uses_plans_user_model() -> None:
    """compare kept a fixed 20% duty cycle: the same deployment got more users there than in plan."""
    plan = json.loads(_run(["plan", *DEP, *SLO, "--json"]))
    args = ["compare", "-m", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--counts", "1", "-l", "4096", *SLO]
    cmp = json.loads(_run([*args, "--weights-dtypes", "auto", "--kv-dtypes", "auto", "--json"]))
    assert cmp["request_interval_s"] == 30 and cmp["duty_cycle"] is None
    (row,) = cmp["candidates"]
    assert row["users_served"] == plan["users_served"] and row["duty_cycle"] == plan["duty_cycle"]
    text = _run(args)
    assert text.splitlines()[0].startswith("request shape: 1,024 prompt + 128 output tokens (fixed); users: one")
    given = json.loads(_run([*args, "--duty-cycle", "0.2", "--json"]))
    assert given["request_interval_s"] is None and given["duty_cycle"] == 0.2


def test_closed_loop_capacity_is_not_set_by_its_start() -> None:
    """Capacity's chat users all send their first turn within one think time of the start, faster
    than their steady rate; scored whole, that burst set the p99 TPOT and the answer (70B on 4x
    H100: 5.83 req/s closed loop vs 8.19 open loop). Scored after the warm-up, as the fleet
    planner scores its window, the closed loop's rate at its answer is the open loop's."""
    args = ["capacity", "-m", "meta-llama/Llama-3.1-70B", "-g", "H100", "--tp", "4", "-l", "8192", *SLO]
    closed = json.loads(_run([*args, "--duration-s", "240", "--json"]))
    (at,) = [p for p in closed["table"] if p["load"] == closed["max_users"]]
    opened = json.loads(_run([*args, "--rate", "1", "--duration-s", "240", "--json"]))
    assert abs(at["throughput_req_s"] / opened["max_rate_req_s"] - 1) < 0.1
    # the warm-up: one user cycle (a think time and an answer), at least 30 s
    warmup = re.search(r"scored after the first ([\d.]+) s", closed["load_model"])
    assert warmup is not None and float(warmup.group(1)) >= 30.0 and "req/s" in closed["load_model"]


def test_simulate_users_take_the_default_user_model() -> None:
    """simulate --users sent 5-turn chats with a 30 s think time: not the user model of capacity."""
    text = _run(["simulate", *DEP, *SLO, "--users", "20", "--duration-s", "60"])
    first = text.splitlines()[0]
    assert first.startswith("request shape: 1,024 prompt + 128 output tokens (fixed); users: 20 users, one request")
    assert "1 turn, closed loop" in first
    cap = json.loads(_run(["capacity", *DEP, *SLO, "--duration-s", "60", "--json"]))
    (think,) = [n.split("): ")[1].split(" s think")[0] for n in cap["notes"] if n.startswith("users:")]
    assert f"{think} s think time between answers, 1 turn" in first
    given = _run(["simulate", *DEP, "--users", "20", "--turns", "3", "--think-time-s", "5", "--duration-s", "60"])
    assert "20 users, 5 s think time between answers, 3 turns, closed loop" in given.splitlines()[0]


def test_simulate_users_is_scored_as_capacity_scores_the_same_users() -> None:
    """simulate --users scored its closed loop from the start, the burst of every user's first
    turn included, while capacity skipped that warm-up: the same 837 users on an 8B over 60 s
    had a p99 TTFT of 3.49 s in simulate and 0.72 s in capacity's table. One function scores
    both (sim/capacity_search.py, scored_run): the same users, seed and run give the same numbers."""
    args = [*DEP, *SLO, "--duration-s", "60"]
    cap = json.loads(_run(["capacity", *args, "--json"]))
    at = next(p for p in cap["table"] if p["load"] == cap["max_users"])
    sim = json.loads(_run(["simulate", *args, "--users", f"{cap['max_users']:.0f}", "--json"]))
    assert sim["ttft_s"]["p99"] == at["ttft_p99_s"] and sim["tpot_s"]["p99"] == at["tpot_p99_s"]
    assert sim["throughput_req_s"] == at["throughput_req_s"]
    assert any(n.startswith("closed loop: latencies and throughput over the ") for n in sim["notes"])
