"""Per-request records streamed to a Parquet file in batches (``pyarrow``'s ``ParquetWriter``).

One row per request, written as batches of finished requests arrive (one row group each), so a
run of any length is written in bounded memory and read back with pandas, polars or duckdb.
Columns (NaN where a time is unknown; times in seconds on the run's clock, latencies as the
summary defines them — ``results.summary``):

``request_id, arrival_s, first_token_s, end_s, ttft_s, tpot_s, e2e_s, queue_time_s,
prompt_tokens, output_tokens, cached_prompt_tokens, preemptions, error`` (empty when it
finished), ``pool``, ``tenant``, ``class`` (empty when none). Rows are in finishing-batch order,
not by id. pyarrow is an optional dependency: ``pip install 'servecap[records]'``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from servecap.errors import ServecapError
from servecap.outputs import check_target, commit, discard, os_error, temp_beside
from servecap.results.summary import RecordColumns, latencies


def _import_pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ServecapError("records", "parquet", "needs pyarrow: pip install 'servecap[records]'") from exc
    return pa, pq


class ParquetRecordWriter:
    """Writes :class:`~servecap.results.summary.RecordColumns` rows to ``path`` (see the module doc)."""

    def __init__(
        self,
        path: Path | str,
        pool_names: Sequence[str],
        tenant_names: Sequence[str] = (),
        class_names: Sequence[str] = (),
    ) -> None:
        pa, pq = _import_pyarrow()
        self._pa = pa
        self.path = check_target(path, "--records")
        self.error: ServecapError | None = None
        """Set when a write failed (disk full, ...): the run goes on, nothing more is written,
        and the caller reports it once the run is stored."""
        self._tmp = temp_beside(self.path, "--records")
        self.pool_names = list(pool_names)
        self.tenant_names = list(tenant_names)
        self.class_names = list(class_names)
        self.rows = 0
        f64, i64, s = pa.float64(), pa.int64(), pa.string()
        self.schema = pa.schema(
            [
                ("request_id", i64),
                ("arrival_s", f64),
                ("first_token_s", f64),
                ("end_s", f64),
                ("ttft_s", f64),
                ("tpot_s", f64),
                ("e2e_s", f64),
                ("queue_time_s", f64),
                ("prompt_tokens", i64),
                ("output_tokens", i64),
                ("cached_prompt_tokens", i64),
                ("preemptions", i64),
                ("error", s),
                ("pool", s),
                ("tenant", s),
                ("class", s),
            ]
        )
        try:
            self._writer = pq.ParquetWriter(str(self._tmp), self.schema)
        except OSError as err:
            discard(self._tmp)
            raise os_error(err, self.path, "--records") from None

    def write(
        self,
        ids: NDArray[np.int64],
        b: RecordColumns,
        pool: NDArray[np.int64],
        tenant: NDArray[np.int64],
        request_class: NDArray[np.int64],
        *,
        tenant_names: Sequence[str] | None = None,
        class_names: Sequence[str] | None = None,
    ) -> None:
        """Append one batch (one row group); after a failed write, nothing."""
        if self.error is not None:
            return
        pa = self._pa
        ttft, tpot, e2e = latencies(b)
        cols = [
            ids,
            b.arrival_s,
            b.first_token_s,
            b.end_s,
            ttft,
            tpot,
            e2e,
            b.queue_time_s,
            b.prompt_tokens,
            b.output_tokens,
            b.cached_prompt_tokens,
            b.preemptions,
            ["" if e is None else e for e in b.errors],
            _names(pool, self.pool_names),
            _names(tenant, list(tenant_names) if tenant_names is not None else self.tenant_names),
            _names(request_class, list(class_names) if class_names is not None else self.class_names),
        ]
        arrays = [pa.array(c, type=f.type) for c, f in zip(cols, self.schema, strict=True)]
        try:
            self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        except OSError as err:
            self._fail(err)
            return
        self.rows += len(ids)

    def _fail(self, err: OSError) -> None:
        self.error = os_error(err, self.path, "--records")
        with contextlib.suppress(OSError):
            self._writer.close()
        discard(self._tmp)

    def close(self) -> None:
        """Finish the file and move it into place (or, after a failure, leave nothing)."""
        if self.error is not None:
            return
        try:
            self._writer.close()
        except OSError as err:
            self._fail(err)
            return
        try:
            commit(self._tmp, self.path, "--records")
        except ServecapError as err:
            self.error = err


def _names(codes: NDArray[np.int64], names: Sequence[str]) -> Any:
    """Names by code ("" for -1 or an unknown code), as a dictionary-decoded array."""
    table = np.array([*names, ""], dtype=object)
    idx = np.where((codes >= 0) & (codes < len(names)), codes, len(names))
    return table[idx].tolist()
