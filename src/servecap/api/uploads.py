"""Uploaded ``config.json`` files, kept by content so a shared link can name them.

An upload is parsed (so a bad config is refused at once, with the parser's one-line error),
written as ``<sha256[:16]>.json`` under the server's upload folder, and named
``upload:<sha256[:16]>`` from then on: the same config always gets the same name, and a link
with it reproduces the view for as long as the server keeps the file. The folder is bounded
(:class:`UploadQuota`: total bytes and number of files); past either, the least recently used
uploads are deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servecap.errors import ServecapError

PREFIX = "upload:"
_ID = re.compile(r"^[0-9a-f]{16}$")
MAX_CONFIG_BYTES = 1_000_000


@dataclass(frozen=True, slots=True)
class UploadQuota:
    """What the upload folder may hold; past either figure the least recently used uploads go."""

    max_total_bytes: int = 200_000_000
    max_files: int = 1_000


_LOCK = threading.Lock()  # uploads are stored from FastAPI's thread pool


def store_config(
    folder: Path, config: dict[str, Any], quota: UploadQuota | None = None, max_layers: int = 1_000
) -> tuple[str, Path]:
    """Validate and keep ``config``; returns its ``upload:<id>`` name and its path. The least
    recently used uploads are evicted to keep the folder within ``quota``. A layer count past
    ``max_layers`` is refused before the config is parsed (its per-layer tables grow with it)."""
    from servecap.catalog.hf_config import parse_config

    quota = quota or UploadQuota()
    _check_layers(config, max_layers)
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    if len(text) > MAX_CONFIG_BYTES:
        raise ServecapError("config", f"{len(text):,} bytes", f"is larger than {MAX_CONFIG_BYTES:,} bytes")
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    parse_config(config, model_id=PREFIX + digest, source="upload")  # raises the parser's one line
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{digest}.json"
    with _LOCK:
        if path.exists():
            os.utime(path)  # used again: the last to be evicted
        else:
            _evict(folder, quota, incoming_bytes=len(text))
            tmp = path.with_suffix(f".{secrets.token_hex(4)}.tmp")
            tmp.write_text(text, "utf-8")
            tmp.replace(path)
    return PREFIX + digest, path


def _check_layers(config: dict[str, Any], max_layers: int) -> None:
    """Refuse a layer count over ``max_layers`` (at the top or in a nested ``text_config``)."""
    from servecap.app.limits import API_LIMITS, WorkLimits, check_layers

    limits = WorkLimits(max_layers=max_layers, knobs=API_LIMITS.knobs)
    for where, node in (("config", config), ("config.text_config", config.get("text_config"))):
        if not isinstance(node, dict):
            continue
        for key in ("num_hidden_layers", "n_layer", "num_layers"):
            value = node.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
                check_layers(int(min(value, 1e18)), limits, where=f"{where}.{key}")


def _evict(folder: Path, quota: UploadQuota, incoming_bytes: int) -> None:
    """Delete the least recently used uploads until one more of ``incoming_bytes`` fits."""
    files = []
    for p in folder.glob("*.json"):
        try:
            st = p.stat()
        except FileNotFoundError:
            continue
        files.append((st.st_mtime, p.name, st.st_size, p))
    files.sort()
    total = sum(f[2] for f in files)
    while files and (len(files) + 1 > quota.max_files or total + incoming_bytes > quota.max_total_bytes):
        _mtime, _name, size, p = files.pop(0)
        p.unlink(missing_ok=True)
        total -= size


def uploaded_path(folder: Path, name: str, field: str = "model") -> Path:
    """The file of ``upload:<id>`` (the id checked by pattern before any path is built)."""
    digest = name[len(PREFIX) :]
    if not _ID.match(digest):
        raise ServecapError(field, name, "not an upload id (upload:<16 hex digits>)")
    path = folder / f"{digest}.json"
    try:
        os.utime(path)  # recently used: evicted last
    except FileNotFoundError:
        raise ServecapError(field, name, "no such uploaded config (upload it again)") from None
    return path
