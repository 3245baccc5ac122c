"""Mutation testing: change one operator or constant of the pure modules at a time and see whether
the tests catch it. A benchmark-style script (CPU-heavy: minutes), not part of CI.

Each mutant is one small edit of one module's syntax tree (``<`` <-> ``<=``, ``+`` <-> ``-``,
``//`` -> ``/``, an integer constant +1, ``and`` <-> ``or``, ``True`` <-> ``False``, ``min`` <->
``max``), written into a scratch copy of ``src/`` and run against that module's tests (``-x``,
``--timeout-s`` each). A mutant the tests pass on *survives*: either a test is missing, or the
change cannot be seen (an equivalent mutant); docs/mutation.md lists the survivors with a reason.

The tests run in forked children of one process that has already imported the heavy third-party
modules (numpy, pydantic, pytest), so a mutant costs its tests' time, not the interpreter's start.
mutmut 3 needs its own trampolined copy of the package and a writable install; this small mutator
needs neither, so it runs on the shared development environment.

    nice .venv/bin/python benchmarks/mutation.py [--modules core/kv.py,sim/kv_pool.py]
        [--max-per-module 40] [--seed 0] [--timeout-s 60] [--json out.json]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "servecap"

# module (under src/servecap) -> the tests that should kill its mutants
TESTS: dict[str, tuple[str, ...]] = {
    "core/kv.py": ("tests/core",),
    "core/blocks.py": ("tests/core",),
    "core/memory.py": ("tests/core",),
    "core/cost.py": ("tests/core",),
    "core/roofline.py": ("tests/core",),
    "core/capacity.py": ("tests/core",),
    "sim/kv_pool.py": (
        "tests/sim/test_kv_pool.py",
        "tests/sim/test_prefix_last_token.py",
        "tests/sim/test_engine_features.py",
    ),
    "policy/routers.py": (
        "tests/policy/test_routers.py",
        "tests/policy/test_router_flags.py",
        "tests/policy/test_prefix_affinity_edges.py",
        "tests/policy/test_weighted_settings.py",
    ),
    "policy/target_tracking.py": (
        "tests/policy/test_autoscalers.py",
        "tests/policy/test_target_tracking_edges.py",
        "tests/policy/test_kpa.py",
    ),
    "policy/kpa.py": ("tests/policy/test_kpa.py", "tests/fleet/test_fleet_kpa.py"),
}
DEFAULT_MODULES = (
    "core/kv.py",
    "core/blocks.py",
    "core/cost.py",
    "sim/kv_pool.py",
    "policy/routers.py",
    "policy/target_tracking.py",
    "policy/kpa.py",
)

_SWAP_CMP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}
_SWAP_BIN: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
}
_SWAP_NAME = {"min": "max", "max": "min"}


@dataclass(frozen=True, slots=True)
class Mutant:
    module: str
    index: int  # the n-th mutable site of the module, in walk order
    line: int
    change: str


@dataclass(frozen=True, slots=True)
class Outcome:
    mutant: Mutant
    status: str  # killed, survived, timeout, error
    seconds: float


def _sites(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Every mutable node, with a description of its one mutation."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _SWAP_CMP:
            a, b = type(node.ops[0]), _SWAP_CMP[type(node.ops[0])]
            yield node, f"{a.__name__} -> {b.__name__}"
        elif isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BIN:
            yield node, f"{type(node.op).__name__} -> {_SWAP_BIN[type(node.op)].__name__}"
        elif isinstance(node, ast.BoolOp):
            yield node, "and -> or" if isinstance(node.op, ast.And) else "or -> and"
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            yield node, f"{node.value} -> {node.value + 1}"
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            yield node, f"{node.value} -> {not node.value}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _SWAP_NAME:
            yield node, f"{node.func.id} -> {_SWAP_NAME[node.func.id]}"


def _docstring_ids(tree: ast.AST) -> set[int]:
    """Constants that are docstrings (never mutated; they are strings anyway) and the integer
    constants inside ``__slots__``/annotations are left as they come: only code is mutated."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and node.annotation is not None:
            out.update(id(n) for n in ast.walk(node.annotation))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in (*node.args.args, *node.args.kwonlyargs):
                if arg.annotation is not None:
                    out.update(id(n) for n in ast.walk(arg.annotation))
            if node.returns is not None:
                out.update(id(n) for n in ast.walk(node.returns))
    return out


def _mutate(node: ast.AST) -> None:
    if isinstance(node, ast.Compare):
        node.ops[0] = _SWAP_CMP[type(node.ops[0])]()
    elif isinstance(node, ast.BinOp):
        node.op = _SWAP_BIN[type(node.op)]()
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        node.value = node.value + 1
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        node.value = not node.value
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        node.func.id = _SWAP_NAME[node.func.id]


