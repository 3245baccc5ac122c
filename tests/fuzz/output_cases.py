"""Hostile output targets for every flag that writes a file (issue 33): a directory, an empty
name, ``/dev/full``, a FIFO nobody reads, a file on a file system that refuses new names
(``/proc``; the tests run as root, so a chmod-ed file would still be writable), a new name in a
folder root may not write (``/sys``), a folder that does not exist. Each must be refused in one
line naming the flag and the path, before the command does its work.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from hostile_cases import DIR, FIFO, FLEET, SWEEP, Case

TARGETS: tuple[tuple[str, str, dict[str, object]], ...] = (
    ("a directory", "{out}", {"out": DIR}),
    ("an empty name", "", {}),
    ("/dev/full", "/dev/full", {}),
    ("a FIFO", "{out}", {"out": FIFO}),
    ("a file in /proc", "/proc/version", {}),
    ("a new name in /sys", "/sys/servecap-out.html", {}),
    ("a missing folder", "/nonexistent-servecap/out.html", {}),
)

_FLEET = json.dumps(FLEET).encode()
_SWEEP = json.dumps(SWEEP).encode()

# (command name, argv before the output flag, the flag, the files the argv names)
OUTPUT_FLAGS: tuple[tuple[str, tuple[str, ...], str, dict[str, object]], ...] = (
    ("simulate", ("simulate", "-m", "Qwen/Qwen3-0.6B", "--rate", "1", "--num-requests", "5"), "--html", {}),
    (
        "fleet simulate",
        ("fleet", "simulate", "--fleet", "{f}", "--rate", "5", "--num-requests", "20"),
        "--records",
        {"f": _FLEET},
    ),
    (
        "fleet simulate",
        ("fleet", "simulate", "--fleet", "{f}", "--rate", "5", "--num-requests", "20"),
        "--html",
        {"f": _FLEET},
    ),
    ("sweep", ("sweep", "{f}", "--executor", "serial", "--no-store"), "--csv", {"f": _SWEEP}),
    ("sweep", ("sweep", "{f}", "--executor", "serial", "--no-store"), "--html", {"f": _SWEEP}),
    ("export keda", ("export", "keda", "{f}"), "--output", {"f": _FLEET}),
    ("monitor replay", ("monitor", "replay", "--db", "{db}", "--fleet", "{f}"), "--html", {"f": _FLEET}),
    ("runs export", ("runs", "export", "last", "--db", "{db}"), "--output", {}),
    ("fleet plan", ("fleet", "plan", "-m", "Qwen/Qwen3-0.6B", "-g", "H100"), "--html", {}),
    ("validate", ("validate",), "--html", {}),
    ("calibrate", ("calibrate", "last", "--db", "{db}"), "--output", {}),
)


def output_cases() -> Iterator[Case]:
    """Every output flag with every hostile target: refused (must_refuse) in one line."""
    for command, argv, flag, files in OUTPUT_FLAGS:
        for what, target, target_files in TARGETS:
            yield Case(f"{command} {flag} {what}", (*argv, flag, target), {**files, **target_files}, True)


def one_line_names(stderr: str, flag: str, target: str) -> bool:
    """The error names the flag and the target path."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip() and not ln.startswith(("warning:", "note:"))]
    return len(lines) == 1 and flag in lines[0] and (target == "" or target in lines[0])
