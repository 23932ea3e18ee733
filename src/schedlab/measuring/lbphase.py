"""Replays of the lb-phase and lb-share probes' balance events: when parent
and child levels compute the same group statistics, and what share of busy
balances SG_STATS_REUSE's sums would serve.  The method, its bounds and its
assumptions: docs/measuring.md, "Replays of group statistics".
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

WINDOWS_MS = (4, 16)
_KEY = re.compile(r"^@lbp_ev\[(\d+), (\d+), (\S+), (\d+), (\d+)\]: \d+\s*$")
# The weight field is optional: lines without it read as weight 0.
_SHARE_KEY = re.compile(r"^@lbs_ev\[(\d+), (\S+), (?:(\d+), )?(\d+), (\d+), (\d+)\]: \d+\s*$")
# The time of one runqueue's read in a group's statistics (ns) for the
# replay's walked share: a few remote cache lines on a server, a rough
# figure, not measured here
RQ_NS = 200
# lbtime.bt's @lbt_dur: a level's busy balances by how long they spent in
# sched_balance_find_src_group(), in steps of DUR_STEP_NS
_DUR_KEY = re.compile(r"^lbt_dur\[(\S+), (\d+), (\d+)\]$")
DUR_STEP_NS = 100
# The CONFIG_HZ values hz_of() chooses among
HZ_VALUES = (100, 250, 300, 1000)


@dataclass(frozen=True)
class Event:
    cpu: int           # the CPU balanced for
    idle: int          # 0 busy, 1 idle
    name: str          # the domain's name (SMT, MC, PKG, NUMA)
    passno: int        # the softirq pass (unique per running CPU)
    ns: int


def parse_events(text: str) -> List[Event]:
    """The events in time order, each once: bpftrace prints the map when the
    window closes and again at its exit, so the same keys come twice."""
    out = set()
    for line in text.splitlines():
        m = _KEY.match(line.strip())
        if m:
            out.add(Event(int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4)),
                          int(m.group(5))))
    return sorted(out, key=lambda e: (e.ns, e.cpu))


def _mask(text: str) -> FrozenSet[int]:
    bits = int(text.replace(",", ""), 16)
    return frozenset(i for i in range(bits.bit_length()) if bits >> i & 1)


def parse_spans(schedstat: str) -> Dict[int, List[Tuple[str, FrozenSet[int]]]]:
    """Per CPU, its domains bottom-up as (name, span), from /proc/schedstat
    version 17 ('domainN NAME MASK ...' below each 'cpuN' line)."""
    out: Dict[int, List[Tuple[str, FrozenSet[int]]]] = {}
    cpu = -1
    for line in schedstat.splitlines():
        parts = line.split()
        if not parts:
            continue
        if re.fullmatch(r"cpu\d+", parts[0]):
            cpu = int(parts[0][3:])
            out[cpu] = []
        elif parts[0].startswith("domain") and cpu >= 0 and len(parts) > 2:
            out[cpu].append((parts[1], _mask(parts[2])))
    return out


@dataclass
class LevelShare:
    balances: int = 0          # busy balances at this level that computed statistics
    reads: int = 0             # per-CPU reads they made (the sum of their spans)
    same_pass: int = 0         # ... whose pass balanced the child level just before
    child: Tuple[int, ...] = ()   # reads fresh from child totals, per window
    wom: Tuple[int, ...] = ()     # ... or from a parent-level balance (write on miss)


def replay(events: Sequence[Event], spans: Dict[int, List[Tuple[str, FrozenSet[int]]]],
           windows_ms: Sequence[int] = WINDOWS_MS) -> Dict[str, LevelShare]:
    """Per level name, over its busy balances: see the module's text."""
    windows = [w * 1000000 for w in windows_ms]
    child_at: Dict[FrozenSet[int], int] = {}     # span -> last time its own domain balanced
    any_at: Dict[FrozenSet[int], int] = {}       # ... or a parent level read it
    # (cpu, level index) -> the pass that last balanced it for that CPU
    cpu_at: Dict[Tuple[int, int], int] = {}
    out: Dict[str, LevelShare] = {}
    for e in events:
        doms = spans.get(e.cpu, [])
        k = next((i for i, (name, _) in enumerate(doms) if name == e.name), None)
        if k is None:
            continue
        span = doms[k][1]
        groups = {frozenset(spans[c][k - 1][1]) for c in span
                  if c in spans and len(spans[c]) > k - 1} if k else set()
        if e.idle == 0:
            share = out.setdefault(e.name, LevelShare(child=(0,) * len(windows),
                                                      wom=(0,) * len(windows)))
            share.balances += 1
            share.reads += len(span)
            if k:
                if cpu_at.get((e.cpu, k - 1)) == e.passno:
                    share.same_pass += 1
                child, wom = list(share.child), list(share.wom)
                for g in groups:
                    for i, w in enumerate(windows):
                        if g in child_at and e.ns - child_at[g] <= w:
                            child[i] += len(g)
                        if g in any_at and e.ns - any_at[g] <= w:
                            wom[i] += len(g)
                share.child, share.wom = tuple(child), tuple(wom)
        # This balance's totals are now fresh: its own span, and its groups.
        child_at[span] = any_at[span] = e.ns
        for g in groups:
            any_at[g] = e.ns
        cpu_at[(e.cpu, k)] = e.passno
    return out


