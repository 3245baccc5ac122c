"""The simulator's hot modules may be compiled by mypyc (setup.py) or run as plain Python; both
must behave the same. These checks hold in either build (the equality of results is
test_fast_equals_reference.py, run in both builds)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pickle
import re
from pathlib import Path

import pytest

from servecap.sim import EngineRequest, EngineStats, StepOutcome

ROOT = Path(__file__).resolve().parents[2]


def _setup_list() -> tuple[str, ...]:
    """setup.py's ``COMPILED``, read from its source (setup.py is not importable)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "COMPILED" for t in node.targets):
            value = ast.literal_eval(node.value)
            return tuple(str(v) for v in value)
    raise AssertionError("setup.py has no COMPILED list")


COMPILED = tuple(path.replace("/", ".") for path in _setup_list())  # as module names


def test_the_makefile_rebuilds_on_every_compiled_source() -> None:
    """`make test` reinstalls (recompiles) when one of these sources changes: a module missing
    from its list would leave a stale extension behind after an edit."""
    makefile = (ROOT / "Makefile").read_text()
    block = makefile[makefile.index("COMPILED_SIM :=") :].split("\n\n", 1)[0].replace("\\\n", " ")
    listed = {
        f"{prefix}{name}"
        for prefix, names in re.findall(r"\$\(addprefix ([^,]+),([^)]*)\)", block)
        for name in names.split()
    }
    listed |= set(re.sub(r"\$\(addprefix [^)]*\)", " ", block).split())
    for path in _setup_list():
        assert f"src/servecap/{path}.py" in listed, f"Makefile's COMPILED_SIM lacks src/servecap/{path}.py"


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_module_not_older_than_its_source(name: str) -> None:
    mod = importlib.import_module(f"servecap.{name}")
    path = Path(mod.__file__ or "")
    if path.suffix == ".py":
        pytest.skip("pure-Python build")
    source = path.with_name(f"{name.rsplit('.', 1)[-1]}.py")
    if not source.exists():  # an installed wheel: no sources beside the extension
        pytest.skip("no source beside the compiled module")
    assert path.stat().st_mtime >= source.stat().st_mtime, (
        f"{path.name} is older than {source.name}: rebuild (pip install -e . or make test), "
        "or install with SERVECAP_PURE_PYTHON=1"
    )


def test_all_compiled_or_none() -> None:
    kinds = {Path(importlib.import_module(f"servecap.{n}").__file__ or "").suffix == ".py" for n in COMPILED}
    assert len(kinds) == 1, "a mix of compiled and pure-Python simulator modules"


def test_public_value_types_pickle_and_replace() -> None:
    values = [
        EngineRequest(1, 10, 5, prefix_key=(3, 4), priority=2),
        StepOutcome(0.5, (1,), (1, 2), (2,), (), 1, 0, 3, 10, 0),
        EngineStats(1, 0, 3, 0, 10, 0, 0, 0, 4, 1.5),
    ]
    for v in values:
        assert pickle.loads(pickle.dumps(v)) == v
    assert dataclasses.replace(values[0], priority=0).priority == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        values[0].priority = 1  # type: ignore[misc]


def test_a_plan_pickles() -> None:
    """Plans and their parts cross process boundaries (emulator replicas, sweep workers, the
    API's plan workers) in either build: a frozen dataclass compiled by mypyc would not unpickle,
    which is why specs/ stays interpreted."""
    from servecap.catalog import lookup_gpu, resolve_model
    from servecap.core.defaults import build_deployment
    from servecap.core.plan import plan

    p = plan(build_deployment(resolve_model("meta-llama/Llama-3.1-8B"), lookup_gpu("H100")))
    back = pickle.loads(pickle.dumps(p))
    assert back == p and back.step == p.step and back.request == p.request
