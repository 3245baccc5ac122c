"""Shared fixtures: catalog specs and the vLLM start-up log cases; the hypothesis profile; the
command line run in this process."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

DATA = Path(__file__).parent / "data"

# every property test draws the same examples on every run (the suite is deterministic); a test's
# own @settings adds to this profile
settings.register_profile("servecap", derandomize=True, deadline=None)
settings.load_profile("servecap")


# `make test` runs the suite on two pytest-xdist workers (`-n 2 --dist loadgroup`): the tests that
# start one kind of real system (a browser, a Ray instance, a router) run on one worker, one after
# another, as in a serial run (two chromiums or two Ray instances at once would crowd 2 cores)
SERIAL_GROUPS = ("browser", "ray", "router")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        for name in SERIAL_GROUPS:
            if item.get_closest_marker(name) is not None:
                item.add_marker(pytest.mark.xdist_group(name))
                break
    # the slow tests first (a stable sort: the rest keep their order). `--dist loadgroup` hands out
    # the groups (largest first) and then the single tests in this order, a test to a worker as it
    # frees up: a minute-long test handed out last would run alone at the end of the run while the
    # other worker idles; handed out first, the short tests fill in around it
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def startup_cases() -> dict[str, dict[str, Any]]:
    cases = json.loads((DATA / "vllm_startup_logs.json").read_text())["cases"]
    return {c["id"]: c for c in cases}


@dataclass(frozen=True, slots=True)
class CliResult:
    """What ``servecap ARGS`` gave: the exit code and what it wrote (the fields of
    ``subprocess.CompletedProcess`` that the tests read)."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture()
def servecap_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """``servecap ARGS`` in this process through the console entry point (``run()``: its one-line
    errors and exit codes included), for tests of a command's behaviour rather than of the process
    (a new interpreter per call costs seconds of imports on a 2-core machine)."""

    def invoke(*args: str) -> CliResult:
        from servecap.cli.main import run

        capsys.readouterr()  # what the test printed before
        monkeypatch.setattr(sys, "argv", ["servecap", *args])
        try:
            run()
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return invoke
