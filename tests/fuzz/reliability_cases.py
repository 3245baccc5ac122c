"""Issue 33's hostile shapes, gathered for ``benchmarks/hostile_inputs.py`` (each family has its
own test file: test_output_files, test_calibration_bounds, test_stored_data, test_ray_refusals,
test_store_writers): output targets, calibrations and replica MTBFs outside their meaning,
damaged sketches rows, monitor recordings and Prometheus exports, unusable Ray clusters, and
stores of an unknown schema version."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from hostile_cases import CALIBRATION, FLEET, SWEEP, Case
from output_cases import output_cases
from ray_cases import ray_cases
from stored_cases import store_bytes, stored_cases


def calibration_cases() -> Iterator[Case]:
    commands = {
        "simulate": ("simulate", "-m", "Qwen/Qwen3-0.6B", "-g", "H100", "--rate", "1", "--num-requests", "5"),
        "capacity": ("capacity", "-m", "Qwen/Qwen3-0.6B", "-g", "H100"),
        "validate": ("validate",),
    }
    for field in ("bandwidth_efficiency", "compute_efficiency"):
        doc = json.loads(json.dumps(CALIBRATION))
        doc["gpu"] = "H100-SXM"
        doc["coefficients"][field] = 1e-30
        for name, argv in commands.items():
            yield Case(
                f"{name} --calibration: {field} 1e-30",
                (*argv, "--calibration", "{c}"),
                {"c": json.dumps(doc).encode()},
                True,
            )
    fleet = json.loads(json.dumps(FLEET))
    fleet["pools"][0].update(mtbf_s=1e-9, cold_start="instant")
    argv = ("fleet", "simulate", "--fleet", "{f}", "--rate", "5", "--num-requests", "20")
    yield Case("fleet simulate: mtbf_s 1e-9, instant cold starts", argv, {"f": json.dumps(fleet).encode()}, True)


def _store_of_version(version: int) -> bytes:
    def build(path: Path) -> None:
        from servecap.results.store import RunStore

        RunStore(path)
        with sqlite3.connect(path) as con:
            con.execute(f"PRAGMA user_version = {version}")

    return store_bytes(build)


def schema_cases() -> Iterator[Case]:
    sweep = json.dumps(SWEEP).encode()
    fleet = json.dumps(FLEET).encode()
    writers = {
        "bench": (("bench", "http://127.0.0.1:9", "--rate", "1", "--num-requests", "2", "--db", "{db}"), {}),
        "sweep": (("sweep", "{s}", "--executor", "serial", "--db", "{db}"), {"s": sweep}),
        "fleet simulate --save": (
            ("fleet", "simulate", "--fleet", "{f}", "--rate", "5", "--num-requests", "20", "--save", "--db", "{db}"),
            {"f": fleet},
        ),
        "monitor --db": (("monitor", "http://127.0.0.1:9", "--once", "--db", "{db}"), {}),
    }
    for version in (-1, 99):
        data = _store_of_version(version)
        for name, (argv, files) in writers.items():
            yield Case(f"{name}: a store of schema version {version}", argv, {**files, "db": data}, True)


def reliability_cases() -> list[Case]:
    return [*output_cases(), *calibration_cases(), *stored_cases(), *ray_cases(), *schema_cases()]
