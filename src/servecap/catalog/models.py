"""The model catalog: real Hugging Face config.json files shipped in ``data/models/``, indexed by
``data/models.toml`` (hub id, aliases, published parameter counts and their sources).

``--model`` takes a catalog id or alias (case-insensitive; the org prefix may be left out) or a
path to any local config.json.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from servecap.catalog.hf_config import load_config_file, parse_config
from servecap.catalog.names import normalize_name
from servecap.errors import ServecapError, did_you_mean
from servecap.specs.model import ModelSpec


@dataclass(frozen=True, slots=True)
class ModelRow:
    """One ``[[model]]`` table of models.toml (schema: catalog/schema.py ModelRowSchema)."""

    id: str
    file: str
    published_params_total: float
    published_params_active: float
    params_source: str
    config_source: str
    aliases: tuple[str, ...] = field(default=())
    family: str = ""
    active_counts_input_embedding: bool = True  # does the publisher's active figure include it?
    published_params_rounded: bool = False  # the figure is a size label ("405B"), not a count
    params_note: str = ""
    config_confidence: str = ""
    notes: str = ""


def _data_dir() -> resources.abc.Traversable:
    return resources.files("servecap.catalog").joinpath("data")


def builtin_model_tables() -> list[dict[str, Any]]:
    tables: list[dict[str, Any]] = tomllib.loads(_data_dir().joinpath("models.toml").read_text("utf-8"))["model"]
    return tables


@cache
def model_catalog() -> tuple[ModelRow, ...]:
    return tuple(ModelRow(**{**row, "aliases": tuple(row.get("aliases", ()))}) for row in builtin_model_tables())


@cache
def _index() -> dict[str, ModelRow]:
    table: dict[str, ModelRow] = {}
    for row in model_catalog():
        for name in (row.id, row.id.split("/", 1)[-1], *row.aliases):
            table.setdefault(normalize_name(name), row)
    return table


def catalog_row(name: str) -> ModelRow | None:
    return _index().get(normalize_name(name))


@cache
def load_catalog_model(model_id: str) -> ModelSpec:
    row = next(r for r in model_catalog() if r.id == model_id)
    raw = json.loads(_data_dir().joinpath("models", row.file).read_text("utf-8"))
    return parse_config(raw, model_id=row.id, source=row.config_source)


def resolve_model(name: str) -> ModelSpec:
    """A catalog id/alias, or a path to a config.json (a file, or a folder holding one)."""
    if not name.strip():
        raise ServecapError("model", name, "empty model name")
    row = catalog_row(name)
    if row is not None:
        return load_catalog_model(row.id)
    path = Path(name).expanduser()
    try:
        if path.is_dir():
            path = path / "config.json"
        exists = path.exists()
    except (OSError, ValueError):  # a name too long for a path, or holding a NUL byte
        exists = False
    if exists or name.endswith(".json") or name.startswith((".", "/", "~")):
        raw = load_config_file(path)
        return parse_config(raw, model_id=str(path), source=str(path))
    known = [r.id for r in model_catalog()]
    hint = did_you_mean(name, known) or did_you_mean(name.split("/")[-1], [k.split("/")[-1] for k in known])
    raise ServecapError(
        "model", name, "unknown model" + hint + "; `servecap models` lists them, or pass a path to a config.json"
    )


def resolve_draft_model(name: str | None) -> ModelSpec | None:
    """A speculative-decoding draft model, as :func:`resolve_model` finds it; a failed lookup
    names ``draft_model`` (``None``: no draft model)."""
    if name is None:
        return None
    try:
        return resolve_model(name)
    except ServecapError as err:
        raise ServecapError("draft_model", name, err.problem) from None
