"""Names in request bodies, resolved the API's way: catalog entries and uploaded content ids only.

The CLI reads paths (``--model ./config.json``, ``gpu_file:``, an empirical ``path:``); the
server never does. Every model named in a body (a plan's ``model``, a fleet pool's, a fleet
plan's candidates, ``small_model``) must be a catalog id or alias, or ``upload:<id>`` of a config
uploaded to this server; every field that names a file (``gpu_file``, ``calibration``, a trace's
or an empirical distribution's ``path``) is refused. The check is on the name alone: the
filesystem is not touched, so a refusal says nothing about whether a file exists.

``upload:<id>`` is rewritten to the uploaded file's path (a file this server wrote) before the
body reaches the use case, which then reads it as the CLI reads a path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from servecap.api.uploads import PREFIX, uploaded_path
from servecap.errors import ServecapError, did_you_mean

MODEL_FIELDS = frozenset({"model", "small_model", "draft_model"})
"""Fields (at any depth of a fleet, workload or plan body) that name a model."""
FILE_FIELDS = frozenset({"path", "gpu_file", "calibration"})
"""Fields that name a file: accepted by the CLI, refused by the server."""
GPU_FIELDS = frozenset({"gpu"})
"""Fields that name a GPU: the catalog's (the server reads no GPU files)."""


def body_model(upload_dir: Path, name: str | None) -> str | None:
    """:func:`api_model` of a body's optional ``model`` (None: the use case's default)."""
    return None if name is None else api_model(upload_dir, name)


def api_model(upload_dir: Path, name: object, field: str = "model") -> str:
    """A catalog model's name as given, or an upload's file path; anything else is refused by
    name only (no ``Path(name)``, no ``exists()``)."""
    from servecap.catalog.models import catalog_row, model_catalog

    if not isinstance(name, str):
        raise ServecapError(field, name, "must be a model name (a catalog id or upload:<id>)")
    if name.startswith(PREFIX):
        return str(uploaded_path(upload_dir, name, field))
    if catalog_row(name) is not None:
        return name
    if not name.strip():
        raise ServecapError(field, name, "empty model name")
    if _looks_like_path(name):
        raise ServecapError(
            field,
            name,
            "file paths are not accepted by the server: upload the config.json (POST /api/v1/models/upload) "
            "and name it upload:<id>",
        )
    known = [r.id for r in model_catalog()]
    hint = did_you_mean(name, known) or did_you_mean(name.split("/")[-1], [k.split("/")[-1] for k in known])
    raise ServecapError(
        field,
        name,
        "unknown model" + hint + "; the server takes catalog models (GET /api/v1/models) or an uploaded "
        "config's upload:<id> (POST /api/v1/models/upload), never a file path",
    )


def _looks_like_path(name: str) -> bool:
    """A name shaped like a path rather than a hub id (``org/name``), judged by its text alone."""
    return (
        name.startswith((".", "/", "~"))
        or "\\" in name
        or name.count("/") > 1
        or ".." in name
        or name.lower().endswith((".json", ".toml", ".yaml", ".yml", ".txt", ".md"))
    )


def api_gpu(name: object, field: str = "gpu") -> str:
    """A catalog GPU's name (the server reads no GPU files)."""
    from servecap.catalog import lookup_gpu

    if not isinstance(name, str):
        raise ServecapError(field, name, "must be a GPU name (GET /api/v1/gpus lists them)")
    try:
        lookup_gpu(name)
    except ServecapError as err:
        raise ServecapError(field, name, err.problem) from None
    return name


def _is_sample(value: object) -> bool:
    """A shipped trace sample (``sample:<name>``): the server reads those, and only those."""
    from servecap.workload.samples import SAMPLES, trace_path

    if not isinstance(value, str) or not value.startswith("sample:"):
        return False
    trace_path(value)  # an unknown sample is refused by name
    return value[len("sample:") :] in SAMPLES


def refuse_file_field(field: str, value: object) -> None:
    raise ServecapError(field, value, "file paths are not accepted by the server: give the values in the body")


def check_spec(spec: BaseModel, raw: dict[str, Any], root: str, upload_dir: Path) -> None:
    """Walk a validated fleet, workload or plan body: refuse every file field that is set, check
    every GPU and model name, and rewrite ``upload:<id>`` names in ``raw`` (the mapping ``spec`` was
    validated from, which the job receives) to the uploaded file's path."""
    for loc, key, value in _named_fields(spec, ()):
        field = root + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in (*loc, key))
        if key in FILE_FIELDS and value is not None and not (key == "path" and _is_sample(value)):
            refuse_file_field(field, value)
        if key in GPU_FIELDS and value is not None:
            api_gpu(value, field)
        if key in MODEL_FIELDS and value is not None:
            resolved = api_model(upload_dir, value, field)
            if resolved != value:
                _set(raw, (*loc, key), resolved)


def _named_fields(obj: object, loc: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str, object]]:
    """(location of the parent, field name, value) for every field of every model inside ``obj``."""
    if isinstance(obj, BaseModel):
        for key in type(obj).model_fields:
            value = getattr(obj, key)
            yield loc, key, value
            yield from _named_fields(value, (*loc, key))
    elif isinstance(obj, list | tuple):
        for i, item in enumerate(obj):
            yield from _named_fields(item, (*loc, i))
    elif isinstance(obj, dict):
        for k, item in obj.items():
            yield from _named_fields(item, (*loc, str(k)))


def _set(raw: Any, loc: tuple[str | int, ...], value: str) -> None:
    node = raw
    for part in loc[:-1]:
        node = node[part]
    if isinstance(node, dict) and loc[-1] in node:
        node[loc[-1]] = value
    else:  # the name came from a default, not the body: it is a catalog name, never an upload
        raise ServecapError(".".join(map(str, loc)), value, "internal error: an upload name not found in the body")
