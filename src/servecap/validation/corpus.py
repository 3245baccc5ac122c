"""Load the corpus of published measurements shipped in ``validation/data`` (one TOML per source).

``load_corpus()`` returns every row with its source, in file order; a row's full id is
``source/row``. The train/test split is a fixed rule: a row is in the test half when the first
byte of the SHA-256 of its full id is odd (about half, stable across machines and row order).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from servecap.errors import ServecapError, did_you_mean, from_validation_error
from servecap.specs.engines import engine_id_for_source, engine_profile
from servecap.validation.schema import CorpusFile, EngineLimits, Row, Source

Split = Literal["train", "test", "all"]
SPLITS: tuple[Split, ...] = ("train", "test", "all")


@dataclass(frozen=True, slots=True)
class CorpusRow:
    source: Source
    row: Row

    @property
    def full_id(self) -> str:
        return f"{self.source.name}/{self.row.id}"

    @property
    def split(self) -> Literal["train", "test"]:
        return split_of(self.full_id)

    @property
    def engine(self) -> str:
        """The engine profile the row is simulated with (:mod:`servecap.specs.engines`): the
        row's own, else its source's engine by name."""
        if self.row.engine is not None:
            return engine_profile(self.row.engine).id
        return engine_id_for_source(self.source.engine)

    @property
    def limits(self) -> EngineLimits:
        """The row's engine limits over its source's (a row's value wins field by field)."""
        base = self.source.engine_limits.model_dump()
        if self.row.engine_limits is not None:
            base.update({k: v for k, v in self.row.engine_limits.model_dump().items() if v is not None})
        return EngineLimits.model_validate(base)


def split_of(full_id: str) -> Literal["train", "test"]:
    """The fixed split rule: odd first byte of sha256(full id) -> test."""
    return "test" if hashlib.sha256(full_id.encode("utf-8")).digest()[0] % 2 else "train"


def data_files() -> list[Path]:
    """The corpus files shipped with the package, sorted by name."""
    root = resources.files("servecap.validation") / "data"
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".toml"))


def load_file(path: Path) -> CorpusFile:
    """One corpus file; errors name the file, the field and the value in one line."""
    from servecap.files import load_document

    raw = load_document(path, "corpus", fmt="toml")
    try:
        return CorpusFile.model_validate(raw)
    except ValidationError as err:
        raise from_validation_error(err, path.name) from None


def load_corpus(paths: list[Path] | None = None) -> list[CorpusRow]:
    """Every row of every corpus file; source names and full row ids must be unique."""
    rows: list[CorpusRow] = []
    names: set[str] = set()
    for path in paths if paths is not None else data_files():
        f = load_file(path)
        if f.source.name in names:
            raise ServecapError("source.name", f.source.name, f"appears in more than one file ({path.name})")
        names.add(f.source.name)
        rows.extend(CorpusRow(f.source, r) for r in f.rows)
    return rows


def select(rows: list[CorpusRow], *, source: str | None = None, split: str = "all") -> list[CorpusRow]:
    """Rows of one source (by name) and split; an unknown name or split is one clear error."""
    if split not in SPLITS:
        raise ServecapError("split", split, "must be one of " + ", ".join(SPLITS))
    if source is not None:
        names = sorted({r.source.name for r in rows})
        if source not in names:
            raise ServecapError("source", source, "no such source in the corpus" + did_you_mean(source, names))
        rows = [r for r in rows if r.source.name == source]
    if split != "all":
        rows = [r for r in rows if r.split == split]
    return rows
