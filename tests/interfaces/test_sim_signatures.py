"""Issue 19 for plan, compare, simulate and capacity: their use cases take a request, not a flag
list (no function of more than 8 parameters), and type their answers (no ``dict[str, Any]``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "src" / "servecap" / "app"
FILES = ["plan.py", "compare.py", "simulate.py", "capacity.py", "defaults.py", "flags.py", "inputs.py"]
FILES += ["request_fields.py", "simulate_request.py"]


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


@pytest.mark.parametrize("name", FILES)
def test_no_function_takes_more_than_eight_parameters(name: str) -> None:
    tree = ast.parse((APP / name).read_text(encoding="utf-8"))
    wide = {
        n.name: _parameters(n)
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and _parameters(n) > 8
    }
    assert wide == {}


@pytest.mark.parametrize("name", FILES)
def test_no_untyped_json_dicts(name: str) -> None:
    assert "dict[str, Any]" not in (APP / name).read_text(encoding="utf-8")


def test_the_counter_sees_a_wide_function() -> None:
    fn = ast.parse("def f(self, a, b, c, d, e, f, g, h, *, i=0): pass").body[0]
    assert isinstance(fn, ast.FunctionDef) and _parameters(fn) == 9
