"""The GPU catalog: ``data/gpus.toml`` rows (each with its sources), plus user TOML files."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from servecap.catalog.names import normalize_name
from servecap.errors import ServecapError, did_you_mean
from servecap.specs.gpu import GpuSpec


class GpuRow(BaseModel):
    """One ``[[gpu]]`` table. Unknown keys are rejected, so typos in a user's file surface."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    vendor: str = Field(min_length=1)
    aliases: list[str] = []
    memory_gb: float = Field(gt=0, le=10_000)
    memory_bytes: int | None = Field(default=None, gt=0)
    memory_gib_reported: float | None = Field(default=None, gt=0, le=10_000)
    memory_type: str | None = None
    hbm_bandwidth_tb_s: float = Field(gt=0, le=1_000)
    bf16_dense_tflops: float | None = Field(default=None, gt=0, le=1_000_000)
    fp8_dense_tflops: float | None = Field(default=None, gt=0)
    int8_dense_tops: float | None = Field(default=None, gt=0)
    fp4_dense_tflops: float | None = Field(default=None, gt=0)
    interconnect: str = "PCIe"
    interconnect_gb_s: float | None = Field(default=None, gt=0)
    host_link_gb_s: float | None = Field(default=None, gt=0)
    tdp_w: float | None = Field(default=None, gt=0)
    rent_usd_per_hour: float | None = Field(default=None, gt=0)
    rent_source: str | None = None
    rent_date: str | None = None
    purchase_usd: float | None = Field(default=None, gt=0)
    purchase_source: str | None = None
    purchase_date: str | None = None
    sources: list[str] = []
    notes: str | None = None

    def to_spec(self) -> GpuSpec:
        return GpuSpec(
            id=self.id,
            name=self.name,
            vendor=self.vendor,
            memory_gb=self.memory_gb,
            hbm_bandwidth_tb_s=self.hbm_bandwidth_tb_s,
            bf16_dense_tflops=self.bf16_dense_tflops,
            interconnect=self.interconnect,
            interconnect_gb_s=self.interconnect_gb_s,
            host_link_gb_s=self.host_link_gb_s,
            memory_bytes=self.memory_bytes,
            memory_gib_reported=self.memory_gib_reported,
            fp8_dense_tflops=self.fp8_dense_tflops,
            int8_dense_tops=self.int8_dense_tops,
            fp4_dense_tflops=self.fp4_dense_tflops,
            tdp_w=self.tdp_w,
            rent_usd_per_hour=self.rent_usd_per_hour,
            rent_date=self.rent_date,
            purchase_usd=self.purchase_usd,
            purchase_date=self.purchase_date,
            sources=tuple(self.sources),
        )


def _rows_from_toml(data: dict[str, Any], where: str) -> list[GpuRow]:
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
            rows.append(GpuRow.model_validate(table))
        except ValidationError as err:
            # a misspelt key also shows up as a missing one: report the misspelling first
            first = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
            loc = ".".join(str(p) for p in first["loc"])
            value = None if first["type"] == "missing" else first.get("input")
            msg = first["msg"]
            if first["type"] == "extra_forbidden":
                msg = "unknown key" + did_you_mean(str(first["loc"][-1]), GpuRow.model_fields)
            raise ServecapError(f"{where}.gpu[{i}].{loc}", value, msg) from None
    return rows


@cache
def _builtin_rows() -> tuple[GpuRow, ...]:
    text = resources.files("servecap.catalog").joinpath("data/gpus.toml").read_text("utf-8")
    return tuple(_rows_from_toml(tomllib.loads(text), "gpus.toml"))


def load_gpu_file(path: Path) -> list[GpuSpec]:
    """Read a user's GPU TOML file (same schema as the built-in catalog)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ServecapError("gpu_file", str(path), "no such file") from None
    except tomllib.TOMLDecodeError as err:
        raise ServecapError("gpu_file", str(path), f"malformed TOML: {err}") from None
    return [row.to_spec() for row in _rows_from_toml(data, path.name)]


@cache
def gpu_catalog() -> tuple[GpuSpec, ...]:
    return tuple(row.to_spec() for row in _builtin_rows())


def gpu_aliases() -> dict[str, str]:
    """Normalized name -> canonical id, for every id and alias in the built-in catalog."""
    table: dict[str, str] = {}
    for row in _builtin_rows():
        for name in (row.id, *row.aliases):
            table[normalize_name(name)] = row.id
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
    raise ServecapError("gpu", name, "unknown GPU" + did_you_mean(name, known)
                        + "; `servecap gpus` lists them, --gpu-file adds one")
