"""Uploaded ``config.json`` files, kept by content so a shared link can name them.

An upload is parsed (so a bad config is refused at once, with the parser's one-line error),
written as ``<sha256[:16]>.json`` under the server's upload folder, and named
``upload:<sha256[:16]>`` from then on: the same config always gets the same name, and a link
with it reproduces the view for as long as the server keeps its folder.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from servecap.errors import ServecapError

PREFIX = "upload:"
_ID = re.compile(r"^[0-9a-f]{16}$")
MAX_CONFIG_BYTES = 1_000_000


def store_config(folder: Path, config: dict[str, Any]) -> tuple[str, Path]:
    """Validate and keep ``config``; returns its ``upload:<id>`` name and its path."""
    from servecap.catalog.hf_config import parse_config

    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    if len(text) > MAX_CONFIG_BYTES:
        raise ServecapError("config", f"{len(text):,} bytes", f"is larger than {MAX_CONFIG_BYTES:,} bytes")
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    parse_config(config, model_id=PREFIX + digest, source="upload")  # raises the parser's one line
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{digest}.json"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, "utf-8")
        tmp.replace(path)
    return PREFIX + digest, path


def resolve_model_name(folder: Path, name: str | None) -> str | None:
    """A catalog name passes through; ``upload:<id>`` becomes its file's path; a file path sent
    over HTTP is refused (the server's files are not the client's)."""
    if name is None:
        return None
    if name.startswith(PREFIX):
        digest = name[len(PREFIX) :]
        path = folder / f"{digest}.json"
        if not _ID.match(digest) or not path.exists():
            raise ServecapError("model", name, "no such uploaded config (upload it again)")
        return str(path)
    if name.endswith(".json") or name.startswith((".", "/", "~")) or ("/" in name and Path(name).exists()):
        raise ServecapError("model", name, "paths are not accepted over HTTP: upload the config.json instead")
    return name
