"""The simulator's fast event loop: the loop of :mod:`servecap.sim.simulate` with the engine's
step (:meth:`Engine._step`) written out inline, sharing the engine's state.

It makes exactly the decisions, in exactly the order, of the step-by-step reference (one
``Engine._step`` call per iteration, one event per step end): the same requests are admitted,
preempted and finished at the same steps, every step is priced by a function equal bit for bit
to :meth:`StepTimeModel.time` (:meth:`StepTimeModel.compiled`) with the same arguments, and the
time-weighted gauges accumulate in the same order — so every per-request record, every
percentile and every gauge is identical (the tests compare them on many workloads). It is
faster because the common case is handled without method calls, tuples or attribute lookups:
decoding requests are the engine's lazy ones (a step costs O(1) in the batch size), prefill
chunks and finishes are a few lines each, and the rare cases — preemption (the engine's
request-by-request ``_schedule_running_exact``), prefix-cache keys, sliding-window rate changes,
hybrid layouts, token-time recording — call the engine's own methods.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from servecap.core.roofline import prefill_batch
from servecap.sim.engine import DECODING, DONE, PREFILL, _Req

if TYPE_CHECKING:
    from servecap.sim.simulate import _Loop

_INF = float("inf")


def run_fast(L: _Loop) -> None:
    """Run the loop ``L`` to the end (its counters and the engine's state are updated)."""
    eng = L.engine
    users = L.users
    if users is not None:
        for spec in users.first_turns():
            L.closed.append(spec)
            heapq.heappush(L.uheap, (spec.arrival_s, L.seq, spec))
            L.seq += 1
    heappush, heappop = heapq.heappush, heapq.heappop
    arr = [*L.arr, _INF]  # a sentinel: arr[ai] is the next arrival time, or inf
    prompts, outputs, groups, ptoks = L.prompt, L.output, L.group, L.ptok
    uheap = L.uheap
    check = L.check
    progress = L.progress

    # the engine's state (containers are shared; scalars are written back where the engine's own
    # methods read them)
    pool = eng.pool
    lru = pool.lru
    per_key = pool.per_key
    reqs = eng._reqs
    decoders = eng._decoders
    waiting = eng._waiting
    wheap = eng._wheap
    fcfs = eng.fcfs
    wq = waiting if fcfs else wheap  # the waiting queue (its length and truth)
    fin = eng._fin
    chg = eng._chg
    grow = eng._grow
    bs = eng.bs
    linear = eng._linear
    g = eng._g
    blocks_held = eng._bh
    window = eng.window
    simple_decoders = linear and window is None and not eng._thresholds
    simple_finish = simple_decoders and not eng.record_token_times
    max_tokens = eng.max_tokens
    max_seqs = eng.max_seqs
    max_model_len = eng.setup.max_model_len
    limit = eng.setup.waiting_queue_limit
    record = eng.record_token_times
    # the records' columns are collected below; finished requests are kept only for their token
    # times (fewer live objects: less work for the garbage collector)
    keep = eng.keep_finished = eng.keep_finished and eng.record_token_times
    finished_all = eng.finished
    durs = eng.itl_durations
    weights = eng.itl_weights
    ends = eng.decode_end_times
    D = eng._D

    area, in_sys, t_last = L.area, L.in_sys, L.t_last
    seq, admitted, n_finished = L.seq, L.admitted, L.finished
    simple_arrivals = not record
    max_waiting = L.max_waiting
    next_sample = L.next_sample
    steps, busy_s, seq_time, max_batch = eng.steps, eng.busy_s, eng.seq_time, eng.max_batch
    hit_tokens, query_tokens = eng.hit_tokens, eng.query_tokens

    slopes = eng.model.roofline_slopes()
    model_time = eng.model.time
    base_get = eng.model._base.get
    base_for = eng.model.base
    kv_slope, wkv_slope, pairs_slope, wpairs_slope = slopes if slopes is not None else (0.0, 0.0, 0.0, 0.0)
    # 1: mem = kv, compute = pairs (full attention); 2: plus the window terms; 0: call the model
    tmode = 0 if slopes is None else (1 if wkv_slope == 0.0 and wpairs_slope == 0.0 else 2)

    ids: list[int] = []
    firsts: list[float | None] = []
    ends_s: list[float | None] = []
    scheds: list[float | None] = []
    cached: list[int] = []
    pre: list[int] = []
    L.finished_columns = (ids, firsts, ends_s, scheds, cached, pre)
    rec_id, rec_first, rec_end, rec_sched, rec_cached, rec_pre = (
        ids.append,
        firsts.append,
        ends_s.append,
        scheds.append,
        cached.append,
        pre.append,
    )

    ai = 0
    turns = 0
    t = 0.0
    while True:
        # ---- events at t while the engine is idle or something is due at t -------------------
        t_next = ta = arr[ai]
        if uheap and uheap[0][0] < t_next:
            t_next = uheap[0][0]
        if t_next <= t or not (decoders or eng._partial is not None or wq):
            if t_next == _INF:
                break
            if ta <= t_next:  # arrivals first at equal times
                t = ta
                area += in_sys * (t - t_last)
                t_last = t
                in_sys, admitted = _arrival(L, ai, t, in_sys, admitted)
                ai += 1
            else:
                t, _, spec = heappop(uheap)
                turns += 1
                area += in_sys * (t - t_last)
                t_last = t
                L.in_sys, L.admitted, L.seq = in_sys, admitted, seq
                L._turn(spec, t)
                in_sys, admitted, seq = L.in_sys, L.admitted, L.seq
            continue

        # ---- start a step at t (every event at t has been handled) --------------------------
        if t >= next_sample:
            L._sample(t)
            next_sample = L.next_sample
        if wq and len(wq) > max_waiting:
            max_waiting = len(wq)

        # ---- one engine step starting at t (Engine._step, inline) -----------------------------
        now = t
        if chg and chg[0][0] <= D:
            eng._apply_changes()
        budget = max_tokens - len(decoders)
        chunks: list[tuple[_Req, int]] = []
        preempted = False
        need = grow[(-D) % bs]
        part = eng._partial
        part_chunk = part_need = 0
        if part is not None:
            part_chunk = part.prompt + part.gen - part.computed
            if part_chunk > budget:
                part_chunk = budget
            x = part.computed + part_chunk
            part_need = (g * -(-x // bs) if linear else blocks_held(x)) - part.held
        n = need + part_need
        if n > pool.free + len(lru) * per_key:
            plist: list[_Req] = []
            eng._schedule_running_exact(now, plist, chunks)
            preempted = bool(plist)
            budget = max_tokens - len(decoders) - sum(c for _, c in chunks)
        else:
            if n > 0:
                if pool.free >= n:
                    pool.free -= n
                    pool.used += n
                else:
                    pool.allocate(n)
            if part is not None:
                part.held += part_need
                chunks.append((part, part_chunk))
                budget -= part_chunk

        # admit waiting requests (vLLM skips this in a step that preempted)
        if not preempted and budget > 0 and wq:
            n_running = len(decoders) + len(chunks)
            blocked = False
            while budget > 0:
                if fcfs:
                    if not waiting:
                        break
                    r = waiting[0]
                else:
                    if not wheap:
                        break
                    r = wheap[0][2]
                if n_running >= max_seqs:
                    blocked = True
                    break
                total = r.prompt + r.gen
                keys = r.keys
                if keys is not None:
                    hits, idle = pool.longest_hit(keys, (total - 1) // bs)
                else:
                    hits = idle = 0
                start = hits * bs
                chunk = total - start
                if chunk > budget:
                    chunk = budget
                x = start + chunk
                held = g * -(-x // bs) if linear else blocks_held(x)
                new_blocks = held - per_key * hits
                if new_blocks + idle * per_key > pool.free + len(lru) * per_key:
                    blocked = True
                    break
                if fcfs:
                    waiting.popleft()
                else:
                    heappop(wheap)
                if hits:
                    assert keys is not None
                    for i in range(hits):
                        pool.acquire(keys[i])
                    r.refs = list(keys[:hits])
                r.nreg = hits
                if new_blocks > 0:
                    if pool.free >= new_blocks:
                        pool.free -= new_blocks
                        pool.used += new_blocks
                    else:
                        pool.allocate(new_blocks)
                r.computed = start
                r.held = held
                r.state = PREFILL
                if r.sched_s is None:
                    r.sched_s = now
                if r.preemptions == 0:
                    r.cached_tokens = start
                hit_tokens += start
                query_tokens += total
                chunks.append((r, chunk))
                budget -= chunk
                n_running += 1
            eng._admission_blocked = blocked

        # the step's shape, from running sums
        B = len(decoders)
        kv = float(eng._A + B * (D + 1))
        wkv = kv if window is None else float(eng._A_un + eng._n_un * (D + 1) + eng._n_sat * window)
        pairs, wpairs = kv, wkv
        num_tokens = B
        prompt = 0
        num_seqs = B + len(chunks)
        for r, n in chunks:
            s = r.computed
            if window is None:
                pp = n * s + n * (n + 1) / 2.0
                kv += s
                wkv += s
                pairs += pp
                wpairs += pp
            else:
                shape = prefill_batch(n, window, start_tokens=s)
                kv += shape.kv_tokens
                wkv += shape.window_kv_tokens
                pairs += shape.attn_pairs
                wpairs += shape.window_attn_pairs
            num_tokens += n
            prompt += n
        if num_tokens <= 0:
            dur = 0.0
        elif tmode == 1:
            b = base_get(num_tokens)
            if b is None:
                b = base_for(num_tokens)
            mem = b[0] + kv_slope * kv
            comp = b[1] + pairs_slope * pairs
            dur = (mem if mem > comp else comp) + b[2]
        elif tmode == 2:
            b = base_get(num_tokens)
            if b is None:
                b = base_for(num_tokens)
            mem = b[0] + kv_slope * kv + wkv_slope * wkv
            comp = b[1] + pairs_slope * pairs + wpairs_slope * wpairs
            dur = (mem if mem > comp else comp) + b[2]
        else:
            dur = model_time(num_tokens, num_seqs, kv, wkv, pairs, wpairs, prompt)
        end = now + dur

        # apply: decodes advance, finishes, prefill progress
        if B:
            D += 1
            eng._D = D
            durs.append(dur)
            weights.append(B)
            if record:
                ends.append(end)
            while fin and fin[0][0] <= D:
                _, _, rid, epoch = heappop(fin)
                fr = reqs.get(rid)
                if fr is None or fr.state != DECODING or fr.epoch != epoch:
                    continue
                r = fr
                if not simple_finish or r.keys is not None:
                    eng._finish(r, end)
                    continue
                # Engine._finish, inline: materialize, drop from the lazy sums, free the blocks
                k = D - r.d0
                if k:
                    r.computed = r.c0 + k
                    r.gen = r.g0 + k
                    r.c0, r.g0, r.d0 = r.computed, r.gen, D
                x = g * -(-r.computed // bs)
                if x > r.held:
                    r.held = x
                off = r.c0 - r.d0
                eng._A -= off
                grow[off % bs] -= r.mult
                del decoders[rid]
                if r.refs:
                    eng._release_blocks(r)
                else:
                    x = r.held
                    pool.used -= x
                    pool.free += x
                    r.held = 0
                    r.nreg = 0
                    eng._admission_blocked = False
                r.state = DONE
                r.end_s = end
                del reqs[rid]
                if keep:
                    finished_all.append(r)
                eng._new_finished.append(r)
        if part is not None:
            eng._partial = None
        for r, n in chunks:
            r.computed += n
            if r.keys is not None:
                eng._publish(r)
            if r.computed < r.prompt + r.gen:
                eng._partial = r
                continue
            r.gen += 1
            if r.gen == 1:
                r.first_token_s = end
            else:  # the first token after a recompute: its gap spans the preemption
                assert r.last_token_s is not None
                durs.append(end - r.last_token_s)
                weights.append(1)
                if r.itl_extra is not None:
                    r.itl_extra.append(end)
            if r.gen >= r.output:
                eng._finish_after_prefill(r, end)
            elif simple_decoders:
                # Engine._add_decoder, inline
                r.state = DECODING
                r.c0, r.g0, r.d0 = r.computed, r.gen, D
                r.epoch += 1
                off = r.c0 - D
                eng._A += off
                r.mult = g
                grow[off % bs] += g
                heappush(fin, (D + r.output - r.gen, r.seq, r.rid, r.epoch))
                decoders[r.rid] = r
            else:
                eng._add_decoder(r)
        eng._last_end = end
        steps += 1
        busy_s += dur
        seq_time += num_seqs * dur
        if num_seqs > max_batch:
            max_batch = num_seqs
        if end <= now:
            raise RuntimeError("the engine has work but scheduled nothing")  # a bug, not input
        end_seq = seq
        seq += 1

        # ---- events during the step: arrivals and turns up to its end ----------------------
        if users is None:
            while arr[ai] <= end:
                ta = arr[ai]
                area += in_sys * (ta - t_last)
                t_last = ta
                p = prompts[ai]
                o = outputs[ai]
                if (
                    p + o <= max_model_len
                    and simple_arrivals
                    and p >= 1
                    and o >= 1
                    and (limit is None or len(waiting if fcfs else wheap) < limit)
                ):
                    # Engine.add, inline (open-loop ids are new: 0..N-1 in order)
                    r = _Req(
                        ai,
                        p,
                        o,
                        L._keys(groups[ai], ptoks[ai], None, p + o) if groups[ai] >= 0 else None,
                        0,
                        eng._seq,
                        ta,
                    )
                    eng._seq += 1
                    reqs[ai] = r
                    if fcfs:
                        waiting.append(r)
                    else:
                        heappush(wheap, (0, r.seq, r))
                    in_sys += 1
                    admitted += 1
                else:
                    in_sys, admitted = _arrival(L, ai, ta, in_sys, admitted)
                ai += 1
        else:
            while True:
                ta = arr[ai]
                tu = uheap[0][0] if uheap else _INF
                if ta <= tu and ta <= end:
                    area += in_sys * (ta - t_last)
                    t_last = ta
                    in_sys, admitted = _arrival(L, ai, ta, in_sys, admitted)
                    ai += 1
                elif tu < end or (tu == end and uheap[0][1] < end_seq):
                    tu, _, spec = heappop(uheap)
                    turns += 1
                    area += in_sys * (tu - t_last)
                    t_last = tu
                    L.in_sys, L.admitted, L.seq = in_sys, admitted, seq
                    L._turn(spec, tu)
                    in_sys, admitted, seq = L.in_sys, L.admitted, L.seq
                else:
                    break

        # ---- the step's end ----------------------------------------------------------------
        t = end
        area += in_sys * (t - t_last)
        t_last = t
        done = eng._new_finished
        if done:
            eng._new_finished = []
            for r in done:  # the records' columns, while the requests are at hand
                rec_id(r.rid)
                rec_first(r.first_token_s)
                rec_end(r.end_s)
                rec_sched(r.sched_s)
                rec_cached(r.cached_tokens)
                rec_pre(r.preemptions)
            in_sys -= len(done)
            n_finished += len(done)
            if users is not None:
                L.seq = seq
                for r in done:
                    L._follow_up(r.rid, t)
                seq = L.seq
            if progress is not None and n_finished >= L.next_progress:
                progress(n_finished, L.total_hint)
                L.next_progress = n_finished + max(1, L.total_hint // 100 or 1000)
        if check:
            eng.check_invariants()

    if progress is not None:
        progress(n_finished, L.total_hint)
    L.area, L.in_sys, L.t_last = area, in_sys, t_last
    L.events = L.events + ai + turns + steps - eng.steps
    L.seq, L.admitted, L.finished = seq, admitted, n_finished
    L.max_waiting = max_waiting
    eng.steps, eng.busy_s, eng.seq_time, eng.max_batch = steps, busy_s, seq_time, max_batch
    eng.hit_tokens, eng.query_tokens = hit_tokens, query_tokens


__all__ = ["run_fast"]


def _arrival(L: _Loop, rid: int, t: float, in_sys: int, admitted: int) -> tuple[int, int]:
    """An open-loop arrival (:meth:`_Loop._admit` with the loop's counters passed through)."""
    L.in_sys, L.admitted = in_sys, admitted
    g = L.group[rid]
    p, o = L.prompt[rid], L.output[rid]
    keys = L._keys(g, L.ptok[rid], None, p + o) if g >= 0 else None
    L._admit(rid, t, p, o, keys, 0)
    return L.in_sys, L.admitted