def level_names(spans: Dict[int, List[Tuple[str, FrozenSet[int]]]]) -> List[str]:
    """The level names bottom-up (the lowest first), as CPU order gives them."""
    out: List[str] = []
    for doms in spans.values():
        for name, _ in doms:
            if name not in out:
                out.append(name)
    return out


@dataclass(frozen=True)
class ShareEvent:
    cpu: int           # the CPU balanced for
    name: str          # the domain's name
    weight: int        # its span's weight (which of the NUMA levels)
    last_balance: int  # its last_balance (jiffies): the CPU's previous balance of it
    busy_ms: int       # its balance_interval * busy_factor then
    ns: int


def parse_share_events(text: str) -> List[ShareEvent]:
    """lbshare.bt's events in time order, each once (the map is printed when
    the window closes and again at exit)."""
    out = set()
    for line in text.splitlines():
        m = _SHARE_KEY.match(line.strip())
        if m:
            out.add(ShareEvent(int(m.group(1)), m.group(2),
                               *(int(g or 0) for g in m.groups()[2:])))
    return sorted(out, key=lambda e: (e.ns, e.cpu))


def balance_ns(maps: Dict[str, float]) -> Dict[Tuple[str, int], int]:
    """Per level (name, weight): the median time lbtime.bt's busy balances
    spent in sched_balance_find_src_group() (ns, the top of its 100 ns
    step)."""
    counts: Dict[Tuple[str, int], Dict[int, float]] = {}
    for key, n in maps.items():
        m = _DUR_KEY.match(key)
        if m:
            counts.setdefault((m.group(1), int(m.group(2))), {})[int(m.group(3))] = n
    out = {}
    for level, steps in counts.items():
        half, seen = sum(steps.values()) / 2, 0.0
        for step in sorted(steps):
            seen += steps[step]
            if seen >= half:
                out[level] = (step + 1) * DUR_STEP_NS
                break
    return out


