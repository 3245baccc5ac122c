"""Issue 32, Must show: the README's 8B/H100 question gets one answer from plan, capacity,
`simulate --users` at its defaults and fleet plan, within 15% of each other, each inside its own
80% interval (the web's pages call the same use cases: tests/web)."""

from __future__ import annotations

import json
from itertools import combinations
from typing import Any

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli

DEP = ["-m", "meta-llama/Llama-3.1-8B", "-g", "h100"]


def _json(args: list[str]) -> Any:
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _inside(iv: dict[str, Any]) -> bool:
    return bool(iv["low"] <= iv["estimate"] <= iv["high"])


@pytest.mark.slow
def test_readme_8b_h100_answers_agree_within_15_percent() -> None:
    plan = _json(["plan", *DEP])
    plan_users = plan["interval"]["users_served"]
    assert _inside(plan_users)
    cap = _json(["capacity", *DEP])
    assert _inside(cap["interval"])
    simulated_users = int(cap["interval"]["model"])  # capacity's simulated users per replica
    sim = _json(["simulate", *DEP, "--users", str(simulated_users)])
    assert not sim["load_check"]["overloaded"]
    # the model's p99s meet the SLOs; each corrected percentile lies inside its interval
    assert sim["ttft_s"]["p99"] <= 2.0 and sim["tpot_s"]["p99"] <= 0.1
    assert all(_inside(iv) for iv in sim["interval"].values())
    fp = _json(["fleet", "plan", *DEP, "--peak-users", "10000"])
    assert all(_inside(iv) for iv in fp["interval"].values())
    answers = {
        "plan": plan_users["estimate"],
        "capacity": cap["interval"]["estimate"],
        "simulate --users": float(simulated_users),
        "fleet plan (users per GPU)": fp["chosen"]["users_per_gpu"],
    }
    for (a, x), (b, y) in combinations(answers.items(), 2):
        assert max(x, y) / min(x, y) <= 1.15, (a, x, b, y)
