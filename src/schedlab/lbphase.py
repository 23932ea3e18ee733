"""When do parent and child levels compute the same group statistics?

The lb-phase probe (guest/bt/lbphase.bt) keeps one key per busy or idle
balance that goes on to compute the statistics of a domain's groups
(should_we_balance() said yes).  This module replays those events in clock
order against the domains' spans from /proc/schedstat and asks, for every
busy balance above the lowest level, which of its groups' totals had been
computed no more than W earlier (by the guest's clock; 4 ms is one jiffy
at the lab's HZ=250):

- by a balance of the group's own span (the child domain, on any CPU of
  it): what a cache written at the end of the child's balance could serve;
- or also by a balance at the parent's level that read the group (another
  CPU of the span, or the same one earlier): what "write on miss" adds.

The share is of the per-CPU reads (a group counts its weight).  It ignores
what would refuse or invalidate a cached total (a migration, another dst's
LLC), so it is an upper bound of what reuse can save, and for NUMA levels it
takes the groups to be the child domains' spans, which holds for two nodes.
The same-pass share is the number of parent balances for which the same
softirq pass had just balanced the child level for the same CPU (the only
case where the local group's totals are fresh without another CPU).

share_replay() asks the question of SG_STATS_REUSE (the series' lbstats
topic) of the lb-share probe's events (guest/bt/lbshare.bt): the busy
balances above the lowest level, each with its time and its domain's busy
interval; their jiffies are counted on the tick's grid (jiffies_of()).
A busy balance leaves the sums of every group whose runqueues it read with
the group, and another busy balance of the level takes them while
stamp <= jiffies <= stamp + ttl, ttl = msecs_to_jiffies(balance_interval *
busy_factor / 64) of the taker's domain; a group taken from sums leaves
their stamp as it was.  Moves, which make sums stale, are not seen, nor
the CPUs a retry leaves out (a balance whose busiest CPU's tasks were all
pinned balances again in the same jiffy without it, and reads that CPU's
group where the replay takes it): the share is an upper bound of what the
feature serves, with the kernel's own phases, on any kernel.  Sums another
CPU left are counted apart: sharing among CPUs is the feature's point, a
CPU's own retry the case the bound overstates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Sequence, Tuple

WINDOWS_MS = (4, 16)
_KEY = re.compile(r"^@lbp_ev\[(\d+), (\d+), (\S+), (\d+), (\d+)\]: \d+\s*$")
_SHARE_KEY = re.compile(r"^@lbs_ev\[(\d+), (\S+), (\d+), (\d+), (\d+)\]: \d+\s*$")
# CONFIG_HZ values the clock's ratio is rounded to
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
    last_balance: int  # the domain's last_balance (jiffies) when it was balanced
    busy_ms: int       # the domain's balance_interval * busy_factor then
    ns: int


def parse_share_events(text: str) -> List[ShareEvent]:
    """lbshare.bt's events in time order, each once (the map is printed when
    the window closes and again at exit)."""
    out = set()
    for line in text.splitlines():
        m = _SHARE_KEY.match(line.strip())
        if m:
            out.add(ShareEvent(int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4)),
                               int(m.group(5))))
    return sorted(out, key=lambda e: (e.ns, e.cpu))


def hz_of(events: Sequence[ShareEvent]) -> int:
    """CONFIG_HZ from the domains' last_balance (jiffies, one balance
    interval behind at most) against the clock, between the first and the
    last tenth of the events, rounded to a value the kernel offers; 250
    where they span less than 2 s or fewer than 20 events."""
    if len(events) < 20 or events[-1].ns - events[0].ns < 2000000000:
        return 250
    k = len(events) // 10
    head, tail = events[:k], events[-k:]
    jif = sum(e.last_balance for e in tail) / k - sum(e.last_balance for e in head) / k
    ns = sum(e.ns for e in tail) / k - sum(e.ns for e in head) / k
    return min(HZ_VALUES, key=lambda hz: abs(hz - jif * 1e9 / ns))


def tick_phase(events: Sequence[ShareEvent], tick_ns: int) -> int:
    """Where the ticks fall on the clock, modulo TICK_NS: balancing runs in
    the softirq right after a tick, so the events' offsets in the tick
    cluster after it, and the widest gap between offsets (around the
    circle) ends at the tick."""
    offs = sorted({e.ns % tick_ns for e in events})
    if not offs:
        return 0
    gaps = [(b - a, b) for a, b in zip(offs, offs[1:])]
    gaps.append((offs[0] + tick_ns - offs[-1], offs[0]))
    return max(gaps)[1]


def jiffies_of(events: Sequence[ShareEvent], hz: int) -> List[int]:
    """Each event's jiffy, counted on the tick's grid from the clock."""
    tick_ns = (1000000000 + hz // 2) // hz         # the kernel's TICK_NSEC
    phase = tick_phase(events, tick_ns)
    return [(e.ns - phase) // tick_ns for e in events]


def ttl_jiffies(busy_ms: int, hz: int) -> int:
    """sg_lb_cache_ttl(): msecs_to_jiffies(busy interval / 64), rounded up."""
    return -(-(busy_ms // 64) * hz // 1000)


@dataclass
class Shared:
    balances: int = 0          # busy balances of the level (above the lowest)
    reads: int = 0             # their per-CPU reads (the sum of their groups' weights)
    taken: int = 0             # ... that sums left within their lifetime could serve
    taken_other: int = 0       # ... sums another CPU left (not the balance's own retry)


def share_replay(events: Sequence[ShareEvent], spans: Dict[int, List[Tuple[str, FrozenSet[int]]]],
                 hz: int = 0) -> Dict[str, Shared]:
    """Per level name: see the module's text.  HZ: 0 to take it from the events."""
    hz = hz or hz_of(events)
    # (level, group) -> the sums' jiffy and the CPU that left them
    sums: Dict[Tuple[str, FrozenSet[int]], Tuple[int, int]] = {}
    out: Dict[str, Shared] = {}
    for e, now in zip(events, jiffies_of(events, hz)):
        doms = spans.get(e.cpu, [])
        k = next((i for i, (name, _) in enumerate(doms) if name == e.name), None)
        if not k:       # not in this CPU's spans, or its lowest level: no sums there
            continue
        groups = {frozenset(spans[c][k - 1][1]) for c in doms[k][1]
                  if c in spans and len(spans[c]) > k - 1}
        s = out.setdefault(e.name, Shared())
        s.balances += 1
        ttl = ttl_jiffies(e.busy_ms, hz)
        for g in groups:
            s.reads += len(g)
            stamp, writer = sums.get((e.name, g), (None, -1))
            if stamp is not None and stamp <= now <= stamp + ttl:
                s.taken += len(g)
                s.taken_other += len(g) if writer != e.cpu else 0
            else:
                sums[(e.name, g)] = (now, e.cpu)
    return out
