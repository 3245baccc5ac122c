"""The step-by-step reference simulation (the oracle of the fast path).

One event at a time in time order — a step's end, a sample of the gauges, an arrival (that order
at equal times) — and one public ``Engine.step`` per step, with nothing batched: no server, no
runs of decode-only steps, no early returns. A step starts once nothing else is due at its start
time. It feeds the same observer and builds the same result as :func:`servecap.sim.simulate`,
which must agree with it exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from servecap.results import RequestRecord, Slo
from servecap.sim import EngineSetup, SimResult
from servecap.sim.engine import Engine
from servecap.sim.observer import Observer
from servecap.sim.server import ArrivingRequest
from servecap.sim.simulate import _arrays_from_specs, engine_gauges, sim_result
from servecap.sim.traffic import ClosedLoopSource, OpenLoopSource, TrafficSource
from servecap.workload import ClosedLoopUsers, RequestArrays, RequestSpec, WorkloadSpec, block_keys, generate_arrays

INF = float("inf")


def reference_simulate(
    setup: EngineSetup,
    workload: WorkloadSpec | RequestArrays | Sequence[RequestSpec],
    rng: np.random.Generator | None = None,
    *,
    slo: Slo | None = None,
    exact_step_time: bool = False,
    record_token_times: bool = False,
    timeseries_points: int = 400,
) -> SimResult:
    source: TrafficSource
    if isinstance(workload, WorkloadSpec):
        assert rng is not None
        if workload.closed_loop:
            users = ClosedLoopUsers(workload, rng)
            source = ClosedLoopSource(users, setup.efficiency.request_overhead_s)
            horizon = users.spec.duration_s or max(1.0, 60.0 * users.num_users)
        else:
            source = OpenLoopSource(generate_arrays(workload, rng))
    elif isinstance(workload, RequestArrays):
        source = OpenLoopSource(workload)
    else:
        source = OpenLoopSource(_arrays_from_specs(list(workload)))
    if isinstance(source, OpenLoopSource):
        horizon = source.arrival_s[-1] if source.arrival_s else 0.0
    engine = Engine(setup, keep_finished=True, record_token_times=record_token_times, exact_step_time=exact_step_time)
    obs = Observer(engine_gauges(engine), max(horizon, 1e-9) / max(1, timeseries_points))

    busy = False
    end_s = 0.0  # of the step in flight
    start_s = 0.0  # when idle: the earliest start of the next step
    while True:
        ta = source.next_arrival_s()
        te = end_s if busy else INF
        ts = obs.next_sample_s
        if busy and te <= ts and te <= ta:  # a step ends
            busy = False
            start_s = te
            for r in engine.take_finished():
                obs.on_finished(r)
                source.on_finished(r.request_id, te)
        elif ts <= ta and (busy or engine.has_work() or ta < INF):  # a sample
            nxt = te if busy else (start_s if engine.has_work() else INF)
            obs.sample(ts, nxt)
        elif ta < INF:  # an arrival
            spec = source.pop()
            obs.on_arrival(ta)
            error = _add(engine, spec, ta)
            if error is None:
                obs.on_admitted()
                if not busy and ta > start_s:
                    start_s = ta
            else:
                obs.on_finished(RequestRecord(spec.request_id, ta, spec.prompt_tokens, spec.output_tokens, error=error))
                source.on_finished(spec.request_id, ta)
        else:
            assert not busy and not engine.has_work()
            break
        # start a step once nothing else is due at its start
        if not busy and engine.has_work() and source.next_arrival_s() > start_s and obs.next_sample_s > start_s:
            out = engine.step(start_s)
            if out.duration_s <= 0:
                raise RuntimeError("the engine has work but scheduled nothing")
            busy, end_s = True, start_s + out.duration_s
    return sim_result(setup, engine, source, obs, slo)


def _add(engine: Engine, spec: ArrivingRequest, t: float) -> str | None:
    total = spec.prompt_tokens + spec.output_tokens
    if total > engine.setup.max_model_len:
        return "too_long"
    keys = None
    if engine.caching and (spec.prefix_group is not None or spec.conversation_id is not None):
        keys = block_keys(
            prefix_group=spec.prefix_group,
            prefix_tokens=spec.prefix_tokens,
            conversation_id=spec.conversation_id,
            total_tokens=total,
            block_size=engine.block_size,
        )
    ok = engine.add(spec.request_id, spec.prompt_tokens, spec.output_tokens, keys, spec.priority, t)
    return None if ok else "rejected"
