"""The one way in for files: every config, fleet, workload, GPU, calibration, corpus, sweep,
plan and trace file is read here, with the same bounds and the same one-line errors.

- only regular files are read (a directory, a FIFO, a device is refused by name), at most
  ``max_bytes`` of them (the file and the cap are named);
- text is UTF-8 (a byte order mark is allowed) or the error gives the offset of the first bad byte;
- JSON, YAML and TOML documents nest at most :data:`MAX_DEPTH` deep and hold at most
  :data:`MAX_NODES` values once YAML aliases are expanded, so a 600-byte alias bomb is refused
  while it is composed, not after it has been expanded into gigabytes;
- JSON's non-standard ``NaN`` and ``Infinity`` are refused (finite numbers are the models' job:
  their ``allow_inf_nan=False``); YAML is read with PyYAML's safe loader only.

Errors are :class:`~servecap.errors.ServecapError` with the caller's field name (``workload``,
``gpu_file``) and the path as the value.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tomllib
from pathlib import Path
from typing import Any, Literal

from servecap.errors import ServecapError

MAX_DOC_BYTES = 16 * 1024 * 1024
"""Largest config-like document (JSON/YAML/TOML): 16 MiB (a Hugging Face config.json is ~2 KiB)."""
MAX_DATA_BYTES = 512 * 1024 * 1024
"""Largest data file (a request trace, a list of numbers): 512 MiB."""
MAX_DEPTH = 64
"""Deepest nesting of lists and mappings in a document (real files nest fewer than 10)."""
MAX_NODES = 1_000_000
"""Most values in one document, counting every YAML alias as the copy it expands to."""

Format = Literal["json", "yaml", "toml"]
_SUFFIXES: dict[str, Format] = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml"}


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / 1024 / 1024:,.0f} MiB" if n_bytes >= 1024 * 1024 else f"{n_bytes:,} bytes"


def read_bytes(path: Path | str, field: str, *, max_bytes: int = MAX_DOC_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; anything else is one error naming
    ``field`` and the path (missing, a directory, not a regular file, unreadable, too large)."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ServecapError(field, str(path), "no such file") from None
    except OSError as err:
        raise ServecapError(field, str(path), f"cannot be read ({err.strerror or err})") from None
    if stat.S_ISDIR(info.st_mode):
        raise ServecapError(field, str(path), "is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise ServecapError(field, str(path), "is not a regular file")
    if info.st_size > max_bytes:
        raise ServecapError(
            field, str(path), f"is {_mib(info.st_size)}, over the {_mib(max_bytes)} limit for this file"
        )
    try:
        with open(path, "rb", buffering=0) as fh:
            data = fh.read(max_bytes + 1)  # a file growing while read is still bounded
    except OSError as err:
        raise ServecapError(field, str(path), f"cannot be read ({err.strerror or err})") from None
    if len(data) > max_bytes:
        raise ServecapError(field, str(path), f"is over the {_mib(max_bytes)} limit for this file")
    return data


def decode_text(data: bytes, field: str, value: object) -> str:
    """``data`` as UTF-8 (a leading byte order mark dropped), or one error with the offset."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ServecapError(
            field, value, f"is not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}); binary file?"
        ) from None
    if "\x00" in text:
        raise ServecapError(field, value, f"holds a NUL byte at offset {text.index(chr(0))}: a binary file, not text")
    return text


def first_text_line(path: Path, *, max_line_bytes: int = 1 << 20, max_lines: int = 1000) -> str | None:
    """The first non-blank line of a regular file, read alone (at most ``max_lines`` lines of at
    most ``max_line_bytes`` each), to tell a format by; None for anything else (not a regular file,
    unreadable, no such line): the reader of the format then names it. A FIFO is never opened (the
    open would wait for a writer) and a line without end is never read whole (``/dev/zero``)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        with path.open(encoding="utf-8", errors="replace") as f:
            for _ in range(max_lines):
                line = f.readline(max_line_bytes)
                if not line:
                    return None
                if line.strip():
                    return line
    except OSError:
        return None
    return None


def read_text(path: Path | str, field: str, *, max_bytes: int = MAX_DOC_BYTES) -> str:
    """A regular UTF-8 text file of at most ``max_bytes`` (see :func:`read_bytes`)."""
    return decode_text(read_bytes(path, field, max_bytes=max_bytes), field, str(path))


def format_of(path: Path | str, field: str, allowed: tuple[Format, ...]) -> Format:
    """The document format from the file's suffix, refused unless it is one of ``allowed``."""
    fmt = _SUFFIXES.get(Path(path).suffix.lower())
    if fmt is None or fmt not in allowed:
        names = ", ".join(s for s, f in _SUFFIXES.items() if f in allowed)
        raise ServecapError(field, str(path), f"must be a {names} file")
    return fmt


def load_document(
    path: Path | str,
    field: str,
    *,
    formats: tuple[Format, ...] = ("yaml", "json"),
    fmt: Format | None = None,
    max_bytes: int = MAX_DOC_BYTES,
    mapping: bool = True,
) -> Any:
    """Read and parse one document: the format from the suffix (one of ``formats``) unless
    ``fmt`` is given; with ``mapping`` the top level must be a mapping."""
    fmt = fmt or format_of(path, field, formats)
    text = read_text(path, field, max_bytes=max_bytes)
    return parse_document(text, fmt, field, str(path), mapping=mapping)


