"""What the event loop records: per-request outcome columns (all of them, or in bounded batches
handed to a ``flush`` function that empties them: a streaming run), the time-average of requests in the
system, gauges sampled on a regular clock, and progress reports.

The observer sees arrivals and finished requests (in time order) from the loop, and samples the
gauges it was given (a function of the server: KV use, waiting, running) every ``sample_dt_s``
— at most once per event of the server, so a degenerate interval (a whole stream arriving at
once) gives one sample per step, not millions. It knows nothing of engines.
"""

from __future__ import annotations

from collections.abc import Callable

from servecap.errors import ServecapError
from servecap.progress import Progress, ProgressFn
from servecap.sim.request_state import RequestState
from servecap.sim.server import FinishedRequest

Gauges = Callable[[], tuple[float, int, int]]  # (KV blocks used / total, waiting, running)
_INF = float("inf")
MAX_CLOCK_S = 1e10
"""The latest simulated time a run may reach: 1e10 s (317 years). The loop assumes that adding a
step or a sampling interval to the clock moves it; a double near 1e10 still resolves 2 µs, but
past ~1e13 a millisecond step no longer changes the clock, time stands still and the loop would
sample the same instant until memory ran out (a segmentation fault in the compiled module).
Only absurd step times (an efficiency of 1e-30) or rates get here; the run stops with one line."""


class Observer:
    def __init__(
        self,
        gauges: Gauges,
        sample_dt_s: float,
        *,
        progress: ProgressFn | None = None,
        expected_requests: int = 0,
        flush: Callable[[Observer], None] | None = None,
        flush_every: int = 0,
    ) -> None:
        self.gauges = gauges
        # streaming: every ``flush_every`` finished requests, ``flush(self)`` takes the outcome
        # columns and clears them (the lists and ``errors`` stay bounded); None keeps them all
        self.flush = flush
        self.flush_every = flush_every if flush is not None else 0
        self.sample_dt_s = sample_dt_s
        self.next_sample_s = 0.0
        self.progress = progress
        self.expected_requests = expected_requests
        self._progress_every = max(1, expected_requests // 100) if expected_requests else 1000
        self._next_progress = self._progress_every
        # time-average of requests in the system (admitted, not finished): Σ in_system x dt
        self.in_system = 0
        self.in_system_area = 0.0
        self.t_last_s = 0.0  # the time of the last arrival or finish
        self.arrivals = 0
        self.admitted = 0
        self.finished = 0
        # outcome columns of the finished requests, in finishing order
        self.ids: list[int] = []
        self.first_token_s: list[float | None] = []
        self.end_s: list[float | None] = []
        self.queue_time_s: list[float | None] = []
        self.cached_prompt_tokens: list[int] = []
        self.preemptions: list[int] = []
        self.errors: dict[int, str] = {}  # refused requests: id -> reason
        # the time series
        self.ts_time_s: list[float] = []
        self.ts_kv: list[float] = []
        self.ts_waiting: list[int] = []
        self.ts_running: list[int] = []

    def on_arrival(self, t_s: float) -> None:
        self.in_system_area += self.in_system * (t_s - self.t_last_s)
        self.t_last_s = t_s
        self.arrivals += 1

    def on_admitted(self) -> None:
        self.in_system += 1
        self.admitted += 1

    def on_finished(self, r: FinishedRequest) -> None:
        if type(r) is RequestState:  # an engine's own request: its fields read directly (compiled)
            self._record(r)
            return
        rid = r.request_id
        err = r.error
        if err is not None:
            self.errors[rid] = err
            if self.flush_every and len(self.errors) >= self.flush_every and self.flush is not None:
                self.flush(self)
            return
        end = r.end_s
        assert end is not None
        self._finished(rid, r.first_token_s, end, r.queue_time_s, r.cached_prompt_tokens, r.preemptions)

    def _record(self, r: RequestState) -> None:
        end = r.end_s
        assert end is not None
        self._finished(r.request_id, r.first_token_s, end, r.queue_time_s, r.cached_prompt_tokens, r.preemptions)

    def _finished(
        self, rid: int, first_s: float | None, end: float, queue_s: float | None, cached: int, preemptions: int
    ) -> None:
        self.in_system_area += self.in_system * (end - self.t_last_s)
        self.t_last_s = end
        self.in_system -= 1
        self.ids.append(rid)
        self.first_token_s.append(first_s)
        self.end_s.append(end)
        self.queue_time_s.append(queue_s)
        self.cached_prompt_tokens.append(cached)
        self.preemptions.append(preemptions)
        self.finished += 1
        if self.flush_every and len(self.ids) >= self.flush_every and self.flush is not None:
            self.flush(self)
        if self.finished >= self._next_progress:
            self._next_progress = self.finished + self._progress_every
            self.report()

    def sample(self, t_s: float, next_server_event_s: float) -> None:
        """Record the gauges at ``t_s``; the next sample is due ``sample_dt_s`` later, or at the
        server's next event if that is later still (nothing changes before it)."""
        if not t_s <= MAX_CLOCK_S:
            raise ServecapError(
                "simulated time",
                f"{t_s:.3g} s",
                f"passed {MAX_CLOCK_S:.0e} s (317 years): a step or an interval is absurdly long "
                "(check the calibration's efficiencies and the workload's rates)",
            )
        kv, waiting, running = self.gauges()
        self.ts_time_s.append(t_s)
        self.ts_kv.append(kv)
        self.ts_waiting.append(waiting)
        self.ts_running.append(running)
        nxt = t_s + self.sample_dt_s
        if nxt < next_server_event_s < _INF:
            nxt = next_server_event_s
        if not nxt > t_s:  # the interval vanished in the clock's rounding: time would stand still
            raise ServecapError(
                "simulated time", f"{t_s:.3g} s", f"the sampling interval {self.sample_dt_s:.3g} s no longer moves it"
            )
        self.next_sample_s = nxt

    def report(self) -> None:
        if self.progress is not None:
            self.progress(Progress("simulate", self.finished, self.expected_requests or None, sim_time_s=self.t_last_s))
