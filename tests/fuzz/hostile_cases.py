"""Hostile inputs for every file input and float flag of the CLI, and one harness that runs a
command in-process and classifies what came out.

Shared by the fuzz tests (``tests/fuzz/``, with hypothesis strategies on top) and
``benchmarks/hostile_inputs.py`` (the issue's probe rerun: a few hundred cases, counted).

Each input path has a valid base document; hostile variants are built from it: binary and
non-UTF-8 bytes, a directory, an empty file, 10,000-deep nesting, a YAML alias bomb, a huge
file, NaN/infinity and absurd numbers, and wrong types at each of its fields.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

DIR = object()  # a file entry that is a directory
FIFO = object()  # a file entry that is a FIFO (named pipe) nobody reads


@dataclass(frozen=True)
class Sparse:
    """A file entry of ``size_bytes`` zeros, written as a sparse file (no disk space, no memory)."""

    size_bytes: int


Outcome = Literal["error", "accepted", "traceback", "hang", "multiline"]

# ---- the valid base documents, one per input path -----------------------------------------------

QWEN_CONFIG = json.loads(
    (Path(__file__).parents[2] / "src/servecap/catalog/data/models/Qwen--Qwen3-0.6B.json").read_text()
)
GPU_ROW: dict[str, Any] = {
    "id": "FuzzGPU",
    "name": "Fuzz GPU",
    "vendor": "nobody",
    "memory_gb": 80.0,
    "hbm_bandwidth_tb_s": 3.35,
    "bf16_dense_tflops": 989.0,
    "fp8_dense_tflops": 1979.0,
    "interconnect": "NVLink",
    "interconnect_gb_s": 900.0,
    "rent_usd_per_hour": 2.5,
}
FLEET: dict[str, Any] = {
    "pools": [{"name": "a", "model": "Qwen/Qwen3-0.6B", "gpu": "H100", "max_model_len": 4096, "replicas": 2}],
    "router": "least-outstanding",
    "slo": {"ttft_ms": 1000, "tpot_ms": 50},
}
WORKLOAD: dict[str, Any] = {
    "arrival": {"kind": "poisson", "rate_per_s": 5},
    "prompt_tokens": {"kind": "lognormal", "median": 200, "sigma": 0.5, "max": 2000},
    "output_tokens": 32,
    "num_requests": 20,
    "prefix": {"groups": 2, "tokens": 64, "share": 0.5},
}
AGENTIC_WORKLOAD: dict[str, Any] = {
    "arrival": {
        "kind": "agentic",
        "sessions": 3,
        "session_rate_per_s": 1.0,
        "turns_mean": 3,
        "system_prompt_tokens": 512,
        "turn_gap_s": 1.0,
        "subagent_probability": 0.3,
        "max_context_tokens": 3000,
        "block_tokens": 512,
    },
    "num_requests": 20,
}
MOONCAKE_TRACE: list[dict[str, Any]] = [
    {"timestamp": 0, "input_length": 1100, "output_length": 20, "hash_ids": [0, 1, 2]},
    {"timestamp": 1500, "input_length": 1300, "output_length": 30, "hash_ids": [0, 1, 3]},
]
SESSIONS_TRACE: list[dict[str, Any]] = [
    {"session_id": "a", "request_id": 1, "arrival_s": 0.5, "prompt_tokens": 900, "output_tokens": 20},
    {"session_id": "a", "request_id": 2, "parent_id": 1, "delay_s": 1.5, "prompt_tokens": 1200, "output_tokens": 30},
]
CALIBRATION: dict[str, Any] = {
    "schema": "servecap.calibration/1",
    "model": "Qwen/Qwen3-0.6B",
    "gpu": "H100",
    "coefficients": {"bandwidth_efficiency": 0.8, "compute_efficiency": 0.5, "step_overhead_s": 0.002},
}
SWEEP: dict[str, Any] = {
    "fleet": FLEET,
    "workload": WORKLOAD,
    "seed": 0,
    "mode": "grid",
    "axes": {"fleet.pools.0.replicas": [1, 2]},
}


def toml_of(rows: list[dict[str, Any]]) -> str:
    """A GPU file's ``[[gpu]]`` tables (flat values only; a nested value is written inline)."""
    out = []
    for row in rows:
        out.append("[[gpu]]")
        out.extend(f"{k} = {_toml_value(v)}" for k, v in row.items())
    return "\n".join(out) + "\n"


