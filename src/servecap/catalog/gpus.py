"""The GPU catalog: ``data/gpus.toml`` rows (each with its sources), plus user TOML files."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from servecap.catalog.names import normalize_name
from servecap.errors import ServecapError, did_you_mean, from_validation_error
from servecap.specs.gpu import GpuSpec

_SPEC_KEYS = (
    "id",
    "name",
    "vendor",
    "memory_gb",
    "hbm_bandwidth_tb_s",
    "bf16_dense_tflops",
    "interconnect",
    "interconnect_gb_s",
    "host_link_gb_s",
    "memory_bytes",
    "memory_gib_reported",
    "fp8_dense_tflops",
    "int8_dense_tops",
    "fp4_dense_tflops",
    "tdp_w",
    "rent_usd_per_hour",
    "rent_date",
    "purchase_usd",
    "purchase_date",
    "nic",
    "nic_gb_s",
    "link_latency_us",
    "nic_latency_us",
)


def gpu_spec_from_row(row: Mapping[str, Any]) -> GpuSpec:
    """A catalog row (already validated) as a GpuSpec."""
    fields: dict[str, Any] = {key: row.get(key) for key in _SPEC_KEYS}
    fields["interconnect"] = row.get("interconnect", "PCIe")
    return GpuSpec(**fields, sources=tuple(row.get("sources", ())))


def _validated_rows(data: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """Validate a GPU file's tables with the pydantic schema; one-line errors name the key."""
    from pydantic import ValidationError

    from servecap.catalog.schema import GpuRow

    extra = set(data) - {"gpu"}
    if extra:
        key = sorted(extra)[0]
        raise ServecapError(f"{where}.{key}", "...", "unknown top-level key; GPU files hold [[gpu]] tables")
    tables = data.get("gpu", [])
    if not isinstance(tables, list) or not tables:
        raise ServecapError(f"{where}.gpu", tables, "expected one or more [[gpu]] tables")
    rows = []
    for i, table in enumerate(tables):
        try:
            rows.append(GpuRow.model_validate(table).model_dump())
        except ValidationError as err:
            raise from_validation_error(
                err, f"{where}.gpu[{i}]", allowed_keys=lambda _loc: GpuRow.model_fields
            ) from None
    return rows


def builtin_gpu_tables() -> list[dict[str, Any]]:
    """The shipped catalog's raw tables (validated against the schema by the test suite)."""
    text = resources.files("servecap.catalog").joinpath("data/gpus.toml").read_text("utf-8")
    tables: list[dict[str, Any]] = tomllib.loads(text)["gpu"]
    return tables


def load_gpu_file(path: Path) -> list[GpuSpec]:
    """Read a user's GPU TOML file (same schema as the built-in catalog)."""
    from servecap.files import load_document

    data = load_document(path, "gpu_file", fmt="toml")
    return [gpu_spec_from_row(row) for row in _validated_rows(data, path.name)]


@cache
def gpu_catalog() -> tuple[GpuSpec, ...]:
    return tuple(gpu_spec_from_row(row) for row in builtin_gpu_tables())


@cache
def gpu_aliases() -> dict[str, str]:
    """Normalized name -> canonical id, for every id and alias in the built-in catalog."""
    table: dict[str, str] = {}
    for row in builtin_gpu_tables():
        for name in (row["id"], *row.get("aliases", ())):
            table[normalize_name(name)] = row["id"]
    return table


def lookup_gpu(name: str, extra: list[GpuSpec] | None = None) -> GpuSpec:
    """Find a GPU by id or alias, case-insensitively, ignoring spaces, hyphens and underscores."""
    key = normalize_name(name)
    for spec in extra or []:
        if normalize_name(spec.id) == key:
            return spec
    by_id = {g.id: g for g in gpu_catalog()}
    aliases = gpu_aliases()
    if key in aliases:
        return by_id[aliases[key]]
    known = [g.id for g in gpu_catalog()] + [g.id for g in extra or []]
    raise ServecapError(
        "gpu", name, "unknown GPU" + _gpu_suggestion(name, known) + "; `servecap gpus` lists them, --gpu-file adds one"
    )


def _gpu_suggestion(name: str, known: list[str]) -> str:
    """A "did you mean" for a GPU name: an O typed for a 0 or an l for a 1 (``H1OO``), then the
    closest ids or aliases (``h100`` is an alias of ``H100-SXM``)."""
    import difflib

    key = normalize_name(name)
    aliases = gpu_aliases()
    fixed = key.replace("o", "0").replace("l", "1")
    if fixed in aliases:
        return f" (did you mean: {aliases[fixed]}?)"
    close = difflib.get_close_matches(key, list(aliases), n=3, cutoff=0.6)
    ids = list(dict.fromkeys(aliases[c] for c in close))
    return f" (did you mean: {', '.join(ids)}?)" if ids else did_you_mean(name, known)
