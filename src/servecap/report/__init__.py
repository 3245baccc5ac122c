"""Reports: a self-contained interactive HTML page (plotly.js inlined, works offline)."""

from servecap.report.html import html_report

__all__ = ["html_report"]