def rq_ns_of(durations: Dict[Tuple[str, int], int],
             reads: Dict[Tuple[str, int], float]) -> Dict[Tuple[str, int], int]:
    """Per level: the time of one runqueue's read, the median statistics
    time over READS, the runqueues a balance of the level reads (its span's
    weight, more where NUMA groups overlap), rounded up."""
    return {level: -(-ns // max(1, round(reads[level])))
            for level, ns in durations.items() if reads.get(level)}


def _pairs(events: Sequence[ShareEvent]) -> List[Tuple[ShareEvent, ShareEvent]]:
    """Consecutive balances of one CPU's level, retries left out."""
    out = []
    last: Dict[Tuple[int, str, int], ShareEvent] = {}
    for e in events:
        prev = last.get((e.cpu, e.name, e.weight))
        if prev is None or e.last_balance != prev.last_balance:
            if prev is not None:
                out.append((prev, e))
            last[(e.cpu, e.name, e.weight)] = e
    return out


def hz_of(events: Sequence[ShareEvent]) -> Optional[int]:
    """CONFIG_HZ from the jiffies the balances carry: a level is balanced
    when jiffies >= last_balance + msecs_to_jiffies(busy interval), and
    last_balance is then set to the jiffy it ends in, so from one balance
    of a CPU's level to its next, last_balance moves by the interval, a few
    jiffies more where the balance was late or slow (more where an
    unrecorded idle balance came between).  The HZ under which most pairs
    move by their interval within -1 to +5 jiffies (rounding, lateness);
    None where fewer than 2 pairs do under any."""
    pairs = _pairs(events)
    score = {hz: sum(-1 <= b.last_balance - a.last_balance - ttl_jiffies(a.busy_ms * 64, hz)
                     <= 5 for a, b in pairs) for hz in HZ_VALUES}
    best = max(HZ_VALUES, key=lambda hz: (score[hz], hz == 250))
    return best if score[best] >= 2 else None


def clock_drift(events: Sequence[ShareEvent], hz: int) -> Optional[int]:
    """How far jiffies fall behind the clock over the events, in jiffies.
    Each balance bounds jiffies - clock / TICK_NSEC from below (its
    last_balance plus its interval, against its time on the tick grid);
    where jiffies follow the clock, the bound's highest values in the first
    and the last half of the events agree within a few jiffies.  A periodic
    low resolution tick that loses ticks (TCG guests) drifts by hundreds.
    None for fewer than 4 events."""
    if len(events) < 4:
        return None
    tick = tick_ns_of(hz)
    bound = [e.last_balance + ttl_jiffies(e.busy_ms * 64, hz) - e.ns // tick for e in events]
    half = len(bound) // 2
    return max(bound[:half]) - max(bound[half:])


def tick_phase(events: Sequence[ShareEvent], tick_ns: int) -> int:
    """Where the events say the ticks fall on the clock, modulo TICK_NS:
    balancing runs in the softirq right after a tick, so the widest gap
    between the events' offsets (around the circle) ends at the tick.  In
    high resolution mode tick_init_jiffy_update() puts jiffies on multiples
    of TICK_NSEC, phase 0, which jiffies_of() uses; this is its check."""
    offs = sorted({e.ns % tick_ns for e in events})
    if not offs:
        return 0
    gaps = [(b - a, b) for a, b in zip(offs, offs[1:])]
    gaps.append((offs[0] + tick_ns - offs[-1], offs[0]))
    return max(gaps)[1]


def tick_ns_of(hz: int) -> int:
    return (1000000000 + hz // 2) // hz         # the kernel's TICK_NSEC


def jiffies_of(events: Sequence[ShareEvent], hz: int) -> List[int]:
    """Each event's jiffy, counted on the tick's grid (phase 0) from the clock."""
    return [e.ns // tick_ns_of(hz) for e in events]


def ttl_jiffies(busy_ms: int, hz: int) -> int:
    """sg_lb_cache_ttl(): msecs_to_jiffies(busy interval / 64), rounded up."""
    return -(-(busy_ms // 64) * hz // 1000)


@dataclass
class Shared:
    balances: int = 0          # busy balances of the level with sums (retries apart)
    reads: int = 0             # their per-CPU reads (the sum of their groups' weights)
    taken: int = 0             # ... that sums left within their lifetime could serve
    taken_other: int = 0       # ... sums another CPU left
    retries: int = 0           # balances again in the same jiffy, without the busiest CPU


def _level(doms: List[Tuple[str, FrozenSet[int]]], name: str, weight: int) -> Optional[int]:
    """The index of the CPU's domain NAME of WEIGHT CPUs (several are NUMA;
    weight 0: the first of that name)."""
    return next((i for i, (n, span) in enumerate(doms)
                 if n == name and weight in (0, len(span))), None)


def has_sums(doms: List[Tuple[str, FrozenSet[int]]], k: int) -> bool:
    """Whether level K of a CPU's domains keeps sums (sg_lb_cache_level(),
    sd_has_lb_sums()): not the lowest, nor a NUMA level above the first.
    Levels of asymmetric capacities keep none either; /proc/schedstat does
    not say which those are, and SMT machines have none."""
    return k > 0 and not (doms[k][0] == "NUMA"
                          and any(n == "NUMA" for n, _ in doms[:k]))


def groups_of(spans: Dict[int, List[Tuple[str, FrozenSet[int]]]], name: str,
              span: FrozenSet[int], weight: int) -> List[FrozenSet[int]]:
    """The groups of the domain NAME spanning SPAN: each CPU's domain below
    its own domain of that level (a CPU whose lower levels degenerated, a
    sibling offline, is a group of itself)."""
    out = []
    for c in span:
        doms = spans.get(c, [])
        k = _level(doms, name, weight)
        g = doms[k - 1][1] if k else frozenset({c})
        if g not in out:
            out.append(g)
    return out


def walk(groups: List[FrozenSet[int]], cpu: int) -> List[FrozenSet[int]]:
    """GROUPS in the order CPU's balance visits them: from the one with CPU,
    each at the place of its first CPU in the span walked upwards from CPU,
    wrapping (for_each_cpu_wrap() in build_sched_groups())."""
    top = 1 + max((c for g in groups for c in g), default=cpu)
    return sorted(groups, key=lambda g: min((c - cpu) % max(top, cpu + 1) for c in g))


def labels(levels: Iterable[Tuple[str, int]]) -> Dict[Tuple[str, int], str]:
    """Each level's (name, weight) name in the metrics, as in share_replay()'s
    results: its weight too where several levels have its name (NUMA)."""
    names = set(levels)
    return {(name, w): f"{name} {w}" if sum(1 for nm, _ in names if nm == name) > 1 else name
            for name, w in names}


def share_replay(events: Sequence[ShareEvent], spans: Dict[int, List[Tuple[str, FrozenSet[int]]]],
                 hz: int = 250, rq_ns: int = 0,
                 level_rq_ns: Optional[Dict[Tuple[str, int], int]] = None) -> Dict[str, Shared]:
    """Per level (its name, with its weight where several levels share it):
    see the module's text.  LEVEL_RQ_NS, per (name, weight), takes the place
    of RQ_NS for the levels it has (rq_ns_of())."""
    label = labels((e.name, e.weight) for e in events)
    out: Dict[str, Shared] = {}
    seen: Dict[Tuple[int, str, int], Tuple[int, int]] = {}   # the last (jiffy, last_balance)
    order: Dict[Tuple[int, str, int], List[FrozenSet[int]]] = {}     # walk() per CPU and level
    # Every group visit: when it reaches the group, the event's order, the
    # group's place in the walk, the group, its level's key, the event, its
    # jiffy, the sums' lifetime, the level's counts, the level's time of a
    # runqueue's read
    visits: List[Tuple[int, int, int, FrozenSet[int], Tuple[str, int], ShareEvent, int, int,
                       Shared, int]] = []
    for n, (e, now) in enumerate(zip(events, jiffies_of(events, hz))):
        doms = spans.get(e.cpu, [])
        k = _level(doms, e.name, e.weight)
        if k is None or not has_sums(doms, k):
            continue
        s = out.setdefault(label[(e.name, e.weight)], Shared())
        key = (e.cpu, e.name, e.weight)
        if seen.get(key) == (now, e.last_balance):     # sched_balance_rq()'s redo
            s.retries += 1
            continue
        seen[key] = (now, e.last_balance)
        s.balances += 1
        ttl = ttl_jiffies(e.busy_ms, hz)
        at = e.ns
        if key not in order:
            order[key] = walk(groups_of(spans, e.name, doms[k][1], e.weight), e.cpu)
        rq = (level_rq_ns or {}).get((e.name, e.weight), rq_ns)
        for i, g in enumerate(order[key]):
            visits.append((at, n, i, g, (e.name, e.weight), e, now, ttl, s, rq))
            at += rq * len(g)
    # Per group: the sums a visit can read (stamp, writer), and the writes
    # not readable yet, a heap of (when they can be read, the writer's event
    # on a tie, stamp, writer).  Visits come in time order, so a write
    # readable by one is readable by all after it.
    sums: Dict[Tuple[Tuple[str, int], FrozenSet[int]], Tuple[int, int]] = {}
    pending: Dict[Tuple[Tuple[str, int], FrozenSet[int]], List[Tuple[int, int, int, int]]] = {}
    for at, n, _, g, level, e, now, ttl, s, rq in sorted(visits, key=lambda v: v[:3]):
        s.reads += len(g)
        heap = pending.setdefault((level, g), [])
        while heap and heap[0][:2] < (at, n):
            _, _, stamp, writer = heapq.heappop(heap)
            # sg_lb_cache_write() leaves only sums read later than its own
            if (level, g) not in sums or stamp >= sums[(level, g)][0]:
                sums[(level, g)] = (stamp, writer)
        stamp, writer = sums.get((level, g), (-1, -1))
        if stamp >= 0 and stamp <= now <= stamp + ttl:
            s.taken += len(g)
            s.taken_other += len(g) if writer != e.cpu else 0
        else:
            heapq.heappush(heap, (at + rq * len(g), n, now, e.cpu))
    return out
