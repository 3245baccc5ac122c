"""The streamed Mooncake reader's shortcut for plain lines reads every line as the whole checks
do (``json_line_object`` then ``mooncake_row``): the same values, or the same error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from servecap.errors import ServecapError
from servecap.workload.trace import json_line_object, mooncake_row
from servecap.workload.trace_stream import iter_trace_chunks

LINES = [
    '{"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]}',
    '{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]}',
    '{"timestamp": 1.5, "input_length": 600, "output_length": 0, "hash_ids": [9223372036854775807, 0]}',
    '{"timestamp": -0.0, "input_length": 1, "output_length": 1}',
    '{"timestamp": 5, "input_length": 100, "output_length": 3, "hash_ids": null, "extra": "kept out"}',
    '{"timestamp": 5, "input_length": 100, "output_length": 3, "hash_ids": []}',
    '{"timestamp": "7", "input_length": "100", "output_length": 3.0, "hash_ids": [1]}',  # strings, floats
    '{"timestamp": 5, "input_length": 100.0, "output_length": 3, "hash_ids": [1]}',
    '{"timestamp": 5, "input_length": 100, "output_length": 3, "hash_ids": [1, 2]}',  # too many ids
    '{"timestamp": 5, "input_length": 100, "output_length": 3, "hash_ids": [true]}',
    '{"timestamp": 5, "input_length": 100, "output_length": 3, "hash_ids": [1.0]}',
    '{"timestamp": 5, "input_length": 100, "output_length": 3, "hash_ids": [-1]}',
    '{"timestamp": 5, "input_length": 100, "output_length": 3, "hash_ids": [9223372036854775808]}',
    '{"timestamp": 5, "input_length": 100, "output_length": 3, "hash_ids": "1,2"}',
    '{"timestamp": true, "input_length": 100, "output_length": 3}',
    '{"timestamp": NaN, "input_length": 100, "output_length": 3}',
    '{"timestamp": 1e400, "input_length": 100, "output_length": 3}',
    '{"timestamp": 100000000000000000000, "input_length": 100, "output_length": 3}',
    '{"timestamp": -1, "input_length": 100, "output_length": 3}',
    '{"timestamp": 5, "input_length": 0, "output_length": 3}',
    '{"timestamp": 5, "input_length": 9007199254740992, "output_length": 3}',
    '{"timestamp": 5, "input_length": 100, "output_length": -1}',
    '{"timestamp": 5, "input_length": 100}',
    '{"timestamp": 5, "input_length": 100, "output_length": 3} trailing',
    '{"timestamp": 5, "input_length": 100, "output_length": 3,}',
    "[1, 2]",
    "\ufeff" + '{"timestamp": 5, "input_length": 100, "output_length": 3}',
]


def _reference(text: str, where: str) -> tuple[float, int, int, list[int]] | str:
    try:
        return mooncake_row(json_line_object(text.strip(), where), where, 512)
    except ServecapError as err:
        return str(err)


def _streamed(path: Path) -> tuple[float, int, int, list[int]] | str:
    try:
        (chunk,) = list(iter_trace_chunks(path, trace_block_tokens=512))
    except ServecapError as err:
        return str(err)
    return (
        float(chunk.arrival_s[0]),
        int(chunk.prompt_tokens[0]),
        int(chunk.output_tokens[0]),
        chunk.hash_ids.tolist(),
    )


@pytest.mark.parametrize("k", range(len(LINES)))
def test_a_line_reads_as_the_whole_checks_read_it(tmp_path: Path, k: int) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(LINES[k] + "\n", encoding="utf-8")
    got, want = _streamed(path), _reference(LINES[k], "t.jsonl:1")
    assert got == want
    if isinstance(got, tuple):  # the values' types too (-0.0 stays -0.0)
        assert np.signbit(got[0]) == np.signbit(want[0])


def test_plain_lines_fill_the_chunks(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(LINES[:6]) + "\n\n", encoding="utf-8")
    with pytest.raises(ServecapError, match=r"t\.jsonl:3\.timestamp.*time order"):
        list(iter_trace_chunks(path))
    path.write_text("\n".join([LINES[3], LINES[0], LINES[5], LINES[1]]) + "\n", encoding="utf-8")
    (chunk,) = list(iter_trace_chunks(path))
    assert chunk.arrival_s.tolist() == [0.0, 0.0, 0.005, 27.482]
    assert chunk.prompt_tokens.tolist() == [1, 1024, 100, 6955]
    assert chunk.output_tokens.tolist() == [1, 10, 3, 52]
    assert chunk.hash_offsets.tolist() == [0, 0, 2, 2, 5]
    assert chunk.hash_ids.tolist() == [1, 2, 46, 47, 48]


def test_a_fifo_or_a_folder_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    """Opening a FIFO waits for a writer (the replay hung for ever): only a regular file is read."""
    import os

    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    (tmp_path / "d.jsonl").mkdir()
    for path, problem in ((fifo, "is not a regular file"), (tmp_path / "d.jsonl", "is not a regular file")):
        with pytest.raises(ServecapError, match=problem):
            next(iter_trace_chunks(path))
    with pytest.raises(ServecapError, match="cannot be read"):
        next(iter_trace_chunks(tmp_path / "none.jsonl"))
