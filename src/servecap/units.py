"""Unit constants and converters. Every quantity in servecap carries its unit in its name."""

from __future__ import annotations

GIB_BYTES = 1024**3
MIB_BYTES = 1024**2
GB_BYTES = 10**9
TB_BYTES = 10**12
TFLOPS = 10**12
HOURS_PER_MONTH = 730.0  # 8,760 h / 12: the convention cloud price sheets use for a month
SECONDS_PER_HOUR = 3600.0


def gib(num_bytes: float) -> float:
    return num_bytes / GIB_BYTES


def gb(num_bytes: float) -> float:
    return num_bytes / GB_BYTES


def cdiv(numerator: int, denominator: int) -> int:
    """Ceiling division of non-negative integers (vLLM's ``cdiv``)."""
    return -(-numerator // denominator)


def human_bytes(num_bytes: float) -> str:
    """'72.7 GB' style (decimal units, as spec sheets print memory)."""
    value = float(num_bytes)
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g} {unit}" if abs(value) / size < 100 else f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def human_seconds(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"
