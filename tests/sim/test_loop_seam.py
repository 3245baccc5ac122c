"""The event loop drives anything behind the server seam: a toy server whose every request takes a
fixed time shows the loop's contract (arrival order, finishes handed back in time, refusals,
closed-loop turns after the answer) apart from any engine; and ``simulate`` reports progress
with the one Progress event type."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from servecap.core.plan import Plan
from servecap.progress import Progress
from servecap.results import RequestRecord
from servecap.sim import engine_setup_from_plan, simulate
from servecap.sim.loop import run_loop
from servecap.sim.observer import Observer
from servecap.sim.server import ArrivingRequest, FinishedRequest, Server
from servecap.sim.simulate import _arrays_from_specs
from servecap.sim.traffic import ClosedLoopSource, OpenLoopSource
from servecap.workload import ClosedLoopUsers, RequestSpec, workload_from_dict, workload_from_flags

INF = float("inf")


class DelayServer:
    """Every request ends ``delay_s`` after it arrives; ids in ``refuse`` are turned away."""

    def __init__(self, delay_s: float, refuse: frozenset[int] = frozenset()) -> None:
        self.delay_s = delay_s
        self.refuse = refuse
        self.pending: list[RequestRecord] = []
        self.out: list[FinishedRequest] = []
        self.adds: list[tuple[int, float]] = []

    def add(self, request: ArrivingRequest, now_s: float) -> bool:
        rid = request.request_id
        self.adds.append((rid, now_s))
        if rid in self.refuse:
            self.out.append(RequestRecord(rid, now_s, request.prompt_tokens, request.output_tokens, error="rejected"))
            return False
        end = now_s + self.delay_s
        rec = RequestRecord(rid, now_s, request.prompt_tokens, request.output_tokens, end, end, queue_time_s=0.0)
        self.pending.append(rec)
        return True

    def next_event_s(self) -> float:
        return min((r.end_s or INF for r in self.pending), default=INF)

    def advance_to(self, t_s: float) -> None:
        first = self.next_event_s()
        if first <= t_s:  # the first finishing event, then return
            self.out.extend(r for r in self.pending if r.end_s == first)
            self.pending = [r for r in self.pending if r.end_s != first]

    def has_work(self) -> bool:
        return bool(self.pending)

    def take_finished(self) -> Sequence[FinishedRequest]:
        out, self.out = self.out, []
        return out


def _observer() -> Observer:
    return Observer(lambda: (0.0, 0, 0), 0.25)


def test_the_loop_drives_any_server_open_loop() -> None:
    specs = [
        RequestSpec(0, 0.0, 10, 5),
        RequestSpec(1, 0.5, 10, 5),
        RequestSpec(2, 0.5, 10, 5),
        RequestSpec(3, 2.0, 10, 5),
    ]
    server = DelayServer(1.0, refuse=frozenset({2}))
    srv: Server = server
    obs = _observer()
    run_loop(OpenLoopSource(_arrays_from_specs(specs)), srv, obs)
    assert server.adds == [(0, 0.0), (1, 0.5), (2, 0.5), (3, 2.0)]
    assert obs.ids == [0, 1, 3] and obs.end_s == [1.0, 1.5, 3.0]
    assert obs.errors == {2: "rejected"}
    assert obs.arrivals == 4 and obs.admitted == 3
    # requests in the system: 1 on [0, 0.5), 2 on [0.5, 1), 1 on [1, 1.5), 0, then 1 on [2, 3)
    assert obs.in_system_area == pytest.approx(0.5 + 1.0 + 0.5 + 1.0)
    assert obs.t_last_s == 3.0
    # sampled every 0.25 s while the run lasts, but at most once per event of the server: after
    # 0.25 s nothing ends before 1.0 s, after 1.0 s nothing before 1.5 s
    assert obs.ts_time_s[:4] == [0.0, 0.25, 1.0, 1.5]


def test_closed_loop_turns_follow_the_answers() -> None:
    w = workload_from_dict(
        {
            "users": {"count": 3, "think_time_s": 0.5, "turns": 4},
            "prompt_tokens": 100,
            "output_tokens": 20,
            "duration_s": 10.0,
        }
    )
    source = ClosedLoopSource(ClosedLoopUsers(w, np.random.default_rng(0)))
    obs = _observer()
    run_loop(source, DelayServer(2.0), obs)
    issued = source.issued
    assert len(issued) > 6 and obs.finished == len(issued)  # each user: a turn every 2.5 s
    ends = dict(zip(obs.ids, obs.end_s, strict=True))
    for spec in issued:
        if spec.turn > 1:  # the user's previous answer ended, then it thought for 0.5 s
            prev = next(s for s in issued if s.user_id == spec.user_id and s.turn == spec.turn - 1)
            assert spec.arrival_s == pytest.approx(ends[prev.request_id] + 0.5)


def test_simulate_reports_progress_events(llama8b_plan: Plan) -> None:
    events: list[Progress] = []
    w = workload_from_flags(rate=10.0, prompt_tokens=200, output_tokens=20, num_requests=300)
    res = simulate(engine_setup_from_plan(llama8b_plan), w, np.random.default_rng(0), progress=events.append)
    assert res.summary.completed == 300
    assert events and all(e.stage == "simulate" and e.total == 300 for e in events)
    assert [e.done for e in events] == sorted(e.done for e in events)
    assert events[-1].done == 300 and events[-1].fraction == 1.0
