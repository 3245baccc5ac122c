"""Every table readable at 80 columns on a terminal, and never cut when piped (issue 20,
defect 6): a terminal of 80 columns gets tables whose text wraps between words and whose
numbers never wrap, or one block per row where the columns cannot fit; piped output is complete."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import servecap.cli.console as console_mod
from servecap.cli.main import cli

M8 = ["-m", "meta-llama/Llama-3.1-8B", "-g", "H100"]
COMMANDS: dict[str, list[str]] = {
    "plan": ["plan", "-m", "meta-llama/Llama-3.1-70B", "-g", "H100", "--tp", "4", "-l", "8192"],
    "compare": ["compare", "-m", "meta-llama/Llama-3.1-8B", "--gpus", "L40S,H100,RTX-PRO-6000", "--top", "6"],
    "capacity": ["capacity", *M8, "-l", "4096", "--rate", "--num-requests", "200"],
    "simulate": ["simulate", *M8, "-l", "4096", "--rate", "5", "--num-requests", "100"],
    "fleet simulate": [
        "fleet",
        "simulate",
        "--fleet",
        "examples/fleet-simple.yaml",
        "--rate",
        "20",
        "--num-requests",
        "300",
    ],
    "fleet plan": ["fleet", "plan", *M8, "-l", "4096", "--peak-users", "300", "--levers", "none"],
}
WORDS = {  # ids that must come out whole
    "plan": ["--weights-dtype", "--kv-cache-dtype", "FP8 weights", "Half the context"],
    "compare": ["RTX-PRO-6000", "tpot_slo"],
    "capacity": ["req/s"],
    "simulate": ["TTFT"],
    "fleet simulate": ["h100"],
    "fleet plan": ["H100"],
}


def _tty(monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    """Stand a terminal of ``width`` columns in for stdout (rich reads COLUMNS)."""
    monkeypatch.setattr(console_mod, "is_terminal", lambda stream: True)
    monkeypatch.setenv("COLUMNS", str(width))


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_table_at_80_columns(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).parents[2])
    _tty(monkeypatch, 80)
    res = CliRunner().invoke(cli, COMMANDS[name])
    assert res.exit_code == 0, res.output
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", res.stdout)  # colour codes
    assert text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    for word in WORDS[name]:
        assert word in text, word
    # no column squeezed to a letter or two: a cell of 1-2 characters between borders is a GPU
    # name or a flag cut into pieces
    for line in text.splitlines():
        cells = [c for c in line.split("│")[1:-1]]
        assert not any(len(c.strip()) > 0 and len(c) <= 3 and c.strip().isalpha() for c in cells), line


@pytest.mark.parametrize("name", ["plan", "compare", "fleet simulate", "fleet plan"])
def test_piped_output_is_never_cut(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).parents[2])
    res = CliRunner().invoke(cli, COMMANDS[name])
    assert res.exit_code == 0, res.output
    assert "…" not in res.stdout
    for word in WORDS[name]:
        assert word in res.stdout