def toml_document(doc: Any) -> str:
    """Any mapping as TOML: plain keys first, then lists of mappings as arrays of tables."""
    if not isinstance(doc, dict):
        return f"value = {_toml_value(doc)}\n"
    tables = {k: v for k, v in doc.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
    plain = [f"{k} = {_toml_value(v)}" for k, v in doc.items() if k not in tables]
    out = "\n".join(plain) + ("\n" if plain else "")
    for key, rows in tables.items():
        for row in rows:
            out += f"[[{key}]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in row.items())
    return out


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"
    return '"None"'


@dataclass(frozen=True)
class InputPath:
    """One way a file gets in: the command line (``{f}`` is the file) and its format."""

    name: str
    args: tuple[str, ...]
    suffix: str  # ".json", ".yaml", ".toml"
    base: Any

    def render(self, doc: Any) -> bytes:
        if self.suffix == ".json":
            return json.dumps(doc, allow_nan=True).encode()
        if self.suffix == ".toml":
            return toml_document(doc).encode()
        if self.suffix == ".jsonl":  # one JSON value a line
            rows = doc if isinstance(doc, list) else [doc]
            return "".join(json.dumps(r, allow_nan=True) + "\n" for r in rows).encode()
        return yaml.safe_dump(doc, sort_keys=False).encode()


INPUT_PATHS: tuple[InputPath, ...] = (
    InputPath("plan -m FILE", ("plan", "-m", "{f}", "--json"), ".json", QWEN_CONFIG),
    InputPath(
        "--gpu-file FILE",
        ("plan", "--gpu-file", "{f}", "-g", "FuzzGPU", "-m", "Qwen/Qwen3-0.6B", "--json"),
        ".toml",
        {"gpu": [GPU_ROW]},
    ),
    InputPath(
        "fleet simulate --fleet FILE",
        ("fleet", "simulate", "--fleet", "{f}", "--rate", "5", "--num-requests", "20", "--json"),
        ".yaml",
        FLEET,
    ),
    InputPath(
        "simulate --workload FILE",
        ("simulate", "-m", "Qwen/Qwen3-0.6B", "-g", "H100", "--workload", "{f}", "--json"),
        ".yaml",
        WORKLOAD,
    ),
    InputPath("--calibration FILE", ("plan", "--calibration", "{f}", "--json"), ".json", CALIBRATION),
    InputPath("sweep FILE", ("sweep", "{f}", "--executor", "serial", "--no-store"), ".yaml", SWEEP),
    InputPath("export keda FILE", ("export", "keda", "{f}"), ".yaml", FLEET),
    InputPath(
        "simulate --workload FILE (agentic)",
        ("simulate", "-m", "Qwen/Qwen3-0.6B", "-g", "H100", "--workload", "{f}", "--json"),
        ".yaml",
        AGENTIC_WORKLOAD,
    ),
    InputPath(
        "simulate --trace FILE (mooncake)",
        ("simulate", "-m", "Qwen/Qwen3-0.6B", "-g", "H100", "--trace", "{f}", "--json"),
        ".jsonl",
        MOONCAKE_TRACE,
    ),
    InputPath(
        "fleet simulate --trace FILE (sessions)",
        ("fleet", "simulate", "-m", "Qwen/Qwen3-0.6B", "-g", "H100", "--trace", "{f}", "--json"),
        ".jsonl",
        SESSIONS_TRACE,
    ),
)


@dataclass
class Case:
    """One command with its files (name -> bytes, or :data:`DIR`); ``must_refuse``: exit 0 is a
    failure (a value the issue lists as wrongly accepted)."""

    name: str
    args: tuple[str, ...]
    files: dict[str, Any] = field(default_factory=dict)
    must_refuse: bool = False


# ---- hostile documents ------------------------------------------------------------------------


def deep(fmt: str, depth: int) -> bytes:
    """``depth`` nested lists in the format's own syntax."""
    if fmt == ".toml":
        return ("a = " + "[" * depth + "]" * depth + "\n").encode()
    return ("[" * depth + "]" * depth).encode()


def alias_bomb(levels: int = 9, width: int = 9) -> bytes:
    """The billion laughs in YAML: each level a list of ``width`` aliases of the one before
    (``width ** levels`` leaves from a few hundred bytes)."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]")
    return ("\n".join(lines) + "\n").encode()


def hostile_files(path: InputPath) -> Iterator[tuple[str, Any]]:
    """Whole-file hostile variants (the file's content does not depend on its schema)."""
    yield "binary", bytes(range(256)) * 4
    yield "non-UTF-8", path.render(path.base).replace(b"a", b"\xe9", 3)
    yield "NUL bytes", b"\x00" * 64
    yield "control characters", b"a: \x01\x02\x1b[31m\n"
    yield "directory", DIR
    yield "empty", b""
    yield "10,000-deep nesting", deep(path.suffix, 10_000)
    yield "100-deep nesting", deep(path.suffix, 100)
    yield "not a mapping", b"[1, 2, 3]" if path.suffix != ".toml" else b"a = [1, 2, 3]\n"
    yield "truncated", path.render(path.base)[: len(path.render(path.base)) // 2]
    if path.suffix == ".yaml":
        yield "alias bomb", alias_bomb()
        yield "recursive alias", b"a: &a [*a]\n"
        yield "python tag", b"!!python/object/apply:os.system ['true']\n"
    if path.suffix == ".jsonl":  # a trace: lines that are blank, malformed or endless
        yield "blank lines only", b"\n\n   \n\t\n"
        yield "a malformed line", path.render(path.base) + b'{"timestamp": \n'
        yield "an 8 MB line", b'{"x": "' + b"y" * 8_000_000 + b'"}\n'
    if path.suffix == ".json":
        yield "NaN literal", b'{"x": NaN}'
        yield "huge integer", b'{"x": 1' + b"0" * 5000 + b"}"


# values put in place of one field; None means "remove the key"
HOSTILE_VALUES: tuple[Any, ...] = (
    float("nan"),
    float("inf"),
    float("-inf"),
    1e300,
    -1.0,
    0,
    1e-300,
    10**30,
    "80",
    "",
    [],
    {},
    True,
    None,
)


def leaves(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path of a document (mapping keys and list indexes) down to its leaves."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield (*prefix, k)
            yield from leaves(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield (*prefix, i)
            yield from leaves(v, (*prefix, i))


def replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A deep copy of ``doc`` with the value at ``path`` replaced (``None``: the key removed)."""
    out = json.loads(json.dumps(doc))
    node = out
    for p in path[:-1]:
        node = node[p]
    if value is None and isinstance(node, dict):
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return out


def field_cases(path: InputPath, values: tuple[Any, ...] = HOSTILE_VALUES) -> Iterator[Case]:
    """Each leaf of the base document replaced by each hostile value."""
    base = path.base
    for key_path in leaves(base):
        for value in values:
            doc = replaced(base, key_path, value)
            label = ".".join(str(p) for p in key_path)
            yield Case(f"{path.name}: {label} = {value!r}", path.args, {"f": path.render(doc)})


def file_cases(path: InputPath) -> Iterator[Case]:
    for label, content in hostile_files(path):
        # a truncated YAML file may still be a valid document
        yield Case(f"{path.name}: {label}", path.args, {"f": content}, must_refuse=label != "truncated")


# ---- float flags --------------------------------------------------------------------------------

BAD_FLOATS = ("nan", "inf", "-inf", "NaN", "1e309", "abc")

FLOAT_FLAGS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("simulate", "--rate", "5", "--num-requests", "5"), "--duration-s"),
    (("simulate", "--num-requests", "5"), "--rate"),
    (("simulate", "--users", "3", "--num-requests", "5"), "--think-time-s"),
    (("simulate", "--rate", "5", "--num-requests", "5", "--arrival", "gamma"), "--cv"),
    (("simulate", "--rate", "5", "--num-requests", "5"), "--prompt-sigma"),
    (("plan",), "--gpu-memory-utilization"),
    (("plan", "-m", "deepseek-v3", "-g", "H200", "--tp", "1", "--dp", "8", "--ep", "8"), "--expert-skew"),
    (("plan",), "--price-per-hour"),
    (("plan",), "--ttft-slo-ms"),
    (("capacity", "--num-requests", "20"), "--tpot-slo-ms"),
    (("compare", "-m", "Qwen/Qwen3-0.6B"), "--duty-cycle"),
    (("fleet", "simulate", "--rate", "5", "--num-requests", "5"), "--scrape-interval-ms"),
    (("simulate", "--rate", "5", "--num-requests", "5"), "--cpu-kv-gib"),
    (("simulate", "--rate", "5", "--num-requests", "5"), "--ssd-kv-gib"),
    (("fleet", "simulate", "--rate", "5", "--num-requests", "5"), "--remote-kv-tib"),
    (("simulate", "--trace", "sample:mooncake-conversation", "--num-requests", "5"), "--time-scale"),
    (("simulate", "--trace", "sample:mooncake-conversation", "--num-requests", "5"), "--trace-start-s"),
    (("fleet", "simulate", "--trace", "sample:agentic", "--num-requests", "5"), "--trace-end-s"),
    (
        ("fleet", "plan", "-g", "H100", "--levers", "none", "--trace", "sample:azure-code-2023", "--trace-end-s", "1"),
        "--time-scale",
    ),
    (("bench", "http://127.0.0.1:9", "--rate", "1", "--num-requests", "1", "--no-store"), "--timeout-s"),
    (("bench", "http://127.0.0.1:9", "--rate", "1", "--num-requests", "1", "--no-store"), "--warmup-s"),
    (("bench", "http://127.0.0.1:9", "--num-requests", "1", "--no-store"), "--concurrency"),
    (("emulate", "--port", "1"), "--fixed-ttft-s"),
    (("emulate", "--port", "1", "--fixed-ttft-s", "0.1"), "--fixed-itl-s"),
    (("monitor", "http://127.0.0.1:9", "--once", "--no-store"), "--interval-s"),
    (("monitor", "http://127.0.0.1:9", "--once", "--no-store"), "--timeout-s"),
)


def flag_cases(values: tuple[str, ...] = BAD_FLOATS) -> Iterator[Case]:
    for base, flag in FLOAT_FLAGS:
        for value in values:
            yield Case(f"{base[0]} {flag} {value}", (*base, flag, value), must_refuse=True)


def special_cases() -> Iterator[Case]:
    """The issue's named repros that are neither a file nor a float flag."""
    for key, value in (
        ("hbm_bandwidth_tb_s", 1e-9),
        ("bf16_dense_tflops", 1e-9),
        ("fp8_dense_tflops", float("inf")),
        ("interconnect_gb_s", float("inf")),
        ("memory_gb", "80"),
        ("rent_usd_per_hour", float("inf")),
    ):
        doc = {"gpu": [{**GPU_ROW, key: value}]}
        yield Case(f"--gpu-file: {key} = {value!r}", INPUT_PATHS[1].args, {"f": toml_of(doc["gpu"]).encode()}, True)
    yield Case(
        "bench --concurrency 0.5", ("bench", "http://127.0.0.1:9", "--concurrency", "0.5", "--no-store"), {}, True
    )
    yield Case("bench url http://[::1", ("bench", "http://[::1", "--rate", "1", "--no-store"), {}, True)
    yield Case("monitor url http://[::1", ("monitor", "http://[::1", "--once", "--no-store"), {}, True)
    yield Case("simulate --rate 1e-300", ("simulate", "--rate", "1e-300", "--num-requests", "10"), {}, True)
    yield Case("simulate rate x duration", ("simulate", "--rate", "100000", "--duration-s", "86400"), {}, True)
    yield Case("simulate --duration-s inf", ("simulate", "--rate", "5", "--duration-s", "inf"), {}, True)
    for flag, value in (
        ("--time-scale", "0"),
        ("--time-scale", "-1"),
        ("--time-scale", "1e-300"),
        ("--time-scale", "1e300"),
        ("--trace-start-s", "-1"),
        ("--trace-end-s", "0"),
        ("--trace-block-tokens", "0"),
        ("--trace-block-tokens", "-5"),
    ):
        yield Case(
            f"simulate --trace {flag} {value}",
            ("simulate", "--trace", "sample:agentic", flag, value, "--num-requests", "5"),
            {},
            True,
        )
    yield Case("simulate --trace missing", ("simulate", "--trace", "/no/such/trace.jsonl"), {}, True)
    # issue 31: a setting that would change nothing is named, not ignored
    for base, flag, value in (
        (("simulate", "--rate", "5", "--num-requests", "5"), "--kv-load", "async"),
        (("fleet", "simulate", "--rate", "5", "--num-requests", "5"), "--kv-store", "on-compute"),
        (("fleet", "plan", "-g", "H100", "--trace", "sample:azure-code-2023"), "--cpu-tier-gib", "64"),
        (
            ("fleet", "plan", "-g", "H100", "--levers", "cpu-tier", "--trace", "sample:azure-code-2023"),
            "--shared-store-tib",
            "1",
        ),
    ):
        yield Case(f"{base[0]} {flag} {value} without its tier", (*base, flag, value), {}, True)
    # a trace's format is told by its first line: never read from a FIFO or a line without end
    yield Case("simulate --trace /dev/zero", ("simulate", "--trace", "/dev/zero"), {}, True)
    for i, trace_args in enumerate(p.args for p in INPUT_PATHS if p.suffix == ".jsonl"):
        yield Case(f"--trace FIFO ({i})", trace_args, {"f": FIFO}, True)
    for gpus in ("", ","):  # an empty list never means every GPU
        yield Case(f"compare --gpus {gpus!r}", ("compare", "-m", "Qwen/Qwen3-0.6B", "--gpus", gpus), {}, True)
    yield Case(
        "trace: prefix_tokens without prefix_group",
        next(p.args for p in INPUT_PATHS if p.base is MOONCAKE_TRACE),  # a .jsonl file
        {"f": b'{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 5, "prefix_tokens": -1}\n'},
        True,
    )
    agentic_args = next(p.args for p in INPUT_PATHS if p.base is AGENTIC_WORKLOAD)
    bad: tuple[tuple[str, float], ...] = (
        ("sessions", 0),
        ("turn_gap_s", -1.0),
        ("session_rate_per_s", 1e-300),
        ("turns_mean", 1e300),
    )
    for name, number in bad:
        agentic = json.loads(json.dumps(AGENTIC_WORKLOAD))
        agentic["arrival"][name] = number
        yield Case(f"agentic {name} = {number!r}", agentic_args, {"f": yaml.safe_dump(agentic).encode()}, True)
    big = {**QWEN_CONFIG, "num_hidden_layers": 10**9}
    yield Case("plan -m: 10^9 layers", ("plan", "-m", "{f}"), {"f": json.dumps(big).encode()}, True)
    big = {**QWEN_CONFIG, "num_hidden_layers": 3_000_000}
    yield Case("plan -m: 3M layers", ("plan", "-m", "{f}"), {"f": json.dumps(big).encode()}, True)
    for key, value in (("users", {"count": 10**7, "think_time_s": 1}), ("duration_s", 1e300)):
        doc = {k: v for k, v in WORKLOAD.items() if k not in ("arrival",)} if key == "users" else dict(WORKLOAD)
        doc[key] = value
        yield Case(f"workload {key} = {value!r}", INPUT_PATHS[3].args, {"f": yaml.safe_dump(doc).encode()}, True)
    grid = dict(SWEEP, axes={f"workload.prompt_tokens.{k}": list(range(1, 1001)) for k in ("median", "max")})
    grid["axes"]["fleet.pools.0.replicas"] = list(range(1, 101))
    sweep_args = next(p.args for p in INPUT_PATHS if p.base is SWEEP)
    yield Case("sweep: 10^8-point grid", sweep_args, {"f": yaml.safe_dump(grid).encode()}, True)
    yield Case("runs delete %", ("runs", "delete", "%", "--db", "{db}"), {}, True)
    yield Case("plan -m: a 300-character name", ("plan", "-m", "x" * 300), {}, True)
    for replicas in (10**7, 10**9):
        doc = json.loads(json.dumps(FLEET))
        doc["pools"][0]["replicas"] = replicas
        yield Case(f"fleet: replicas {replicas:.0e}", INPUT_PATHS[2].args, {"f": yaml.safe_dump(doc).encode()}, True)
    doc = json.loads(json.dumps(FLEET))
    doc["pools"][0]["model"] = "x" * 300
    yield Case("fleet: a 300-character model", INPUT_PATHS[2].args, {"f": yaml.safe_dump(doc).encode()}, True)


def all_cases() -> list[Case]:
    """The probe's shape: every input path's hostile files and fields, the float flags, and the
    issue's named repros."""
    out: list[Case] = []
    for p in INPUT_PATHS:
        out.extend(file_cases(p))
        out.extend(field_cases(p, (float("nan"), 1e300, "80", None)))
    out.extend(flag_cases())
    out.extend(special_cases())
    from reliability_cases import reliability_cases  # issue 33's shapes (they build on this module)

    out.extend(reliability_cases())
    return out


# ---- running one case in-process ------------------------------------------------------------------


class Hang(Exception):
    """The command ran past its time limit."""


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    code: int
    stderr: str
    seconds: float
    cpu_seconds: float = 0.0  # this process's CPU (its threads): the work, whatever else loads the machine


def materialize(case: Case, folder: Path) -> list[str]:
    """Write the case's files under ``folder``; its arguments with ``{name}`` replaced."""
    names: dict[str, str] = {"db": str(folder / "runs.sqlite")}
    for i, (key, content) in enumerate(case.files.items()):
        ext = _suffix_for(case)
        target = folder / f"input{i}{ext}"
        if content is DIR:
            target.mkdir()
        elif content is FIFO:
            os.mkfifo(target)
        elif isinstance(content, Sparse):
            with open(target, "wb") as fh:
                fh.truncate(content.size_bytes)
        else:
            target.write_bytes(content)
        names[key] = str(target)
    return [a.format(**names) if a.startswith("{") else a for a in case.args]


def _suffix_for(case: Case) -> str:
    for p in INPUT_PATHS:
        if case.args == p.args:
            return p.suffix
    return ".json"


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"past {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_in_process(argv: list[str], *, limit_s: float = 10.0) -> Result:
    """``servecap ARGV`` through the console entry point (``run()``: its error handling
    included), with stdout/stderr captured and a time limit."""
    from servecap.cli.main import run

    out, err = io.StringIO(), io.StringIO()
    code = 0
    t0, cpu0 = time.monotonic(), time.process_time()
    saved_argv = sys.argv
    sys.argv = ["servecap", *argv]
    try:
        with _deadline(limit_s), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                run()
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except Hang:
        return Result("hang", -1, err.getvalue(), time.monotonic() - t0, time.process_time() - cpu0)
    except BaseException as exc:  # a traceback: anything run() let through
        import traceback

        text = "".join(traceback.format_exception(exc))
        return Result("traceback", -1, err.getvalue() + text, time.monotonic() - t0, time.process_time() - cpu0)
    finally:
        sys.argv = saved_argv
    cpu_s = time.process_time() - cpu0
    return Result(classify(code, err.getvalue()), code, err.getvalue(), time.monotonic() - t0, cpu_s)


def classify(code: int, stderr: str) -> Outcome:
    """What an exit looked like: 0 accepted; a traceback; one line (warnings aside) with exit 1
    or 2; or several lines."""
    if "Traceback (most recent call last)" in stderr:
        return "traceback"
    if code == 0:
        return "accepted"
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip() and not ln.startswith(("warning:", "note:"))]
    if code in (1, 2) and len(lines) == 1:
        return "error"
    return "multiline"


def is_one_line_naming_a_field(stderr: str) -> bool:
    """``error: FIELD=VALUE: problem`` or click's usage error naming the option."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip() and not ln.startswith(("warning:", "note:"))]
    if len(lines) != 1:
        return False
    line = lines[0]
    return (line.startswith("error: ") and "=" in line) or line.startswith("Error: ")
