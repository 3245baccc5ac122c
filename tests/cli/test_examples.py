"""Every example command of README.md and docs/ that runs on its own runs as printed (issue 20,
defect 5), and the README's flagship fleet example shows what it says: the morning ramp, met."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from servecap.cli.main import cli

ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# commands that need what a test does not have: live servers, a recorded history, minutes of CPU
NEEDS = {
    "monitor": "live servers or a recorded history",
    "sweep": "a grid of fleet simulations (minutes)",
    "plan --plan": "a fleet plan of several candidates (a minute)",
    "export": "tested in tests/export",
}


def example_commands() -> list[str]:
    """`servecap ...` lines of the docs' code blocks that name a file under examples/."""
    out: list[str] = []
    for doc in DOCS:
        for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S):
            for line in block.splitlines():
                line = line.split("  #")[0].strip()
                if line.startswith("servecap ") and "examples/" in line and line not in out:
                    out.append(line)
    return out


FLAGSHIP = ["fleet", "simulate", "--fleet", "examples/fleet-autoscaled.yaml", "--workload", "examples/chat-prefix.yaml"]


def _skip_reason(command: str) -> str | None:
    words = shlex.split(command)[1:]
    if words[: len(FLAGSHIP)] == FLAGSHIP:
        return "the flagship example: test_flagship_fleet_example_shows_the_morning_ramp runs it (--html, --json)"
    if words[0] in ("monitor", "sweep", "export"):
        return NEEDS[words[0]]
    if words[:2] == ["fleet", "plan"] and "--plan" in words:
        return NEEDS["plan --plan"]
    if words[:2] == ["fleet", "plan"] and "--levers" in words and "cpu-tier" in words[words.index("--levers") + 1]:
        return "the KV-tier levers' fleet plan (minutes): tests/app/test_fleet_plan_tiers.py runs a small one"
    return None


@pytest.mark.parametrize("command", example_commands())
def test_example_runs_as_printed(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reason = _skip_reason(command)
    if reason:
        pytest.skip(reason)
    monkeypatch.chdir(ROOT)
    args = shlex.split(command)[1:]
    args = [str(tmp_path / Path(a).name) if a.endswith(".html") else a for a in args]  # no file left behind
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, f"{command}: {res.output[-600:]} {res.exception!r}"


def test_flagship_fleet_example_shows_the_morning_ramp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """It promised a morning ramp and gave 0.4% attainment (p99 TTFT 234 s, a queue of ~1,800)."""
    monkeypatch.chdir(ROOT)
    page = tmp_path / "fleet.html"
    res = CliRunner().invoke(cli, [*FLAGSHIP, "--html", str(page), "--json"])
    assert res.exit_code == 0, res.output
    assert page.stat().st_size > 0
    d = json.loads(res.stdout)
    assert d["summary"]["slo_attainment"] >= 0.95
    assert d["scale_events"][0]["time_s"] == 300.0 and d["scale_events"][0]["to"] == 6  # ahead of the ramp
    ts = d["timeseries"]
    night = [r for t, r in zip(ts["time_s"], ts["arrival_rate_req_s"], strict=True) if 60 < t < 550]
    day = [r for t, r in zip(ts["time_s"], ts["arrival_rate_req_s"], strict=True) if 800 < t < 1350]
    assert sum(day) / len(day) > 3 * sum(night) / len(night)  # the ramp is in the traffic