def parse_document(text: str, fmt: Format, field: str, value: object, *, mapping: bool = False) -> Any:
    """Parse ``text`` as ``fmt`` within the depth and size bounds; errors name ``field`` and
    ``value`` (the path, or the text of a flag)."""
    parse = {"json": _parse_json, "yaml": _parse_yaml, "toml": _parse_toml}[fmt]
    try:
        raw = parse(text)
    except _TooBig as err:
        raise ServecapError(field, value, str(err)) from None
    except RecursionError:
        raise ServecapError(field, value, f"nests deeper than the {MAX_DEPTH}-level limit") from None
    except _Malformed as err:
        raise ServecapError(field, value, f"malformed {fmt.upper()}: {err}") from None
    check_shape(raw, field, value)
    if mapping and not isinstance(raw, dict):
        raise ServecapError(field, value, "must contain one mapping (key: value) at the top")
    return raw


def loads_json(text: str, field: str, value: object | None = None) -> Any:
    """Parse JSON text (a flag's value, one line of a trace) within the same bounds."""
    return parse_document(text, "json", field, text if value is None else value)


def check_shape(raw: Any, field: str, value: object) -> None:
    """Refuse a parsed value nesting deeper than :data:`MAX_DEPTH` or holding more than
    :data:`MAX_NODES` values (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(raw, 1)]  # (value, its level: the top-level container is 1)
    seen = 0
    while stack:
        node, level = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise ServecapError(field, value, f"holds more than {MAX_NODES:,} values")
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if level > MAX_DEPTH:
            raise ServecapError(field, value, f"nests deeper than the {MAX_DEPTH}-level limit")
        stack.extend((child, level + 1) for child in children)


class _Malformed(Exception):
    """A syntax error, with a short position-bearing message."""


class _TooBig(Exception):
    """A document over the depth or value-count bound."""


def _refuse_constant(name: str) -> float:
    raise _Malformed(f"{name} is not a JSON number (write a finite number)")


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as err:
        raise _Malformed(f"{err.msg} at line {err.lineno}") from None
    except ValueError as err:  # an integer of more digits than Python converts
        raise _Malformed(str(err).split(";")[0]) from None


def _parse_toml(text: str) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise _Malformed(str(err)) from None
    except ValueError as err:
        raise _Malformed(str(err).split(";")[0]) from None


def _parse_yaml(text: str) -> Any:
    import yaml

    loader = None
    try:
        loader = _bounded_loader_class()(text)  # its reader refuses control characters at once
        return loader.get_single_data()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise _Malformed(f"{err.problem or err.context or 'syntax error'}{where}") from None
    except yaml.YAMLError as err:
        raise _Malformed(str(err).splitlines()[0]) from None
    except ValueError as err:
        raise _Malformed(str(err).split(";")[0]) from None
    finally:
        if loader is not None:
            loader.dispose()


_LOADER: list[type] = []


def _bounded_loader_class() -> type:
    """PyYAML's SafeLoader, composing at most :data:`MAX_DEPTH` deep and :data:`MAX_NODES`
    nodes with every alias counted as the size of the subtree it names (built once; yaml is
    an optional dependency, imported here only)."""
    if _LOADER:
        return _LOADER[0]
    import yaml

    class BoundedSafeLoader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.depth = 0
            self.expanded = 0
            self.sizes: dict[int, int] = {}

        def count(self, n: int) -> None:
            self.expanded += n
            if self.expanded > MAX_NODES:
                raise _TooBig(f"holds more than {MAX_NODES:,} values once its aliases are expanded (an alias bomb?)")

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                anchor = self.peek_event().anchor  # type: ignore[no-untyped-call]
                node = self.anchors.get(anchor)
                if node is not None:
                    self.count(self.sizes.get(id(node), 1))
                return super().compose_node(parent, index)
            level = 0 if self.check_event(yaml.ScalarEvent) else 1  # containers make the levels
            self.depth += level
            if self.depth > MAX_DEPTH:
                raise _TooBig(f"nests deeper than the {MAX_DEPTH}-level limit")
            before = self.expanded
            self.count(1)
            node = super().compose_node(parent, index)
            self.depth -= level
            self.sizes[id(node)] = self.expanded - before
            return node

    _LOADER.append(BoundedSafeLoader)
    return BoundedSafeLoader


def finite_or_none(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±infinity) replaced by ``None``, through
    dicts, lists and tuples: what JSON output holds instead of the non-standard ``Infinity``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value


def dumps_json(value: Any, *, indent: int | None = 2) -> str:
    """Standard JSON (never a bare ``Infinity`` or ``NaN``): non-finite floats become ``null``."""
    return json.dumps(finite_or_none(value), indent=indent, allow_nan=False, default=str)


def is_regular_file(path: Path | str) -> bool:
    """Whether ``path`` names an existing regular file (not a directory, FIFO or device)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False
