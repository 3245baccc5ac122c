"""The catalogs as rows: ``servecap gpus --json``, ``servecap models --json`` and the API's
``/api/v1/gpus`` and ``/api/v1/models`` (with an optional search)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TypedDict

from servecap.catalog.names import normalize_name
from servecap.json_object import JsonObject


class ModelRow(TypedDict):
    """One catalog model as ``servecap models --json`` lists it (KV at the model dtype, TP 1)."""

    id: str
    model_type: str
    layers: int
    layer_kinds: list[str]
    params_total: int
    params_active: int
    kv_bytes_per_token: int
    sliding_kv_bytes_per_token: int
    state_bytes_per_request: int
    max_position_embeddings: int


def _matches(query: str | None, *names: str) -> bool:
    if not query:
        return True
    q = normalize_name(query)
    return any(q in normalize_name(n) for n in names)


def gpu_rows(gpu_file: Path | None = None, query: str | None = None) -> list[JsonObject]:
    """Every catalog GPU (and a ``gpu_file``'s) with its memory as vLLM sees it: the GPU spec's
    fields as they are (a JSON object per GPU, as the spec dataclass grows)."""
    from servecap.catalog import gpu_catalog, load_gpu_file

    gpus = list(gpu_catalog()) + (load_gpu_file(gpu_file) if gpu_file else [])
    return [
        {**asdict(g), "total_memory_bytes": g.total_memory_bytes, "total_memory_basis": g.total_memory_basis}
        for g in gpus
        if _matches(query, g.id, g.name)
    ]


def model_rows(query: str | None = None) -> list[ModelRow]:
    """Every catalog model with its parameters and KV bytes per token (model dtype, TP 1)."""
    from servecap.catalog.models import load_catalog_model, model_catalog
    from servecap.core.kv import kv_bytes_per_token, resolve_kv_dtype, sliding_bytes_per_token, state_bytes_per_request
    from servecap.core.params import param_counts

    rows: list[ModelRow] = []
    for row in model_catalog():
        if not _matches(query, row.id, *row.aliases):
            continue
        m = load_catalog_model(row.id)
        p = param_counts(m)
        kv = resolve_kv_dtype("auto", m)
        rows.append(
            {
                "id": row.id,
                "model_type": m.model_type,
                "layers": m.num_layers,
                "layer_kinds": sorted({layer.mixer.value for layer in m.layers}),
                "params_total": p.total,
                "params_active": p.active,
                "kv_bytes_per_token": kv_bytes_per_token(m, 1, kv),
                "sliding_kv_bytes_per_token": sliding_bytes_per_token(m, 1, kv),
                "state_bytes_per_request": state_bytes_per_request(m, 1),
                "max_position_embeddings": m.max_position_embeddings,
            }
        )
    return rows
