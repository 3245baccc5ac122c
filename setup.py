"""Build hook: compile the simulator's and the planner's hot modules with mypyc when possible.

Everything else about the package is in pyproject.toml. ``pip install [-e] .`` compiles
the modules in ``COMPILED`` to C extensions (about 2x faster simulations,
a quarter off a plan's CPU, identical results); when that is impossible — no C compiler or Python headers, mypyc
missing or failing — it prints a one-line warning and installs the same modules as plain Python,
which behave identically. ``SERVECAP_PURE_PYTHON=1`` forces the pure-Python build (and removes
compiled modules an earlier editable build left in ``src/``, which would shadow the sources).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
COMPILED = (  # modules of servecap, as paths under src/servecap
    "sim/request_state",
    "sim/queues",
    "sim/scheduler_policy",
    "sim/kv_pool",
    "sim/step_time",
    "sim/engine",
    "sim/engine_server",
    "sim/traffic",
    "sim/observer",
    "sim/loop",
    "fleet/pools",
    "fleet/replica",
    "fleet/fleet",
    "fleet/cache_replay",
    "fleet/cache_replay_tiers",
    "fleet/run_tiers",
    "fleet/pd/link",
    "fleet/pd/replica",
    "fleet/pd/fleet",
    "policy/routers",
    "core/roofline",
    "core/capacity",
    "core/ops/layers",
    "core/ops/timers",
    "core/ops/step",
)
PURE_ENV = "SERVECAP_PURE_PYTHON"


def _warn(msg: str) -> None:
    msg = " ".join(msg.split())
    msg = msg if len(msg) <= 200 else msg[:197] + "..."
    print(f"servecap: {msg}; installing the pure-Python simulator (same results, slower)", file=sys.stderr)


def _compiled_files(root: Path) -> list[Path]:
    """Our compiled modules under ``root`` (``src/`` or a build dir): the per-module shims in
    their packages and mypyc's shared library beside the package (``<hash>__mypyc.*.so``)."""
    pkg = root / "servecap"
    found = [p for m in COMPILED for ext in ("so", "pyd") for p in (pkg / m).parent.glob(f"{Path(m).name}.*{ext}")]
    return found + [p for ext in ("so", "pyd") for p in root.glob(f"*__mypyc.*{ext}")]


def _remove_compiled(*roots: Path) -> None:
    for root in roots:
        for p in _compiled_files(root):
            p.unlink(missing_ok=True)


class OptionalBuildExt(build_ext):
    """build_ext that falls back to the pure-Python modules when compiling fails."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # any failure: the .py modules serve instead
            _remove_compiled(Path(self.build_lib), ROOT / "src")  # never a shim without its library
            _warn(f"compiling the simulator with mypyc failed ({type(exc).__name__}: {exc})")


def _ext_modules() -> list[Any]:
    if os.environ.get(PURE_ENV, "").strip() not in ("", "0"):
        _remove_compiled(ROOT / "src")
        print(f"servecap: {PURE_ENV} set: installing the pure-Python simulator", file=sys.stderr)
        return []
    cwd = os.getcwd()
    try:
        from mypyc.build import mypycify

        os.chdir(ROOT)  # mypy reads pyproject.toml's [tool.mypy] and finds src/ from here
        return list(
            mypycify(
                [
                    # type-check only what is compiled: errors in imported modules (e.g. with
                    # the runtime dependencies absent from the build environment) don't matter
                    "--follow-imports=silent",
                    "--ignore-missing-imports",
                    *(f"src/servecap/{m}.py" for m in COMPILED),
                ],
                opt_level="3",
            )
        )
    except BaseException as exc:  # ImportError, a type error (SystemExit), ...
        if isinstance(exc, KeyboardInterrupt):
            raise
        _remove_compiled(ROOT / "src")
        _warn(f"mypyc unavailable or failed ({type(exc).__name__}: {exc})")
        return []
    finally:
        os.chdir(cwd)


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
