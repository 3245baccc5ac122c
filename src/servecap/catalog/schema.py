"""Pydantic schemas of the catalog files, for validating untrusted input.

A user's ``--gpu-file`` is validated here (unknown keys rejected with a "did you mean"); the
shipped catalogs are validated by a test (tests/catalog/test_catalog_files.py), so the plan path
does not pay for importing pydantic on every run.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class GpuRow(BaseModel):
    """One ``[[gpu]]`` table. Unknown keys are rejected, so typos in a user's file surface; numbers
    must be numbers (``strict``: a memory size given as a string is refused), finite, and inside
    the range any accelerator has (a near-zero bandwidth or TFLOPS is a typo in units, and would
    make every step time absurd)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    vendor: str = Field(min_length=1, max_length=200)
    aliases: list[str] = Field(default=[], max_length=100)
    memory_gb: float = Field(ge=0.5, le=10_000)
    memory_bytes: int | None = Field(default=None, ge=500_000_000, le=10_000 * 10**9)
    memory_gib_reported: float | None = Field(default=None, ge=0.5, le=10_000)
    memory_type: str | None = None
    hbm_bandwidth_tb_s: float = Field(ge=0.01, le=1_000)
    bf16_dense_tflops: float | None = Field(default=None, ge=0.1, le=1_000_000)
    fp8_dense_tflops: float | None = Field(default=None, ge=0.1, le=1_000_000)
    int8_dense_tops: float | None = Field(default=None, ge=0.1, le=1_000_000)
    fp4_dense_tflops: float | None = Field(default=None, ge=0.1, le=1_000_000)
    interconnect: str = Field(default="PCIe", max_length=200)
    interconnect_gb_s: float | None = Field(default=None, ge=0.1, le=1_000_000)
    host_link_gb_s: float | None = Field(default=None, ge=0.1, le=1_000_000)
    nic: str | None = Field(default=None, max_length=200)
    nic_gb_s: float | None = Field(default=None, ge=0.1, le=1_000_000)  # per GPU, one direction
    link_latency_us: float | None = Field(default=None, ge=0.01, le=100_000)
    nic_latency_us: float | None = Field(default=None, ge=0.01, le=100_000)
    tdp_w: float | None = Field(default=None, gt=0, le=100_000)
    rent_usd_per_hour: float | None = Field(default=None, gt=0, le=100_000)
    rent_source: str | None = None
    rent_date: str | None = None
    purchase_usd: float | None = Field(default=None, gt=0, le=100_000_000)
    purchase_source: str | None = None
    purchase_date: str | None = None
    sources: list[str] = []
    notes: str | None = None


class ModelRowSchema(BaseModel):
    """One ``[[model]]`` table of models.toml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=3)
    file: str
    aliases: list[str] = []
    family: str = ""
    published_params_total: float = Field(gt=0)
    published_params_active: float = Field(gt=0)
    active_counts_input_embedding: bool = True
    published_params_rounded: bool = False
    params_source: str = Field(min_length=1)
    params_note: str = ""
    config_source: str = Field(min_length=1)
    config_confidence: str = ""
    notes: str = ""
