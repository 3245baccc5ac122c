"""The event loop: a traffic source, a server and an observer on one simulated clock.

It knows nothing of engines, routers or autoscalers (those are behind
:class:`~servecap.sim.server.Server`). Each turn it advances the server to the next time
something happens outside it — the next arrival or the next sample of the gauges — then hands
what finished to the observer and the source (a closed-loop user's next turn may come earlier
than the arrival it was heading for: the server returns after every event that finished
requests, and the loop looks again), then samples, then adds every request arriving at that
instant. Per the seam's tie rule, work ending at ``t`` is handled before requests arriving at
``t`` are added, and work starting at ``t`` after: they are seen by the next step, as in vLLM.
The run ends when the source has no more requests and the server has drained.
"""

from __future__ import annotations

from servecap.sim.observer import Observer
from servecap.sim.server import Server
from servecap.sim.traffic import TrafficSource

_INF = float("inf")


def run_loop(source: TrafficSource, server: Server, observer: Observer) -> None:
    """Run until every request has arrived and every admitted request has ended."""
    closed_loop = source.closed_loop
    while True:
        t_arrival = source.next_arrival_s()
        if t_arrival == _INF and not server.has_work():
            break
        t = t_arrival if t_arrival < observer.next_sample_s else observer.next_sample_s
        server.advance_to(t)
        done = server.take_finished()
        if done:
            for r in done:
                observer.on_finished(r)
                if closed_loop:
                    end = r.end_s
                    source.on_finished(r.request_id, end if end is not None else t)
            # the server may have stopped at a finish before t (and a new turn may come before t)
            if closed_loop or server.next_event_s() < t:
                continue
        if observer.next_sample_s <= t and (t_arrival < _INF or server.has_work()):  # not once drained
            observer.sample(t, server.next_event_s())
        while source.next_arrival_s() == t:
            request = source.pop()
            observer.on_arrival(t)
            if server.add(request, t):
                observer.on_admitted()
            else:  # refused at the door: its record comes back at once
                for r in server.take_finished():
                    observer.on_finished(r)
                    if closed_loop:
                        source.on_finished(r.request_id, t)
    observer.report()
