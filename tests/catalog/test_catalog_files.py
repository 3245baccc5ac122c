"""The shipped catalogs pass the same pydantic schemas a user's file must pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecap.catalog.gpus import builtin_gpu_tables, gpu_aliases
from servecap.catalog.models import builtin_model_tables
from servecap.catalog.names import normalize_name
from servecap.catalog.schema import GpuRow, ModelRowSchema

DATA = Path(__file__).parents[2] / "src" / "servecap" / "catalog" / "data"


@pytest.mark.parametrize("table", builtin_gpu_tables(), ids=lambda t: t["id"])
def test_gpu_rows_validate_and_cite(table: dict) -> None:  # type: ignore[type-arg]
    row = GpuRow.model_validate(table)
    assert row.sources, f"{row.id} has no sources"
    if row.rent_usd_per_hour is not None:
        assert row.rent_source and row.rent_date
    if row.purchase_usd is not None:
        assert row.purchase_source and row.purchase_date


@pytest.mark.parametrize("table", builtin_model_tables(), ids=lambda t: t["id"])
def test_model_rows_validate(table: dict) -> None:  # type: ignore[type-arg]
    row = ModelRowSchema.model_validate(table)
    assert (DATA / "models" / row.file).is_file()


def test_names_are_unique() -> None:
    """No spelling may point at two GPUs (aliases that normalize alike, e.g. GeForce-RTX-3090 and
    RTX-3090, are fine when they name the same GPU)."""
    owners: dict[str, set[str]] = {}
    for t in builtin_gpu_tables():
        for n in (t["id"], *t.get("aliases", ())):
            owners.setdefault(normalize_name(n), set()).add(t["id"])
    assert all(len(ids) == 1 for ids in owners.values())
    assert len(gpu_aliases()) == len(owners)
    model_names = [normalize_name(n) for t in builtin_model_tables() for n in (t["id"], *t.get("aliases", ()))]
    assert len(model_names) == len(set(model_names))


def test_catalog_sizes() -> None:
    assert len(builtin_gpu_tables()) >= 20
    assert len(builtin_model_tables()) >= 25
