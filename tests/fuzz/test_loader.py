"""servecap.files, the one loader: regular files only, the size cap, UTF-8, the depth and
value-count caps (YAML aliases counted as they expand), NaN refused in JSON, standard JSON out."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servecap.errors import ServecapError
from servecap.files import (
    MAX_DEPTH,
    dumps_json,
    load_document,
    loads_json,
    parse_document,
    read_bytes,
    read_text,
)


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    with pytest.raises(ServecapError, match=r"^workload='.*': is a directory, not a file$"):
        read_bytes(tmp_path, "workload")
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ServecapError, match="is not a regular file"):
        read_bytes(fifo, "workload")  # never opened: a FIFO would block the read
    with pytest.raises(ServecapError, match="no such file"):
        read_bytes(tmp_path / "nope.yaml", "workload")


def test_the_size_cap_names_the_file_and_the_cap(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a" * 3_000_000)
    with pytest.raises(ServecapError, match=r"^fleet='.*big.yaml': is 3 MiB, over the 2 MiB limit for this file$"):
        read_bytes(big, "fleet", max_bytes=2 * 1024 * 1024)


def test_text_is_utf8_or_one_error_with_the_offset(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    p.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(ServecapError, match=r"is not UTF-8 text \(byte 0xff at offset 7\)"):
        read_text(p, "model")
    p.write_bytes(b"\x00\x01")
    with pytest.raises(ServecapError, match="NUL byte at offset 0"):
        read_text(p, "model")
    p.write_bytes("\ufeff{}".encode())  # a byte-order mark is fine
    assert load_document(p, "model", fmt="json") == {}


@pytest.mark.parametrize("fmt", ["json", "yaml", "toml"])
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 10_000, 200_000])
def test_deep_nesting_is_refused_without_recursion_error(fmt: str, depth: int) -> None:
    text = "[" * depth + "]" * depth
    if fmt == "toml":
        text = "a = " + text
    with pytest.raises(ServecapError, match="nests deeper than the 64-level limit"):
        parse_document(text, fmt, "file", "x")  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["json", "yaml", "toml"])
def test_nesting_at_the_limit_is_read(fmt: str) -> None:
    inner = "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1)  # under a top-level mapping: MAX_DEPTH levels
    text = {"json": '{"a": ' + inner + "}", "yaml": "a: " + inner, "toml": "a = " + inner}[fmt]
    doc = parse_document(text, fmt, "file", "x")  # type: ignore[arg-type]
    for _ in range(MAX_DEPTH - 1):
        doc = doc["a"] if isinstance(doc, dict) else doc[0]
    assert doc == [1]


def _bomb(levels: int) -> str:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines)


def test_an_alias_bomb_is_refused_while_composed() -> None:
    t0 = time.monotonic()
    with pytest.raises(ServecapError, match="alias bomb"):
        parse_document(_bomb(9), "yaml", "workload", "w.yaml")  # 10**10 values once expanded
    assert time.monotonic() - t0 < 0.5


def test_a_few_aliases_are_fine() -> None:
    doc = parse_document("base: &b {rate: 1}\nother: *b\n", "yaml", "workload", "w.yaml")
    assert doc == {"base": {"rate": 1}, "other": {"rate": 1}}


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(ServecapError, match="nests deeper"):
        parse_document("a: &a [*a]\n", "yaml", "workload", "w.yaml")


def test_yaml_is_safe_loaded() -> None:
    with pytest.raises(ServecapError, match="malformed YAML"):
        parse_document("!!python/object/apply:os.system ['true']\n", "yaml", "workload", "w.yaml")


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": Infinity}', '{"a": -Infinity}'])
def test_json_nan_and_infinity_are_refused(text: str) -> None:
    with pytest.raises(ServecapError, match="is not a JSON number"):
        loads_json(text, "calibration", "c.json")


def test_a_huge_integer_is_one_error() -> None:
    with pytest.raises(ServecapError, match="malformed JSON: Exceeds the limit"):
        loads_json('{"a": 1' + "0" * 5000 + "}", "model", "c.json")


def test_the_format_comes_from_the_suffix(tmp_path: Path) -> None:
    p = tmp_path / "w.txt"
    p.write_text("a: 1")
    with pytest.raises(ServecapError, match=r"must be a \.json, \.yaml, \.yml file"):
        load_document(p, "workload")


@given(st.binary(max_size=400))
def test_any_bytes_are_a_document_or_one_error(data: bytes) -> None:
    from servecap.files import decode_text

    for fmt in ("json", "yaml", "toml"):
        try:
            parse_document(decode_text(data, "file", "x"), fmt, "file", "x")  # type: ignore[arg-type]
        except ServecapError as err:
            assert "\n" not in str(err)


def test_json_out_is_standard() -> None:
    text = dumps_json({"rent": float("inf"), "p99": float("nan"), "rows": [1.5, float("-inf")], "t": (1, 2)})
    assert json.loads(text) == {"rent": None, "p99": None, "rows": [1.5, None], "t": [1, 2]}
    assert "Infinity" not in text and "NaN" not in text
