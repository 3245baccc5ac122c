"""Log-axis ticks of the HTML reports (issue 32, defect 8: overlapping minor-tick labels), by the
rule the web pages use (``logTicks`` in web/static/servecap.js), worked by hand."""

from __future__ import annotations

from servecap.report.log_ticks import log_ticks


def test_one_two_five_per_decade_while_they_fit_then_fewer_decades() -> None:
    # 0.3..4 ms: ticks within 0.2..6 -> 0.2, 0.5, 1, 2, 5 (five, at most eight: 1-2-5)
    assert log_ticks([0.3, 4.0, None, float("nan"), -1.0]) == {
        "tickmode": "array",
        "tickvals": [0.2, 0.5, 1.0, 2.0, 5.0],
        "ticktext": ["0.2", "0.5", "1", "2", "5"],
    }
    # 12..12,000 ms: 1-2-5 gives ten ticks within 8..18,000; one per decade gives four
    assert log_ticks([12.0, 12_000.0])["ticktext"] == ["10", "100", "1,000", "10,000"]
    # 1..1e12: one per decade is 13, one every two decades 7
    assert log_ticks([1.0, 1e12])["tickvals"] == [1.0, 1e2, 1e4, 1e6, 1e8, 1e10, 1e12]
    # one tick (5 within 3.3..7.5) or no values: plotly's own
    assert log_ticks([5.0]) == {} and log_ticks([]) == {}
