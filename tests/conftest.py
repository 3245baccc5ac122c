"""Shared fixtures: catalog specs and the vLLM start-up log cases; the hypothesis profile; the
command line run in this process."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Generator
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
# another, as in a serial run (two Ray instances or two routers' fleets at once would crowd 2
# cores); the browser tests are two groups (tests/web/test_pages.py names its own), one per worker
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


# The groups reach xdist's scheduler through a file. xdist's loadgroup appends "@group" to a test's
# node id on the worker (it sets `item._nodeid`), which pytest 9 no longer reads (a node's id is
# the structured `item._id`): every test was its own unit, and the browser, Ray and router tests
# ran on both workers at once. Each worker writes the groups it collected ({node id: group}, the
# same on every worker: xdist checks the collections are equal); the controller's scheduler, xdist's
# own LoadGroupScheduling, reads them when it splits the collection into units. On a pytest that
# still reads `_nodeid` the ids carry "@group" and xdist's own rule finds it.
GROUPS_DIR = "servecap_xdist_groups_dir"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # controller: a worker is about to start
    config = node.config
    if not hasattr(config, "_servecap_groups_dir"):
        folder = tempfile.mkdtemp(prefix="servecap-xdist-groups-")
        config._servecap_groups_dir = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    node.workerinput[GROUPS_DIR] = config._servecap_groups_dir


@pytest.hookimpl(tryfirst=True)  # before xdist's worker sends its collection to the controller
def pytest_collection_finish(session: pytest.Session) -> None:
    workerinput = getattr(session.config, "workerinput", None)
    if workerinput is None or GROUPS_DIR not in workerinput:
        return
    groups = {}
    for item in session.items:
        marker = item.get_closest_marker("xdist_group")
        if marker is not None:
            groups[item.nodeid] = str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))
    path = Path(workerinput[GROUPS_DIR]) / f"{workerinput['workerid']}.json"
    path.with_suffix(".tmp").write_text(json.dumps(groups), encoding="utf-8")
    path.with_suffix(".tmp").replace(path)  # whole or absent when the controller reads it


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class MarkedGroupScheduling(LoadGroupScheduling):
        def __init__(self, config: pytest.Config, log: Any) -> None:
            super().__init__(config, log)
            self.groups: dict[str, str] = {}

        def schedule(self) -> None:
            if self.collection is None:  # the first call: every worker has sent its collection
                folder = getattr(config, "_servecap_groups_dir", None)
                files = sorted(Path(folder).glob("*.json")) if folder is not None else []
                self.groups = json.loads(files[0].read_text(encoding="utf-8")) if files else {}
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            return self.groups.get(nodeid) or super()._split_scope(nodeid)

    return MarkedGroupScheduling(config, log)


@pytest.fixture()
def local_ray() -> None:
    """A local Ray instance (2 CPUs), started as ``make_executor("ray", workers=2)`` starts one, for
    the tests that run on one (the Ray tests of tests/app, tests/distributed and tests/fleet): the
    first such test starts it, the next ones find it up (an executor leaves up a Ray it did not
    start), and it stops once the next test does not ask for it (pytest_runtest_teardown below).
    The 'ray' group runs them one after another on one worker: one start and one set of Ray workers
    importing servecap instead of one per module."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        from servecap.distributed.ray_executor import RayExecutor

        RayExecutor(num_cpus=2)._ensure_started()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    yield
    if "local_ray" in getattr(item, "fixturenames", ()) and "local_ray" not in getattr(nextitem, "fixturenames", ()):
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            ray.shutdown()


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
