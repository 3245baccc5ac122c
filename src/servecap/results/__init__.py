"""One result schema for simulated and measured runs: per-request records and run summaries."""

from servecap.results.measured import MeasuredRequest
from servecap.results.record import RequestRecord
from servecap.results.stats import Percentiles, percentile, percentiles, weighted_percentiles
from servecap.results.summary import (
    RecordColumns,
    RunSummary,
    TimeSeries,
    columns_from_records,
    records_from_columns,
    summarize,
    summarize_columns,
    summary_from_json_dict,
    summary_to_json_dict,
)
from servecap.specs.perf import Slo

__all__ = [
    "MeasuredRequest",
    "Percentiles",
    "RecordColumns",
    "RequestRecord",
    "RunSummary",
    "Slo",
    "TimeSeries",
    "columns_from_records",
    "percentile",
    "percentiles",
    "records_from_columns",
    "summarize",
    "summarize_columns",
    "summary_from_json_dict",
    "summary_to_json_dict",
    "weighted_percentiles",
]