def mutants(module: str) -> list[tuple[Mutant, str]]:
    """Every mutant of ``module`` with its mutated source."""
    source = (PKG / module).read_text(encoding="utf-8")
    out = []
    first = ast.parse(source)  # node ids are only meaningful within one tree (kept alive)
    skip = _docstring_ids(first)
    count = sum(1 for n, _ in _sites(first) if id(n) not in skip)
    for i in range(count):
        tree = ast.parse(source)
        skip = _docstring_ids(tree)
        node, change = [(n, c) for n, c in _sites(tree) if id(n) not in skip][i]
        line = getattr(node, "lineno", 0)
        _mutate(node)
        out.append((Mutant(module, i, line, change), ast.unparse(tree)))
    return out


def _run_child(scratch: Path, tests: tuple[str, ...], timeout_s: int) -> int:
    """In a forked child: the tests of the mutated copy (exit status 0: the mutant survived)."""
    pid = os.fork()
    if pid == 0:  # the child
        signal.alarm(timeout_s)
        sys.path.insert(0, str(scratch / "src"))
        os.chdir(ROOT)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        import pytest

        args = ["-x", "-q", "-p", "no:cacheprovider", *(str(ROOT / t) for t in tests)]
        os._exit(int(pytest.main(args)))
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", default=",".join(DEFAULT_MODULES), help=f"of: {', '.join(TESTS)}")
    ap.add_argument("--max-per-module", type=int, default=40, help="a seeded sample of each module's mutants")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout-s", type=int, default=60)
    ap.add_argument("--json", type=Path, default=None, help="write every outcome here")
    ap.add_argument(
        "--replay", type=Path, default=None, help="re-run only the survivors a previous run printed (its output)"
    )
    args = ap.parse_args()
    wanted = _survivors(args.replay) if args.replay is not None else None
    modules = [m for m in args.modules.split(",") if m] if wanted is None else sorted({m for m, _, _ in wanted})
    unknown = [m for m in modules if m not in TESTS]
    if unknown:
        ap.error(f"--modules: {unknown[0]!r} has no test selection; one of {', '.join(TESTS)}")
    # the heavy imports once, in the parent: the forked children share them
    import numpy  # noqa: F401
    import pydantic  # noqa: F401
    import pytest  # noqa: F401

    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="servecap-mutants-") as tmp:
        scratch = Path(tmp)
        shutil.copytree(ROOT / "src", scratch / "src", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        for module in modules:
            tests = TESTS[module]
            original = (PKG / module).read_text(encoding="utf-8")
            target = scratch / "src" / "servecap" / module
            t0 = time.perf_counter()
            baseline = _run_child(scratch, tests, args.timeout_s * 3)
            if baseline != 0:
                print(f"{module}: its tests fail unmutated (exit {baseline}); skipped", flush=True)
                continue
            budget = max(1.0, time.perf_counter() - t0)
            every = mutants(module)
            if wanted is not None:
                chosen = [(m, t) for m, t in every if (module, m.line, m.change) in wanted]
            else:
                chosen = sorted(random.Random(args.seed).sample(every, min(args.max_per_module, len(every))), key=_key)
            print(f"{module}: {len(chosen)} of {len(every)} mutants, tests {budget:.1f} s unmutated", flush=True)
            for m, text in chosen:
                target.write_text(text, encoding="utf-8")
                t = time.perf_counter()
                rc = _run_child(scratch, tests, min(args.timeout_s, int(10 * budget) + 5))
                # 0: the tests passed; a timeout counts as caught (a mutant that hangs is seen);
                # 5: no tests ran (a broken selection); any other exit, a crash included, is a kill
                status = {0: "survived", -signal.SIGALRM: "timeout", 5: "error"}.get(rc, "killed")
                outcomes.append(Outcome(m, status, time.perf_counter() - t))
                if status == "survived":
                    print(f"  SURVIVED {module}:{m.line} {m.change}", flush=True)
            target.write_text(original, encoding="utf-8")
    by: dict[str, dict[str, int]] = {}
    for o in outcomes:
        by.setdefault(o.mutant.module, {}).setdefault(o.status, 0)
        by[o.mutant.module][o.status] += 1
    for module, counts in by.items():
        total = sum(counts.values())
        killed = counts.get("killed", 0) + counts.get("timeout", 0)
        print(f"{module}: {killed}/{total} killed ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")
    if args.json is not None:
        args.json.write_text(json.dumps([{**asdict(o.mutant), "status": o.status} for o in outcomes], indent=1))


def _survivors(log: Path) -> set[tuple[str, int, str]]:
    """(module, line, change) of each "SURVIVED module:line change" line of a previous run's output."""
    out = set()
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("SURVIVED "):
            where, change = line.strip().removeprefix("SURVIVED ").split(" ", 1)
            module, lineno = where.rsplit(":", 1)
            out.add((module, int(lineno), change))
    return out


def _key(item: tuple[Mutant, str]) -> int:
    return item[0].index


if __name__ == "__main__":
    main()
