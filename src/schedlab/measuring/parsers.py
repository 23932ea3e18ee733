"""Parsers of the measurement tools' outputs (pure functions).

Each returns metrics as {name: Metric}; tests/data/tools/ holds real outputs
captured in the lab VM that the tests parse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple


@dataclass
class Metric:
    value: float
    unit: str
    kind: str                 # "time", "rate" or "count": picks the mean
    # None: neither direction is better (a property of the machine, such
    # as how in step its balances run); tables show B's plain change
    higher_is_better: Optional[bool]


def _float(m: Optional[re.Match], group: int = 1) -> Optional[float]:
    return float(m.group(group)) if m else None


def hackbench(text: str) -> Dict[str, Metric]:
    """rt-tests hackbench: 'Time: 5.208'."""
    v = _float(re.search(r"^Time:\s*([0-9.]+)", text, re.M))
    return {} if v is None else {"hackbench time": Metric(v, "s", "time", False)}


def ni_hackbench(text: str) -> Dict[str, Metric]:
    """guest/workloads/ni-hackbench.sh: 'ni-hackbench: ROUNDS MESSAGES SECONDS'."""
    m = re.search(r"^ni-hackbench:\s*(\d+)\s+(\d+)\s+([0-9.]+)", text, re.M)
    if not m or float(m.group(3)) <= 0:
        return {}
    secs = float(m.group(3))
    return {"hackbench messages/s": Metric(int(m.group(2)) / secs, "msg/s", "rate", True),
            "hackbench rounds": Metric(float(m.group(1)), "rounds", "count", True),
            "hackbench window": Metric(secs, "s", "time", False)}


def perf_bench_sched(text: str) -> Dict[str, Metric]:
    """perf bench sched messaging or pipe."""
    out: Dict[str, Metric] = {}
    what = "pipe" if "sched/pipe" in text else "messaging"
    total = _float(re.search(r"Total time:\s*([0-9.]+)\s*\[sec\]", text))
    if total is not None:
        out[f"perf sched {what} time"] = Metric(total, "s", "time", False)
    usecs = _float(re.search(r"([0-9.]+)\s+usecs/op", text))
    if usecs is not None:
        out[f"perf sched {what} usecs/op"] = Metric(usecs, "us", "time", False)
    ops = _float(re.search(r"([0-9.]+)\s+ops/sec", text))
    if ops is not None:
        out[f"perf sched {what} ops/s"] = Metric(ops, "ops/s", "rate", True)
    return out


_STRESS = re.compile(r"metrc:\s*\[\d+\]\s+(\S+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)"
                     r"\s+([0-9.]+)\s+([0-9.]+)")


def stress_ng(text: str) -> Dict[str, Metric]:
    """stress-ng --metrics-brief: bogo ops/s (real time) per stressor."""
    out: Dict[str, Metric] = {}
    for m in _STRESS.finditer(text):
        name = m.group(1)
        out[f"stress-ng {name} bogo-ops/s"] = Metric(float(m.group(6)), "ops/s", "rate", True)
        out[f"stress-ng {name} real time"] = Metric(float(m.group(3)), "s", "time", False)
    return out


def dbench(text: str) -> Dict[str, Metric]:
    """dbench/tbench: 'Throughput 123.4 MB/sec  2 clients ...'."""
    m = re.search(r"^Throughput\s+([0-9.]+)\s+MB/sec", text, re.M)
    tool = "tbench" if "tbench" in text.split("\n", 1)[0] else "dbench"
    return {} if not m else {f"{tool} throughput": Metric(float(m.group(1)), "MB/s", "rate",
                                                          True)}


# /proc/schedstat version 17: per domain, 11 sched_balance_rq() counters for
# each idle type, in the order busy (__CPU_NOT_IDLE), idle, newly idle.
IDLE_TYPES = ("busy", "idle", "newidle")
LB_FIELDS = ("lb_count", "lb_balanced", "lb_failed", "lb_imbalance_load", "lb_imbalance_util",
             "lb_imbalance_task", "lb_imbalance_misfit", "lb_gained", "lb_hot_gained",
             "lb_nobusyq", "lb_nobusyg")


# A CPU's line: cpuN yld_count 0 sched_count sched_goidle ttwu_count ...;
# sched_goidle counts the times the CPU switched to its idle task.
CPU_FIELDS = {"sched_goidle": 4}


def schedstat(text: str) -> Dict[str, Dict[str, int]]:
    """Sum over CPUs of each domain level's counters: {'MC': {'lb_count.busy': n}},
    and of the CPUs' own counters under 'cpu': {'cpu': {'sched_goidle': n}}."""
    if not re.search(r"^version 17$", text, re.M):
        raise ValueError("only /proc/schedstat version 17 is understood")
    out: Dict[str, Dict[str, int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if parts and re.fullmatch(r"cpu\d+", parts[0]) and len(parts) > max(CPU_FIELDS.values()):
            cpu = out.setdefault("cpu", {})
            for field, i in CPU_FIELDS.items():
                cpu[field] = cpu.get(field, 0) + int(parts[i])
            continue
        if not parts or not parts[0].startswith("domain") or len(parts) < 3 + 33:
            continue
        name = parts[1]
        vals = [int(x) for x in parts[3:3 + 33]]
        dom = out.setdefault(name, {})
        for t, itype in enumerate(IDLE_TYPES):
            for f, field in enumerate(LB_FIELDS):
                key = f"{field}.{itype}"
                dom[key] = dom.get(key, 0) + vals[t * len(LB_FIELDS) + f]
    return out


def schedstat_delta(before: str, after: str) -> Dict[str, Metric]:
    """Load-balance attempts per domain level and idle type during a run; the
    newly idle ones that moved something (neither balanced already nor
    failed); the times CPUs went idle."""
    a, b = schedstat(before), schedstat(after)

    def delta(name: str, key: str) -> float:
        return float(b[name].get(key, 0) - a.get(name, {}).get(key, 0))
    out: Dict[str, Metric] = {}
    for name in b:
        if name == "cpu":
            out["idle entries (sched_goidle)"] = Metric(delta(name, "sched_goidle"), "entries",
                                                        "count", False)
            continue
        for itype in IDLE_TYPES:
            out[f"balance {name} {itype}"] = Metric(delta(name, f"lb_count.{itype}"), "calls",
                                                    "count", False)
        pulled = sum(sign * delta(name, f"{f}.newidle") for sign, f in
                     ((1, "lb_count"), (-1, "lb_balanced"), (-1, "lb_failed")))
        out[f"balance {name} newidle pulled"] = Metric(pulled, "calls", "count", False)
    return out


def proc_stat_busy(before: str, after: str) -> Dict[str, Metric]:
    """CPU utilisation over a run from the aggregate 'cpu' line of /proc/stat."""
    def fields(text: str) -> List[int]:
        for line in text.splitlines():
            if line.startswith("cpu "):
                return [int(x) for x in line.split()[1:]]
        raise ValueError("no aggregate cpu line")
    a, b = fields(before), fields(after)
    d = [y - x for x, y in zip(a, b)]
    total = sum(d[:8])
    idle = d[3] + d[4]
    busy = 100.0 * (total - idle) / total if total else 0.0
    return {"cpu busy": Metric(busy, "%", "time", False)}


_MAP = re.compile(r"^@([A-Za-z_][A-Za-z0-9_]*)(?:\[([^\]]*)\])?:\s+(-?\d+)\s*$")


def bpftrace_maps(text: str) -> Dict[str, float]:
    """Scalar and keyed count maps printed by bpftrace at exit."""
    out: Dict[str, float] = {}
    for line in text.splitlines():
        m = _MAP.match(line.strip())
        if m:
            key = m.group(1) + (f"[{m.group(2)}]" if m.group(2) else "")
            out[key] = float(m.group(3))
    return out


_STR_MAP = re.compile(r"^@([A-Za-z_][A-Za-z0-9_]*)\[([^\]]*)\]:\s+(\S.*?)\s*$")


def bpftrace_string_maps(text: str) -> Dict[str, Dict[str, str]]:
    """Keyed maps whose values are strings: {map: {key: value}}."""
    out: Dict[str, Dict[str, str]] = {}
    for line in text.splitlines():
        m = _STR_MAP.match(line.strip())
        if m and not re.fullmatch(r"-?\d+", m.group(3)):
            out.setdefault(m.group(1), {})[m.group(2)] = m.group(3)
    return out


_HIST = re.compile(r"^\s*(\d+)\s*->\s*(\d+)\s*:\s*(\d+)\s*\|", re.M)
_AVG = re.compile(r"avg\s*=\s*([0-9.]+)\s*(\w+),\s*total:\s*([0-9.]+)\s*\w+,\s*count:\s*(\d+)")


@dataclass
class Latency:
    unit: str
    buckets: List[tuple]          # (low, high, count)
    avg: Optional[float] = None
    total: Optional[float] = None
    count: Optional[int] = None


def funclatency(text: str) -> Latency:
    """bcc or libbpf-tools funclatency: log2 histogram and the avg line."""
    unit = "nsecs"
    m = re.search(r"^\s*(nsecs?|usecs?|msecs?)\s*:\s*count", text, re.M)
    if m:
        unit = m.group(1)
    buckets = [(int(a), int(b), int(c)) for a, b, c in _HIST.findall(text)]
    lat = Latency(unit, buckets)
    avg = _AVG.search(text)
    if avg:
        lat.avg, lat.total, lat.count = float(avg.group(1)), float(avg.group(3)), \
            int(avg.group(4))
    elif buckets:
        lat.count = sum(c for _, _, c in buckets)
    return lat


UNIT_NS = {"nsecs": 1, "nsec": 1, "usecs": 1000, "usec": 1000, "msecs": 1000000,
           "msec": 1000000}
_BT_HIST = re.compile(r"^\[(\d+)([KMG]?),\s*(\d+)([KMG]?)\)\s+(\d+)\s*\|")
_BT_HIST_ONE = re.compile(r"^\[(\d+)([KMG]?)\]\s+(\d+)\s*\|")
_SUFFIX = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}


def bpftrace_hist(text: str) -> Dict[str, List[tuple]]:
    """Log2 histograms printed by bpftrace: {map: [(low, high, count)]}, high exclusive
    as bpftrace prints it, turned inclusive like funclatency's buckets."""
    out: Dict[str, List[tuple]] = {}
    current = None
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"^@([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?:\s*$", s)
        if m:
            current = m.group(1)
            out[current] = []
            continue
        if current is None:
            continue
        m = _BT_HIST.match(s)
        if m:
            lo = int(m.group(1)) * _SUFFIX[m.group(2)]
            hi = int(m.group(3)) * _SUFFIX[m.group(4)]
            out[current].append((lo, hi - 1, int(m.group(5))))
            continue
        m = _BT_HIST_ONE.match(s)
        if m:
            v = int(m.group(1)) * _SUFFIX[m.group(2)]
            out[current].append((v, v, int(m.group(3))))
            continue
        if s:
            current = None
    return {k: v for k, v in out.items() if v}


_LHIST_OVER = re.compile(r"^\[(\d+)([KMG]?),\s*\.\.\.\)\s+(\d+)\s*\|")


def bpftrace_keyed_hist(text: str) -> Dict[str, List[tuple]]:
    """Histograms (hist or lhist) keyed as printed: {'map[key]': [(low, high, count)]},
    high inclusive; an lhist's overflow bucket is (low, None, count)."""
    out: Dict[str, List[tuple]] = {}
    current = None
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"^@([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?:\s*$", s)
        if m:
            current = m.group(1) + (m.group(2) or "")
            out[current] = []
            continue
        if current is None:
            continue
        m = _BT_HIST.match(s)
        if m:
            lo = int(m.group(1)) * _SUFFIX[m.group(2)]
            hi = int(m.group(3)) * _SUFFIX[m.group(4)]
            out[current].append((lo, hi - 1, int(m.group(5))))
            continue
        m = _LHIST_OVER.match(s)
        if m:
            out[current].append((int(m.group(1)) * _SUFFIX[m.group(2)], None, int(m.group(3))))
            continue
        if s and not s.startswith("(..."):
            current = None
    return {k: v for k, v in out.items() if v}


_PAIR = re.compile(r"^@([A-Za-z_][A-Za-z0-9_]*)\[([^,\]]*),\s*(-?\d+)\]:\s+(\d+)\s*$")


def bpftrace_value_counts(text: str, name: str, step: int = 1) -> Dict[str, List[tuple]]:
    """A count map keyed by (key, value): @name[key, value]: count, as buckets
    per key, [(value, value + step - 1, count)], sorted (the last print wins)."""
    out: Dict[str, Dict[int, int]] = {}
    for line in text.splitlines():
        m = _PAIR.match(line.strip())
        if m and m.group(1) == name:
            out.setdefault(m.group(2).strip(), {})[int(m.group(3))] = int(m.group(4))
    return {k: [(v, v + step - 1, c) for v, c in sorted(d.items())] for k, d in out.items()}


def bpftrace_pairs(text: str, name: str) -> Dict[Tuple[int, int], int]:
    """A count map keyed by two integers: @name[a, b]: count (the last print wins)."""
    return {(int(a), lo): c for a, buckets in bpftrace_value_counts(text, name).items()
            for lo, _, c in buckets}


def parse_cores(text: str) -> Dict[int, int]:
    """cores.txt ('CPU SIBLINGS' per line, SIBLINGS as in sysfs: 0-3 or 0,4)
    as CPU -> the first CPU of its core."""
    out: Dict[int, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            first = parts[1].replace("-", ",").split(",")[0]
            if first.isdigit():
                out[int(parts[0])] = int(first)
    return out


def hist_median(buckets: List[tuple]) -> Optional[float]:
    """The median of a histogram, at the middle of its bucket (None if empty or
    in an open bucket)."""
    n = sum(c for _, _, c in buckets)
    seen = 0
    for lo, hi, c in buckets:
        seen += c
        if c and seen * 2 >= n:
            return None if hi is None else (lo + hi) / 2
    return None


def hist_mean(buckets: List[tuple]) -> float:
    """Mean of a log2 histogram, each bucket at its midpoint."""
    n = sum(c for _, _, c in buckets)
    return sum((lo + hi) / 2 * c for lo, hi, c in buckets) / n if n else 0.0


# schbench's percentiles the parser keeps, as schbench prints them.
SCHBENCH_PCTS = (("50.0", "p50"), ("99.0", "p99"), ("99.9", "p99.9"))


def schbench(text: str) -> Dict[str, Metric]:
    """schbench: the 50th, 99th and 99.9th percentiles of wakeup and request
    latencies, average RPS.

    Uses the last block of each kind: schbench prints them every interval
    and once more at the end, over the whole run after its warm-up."""
    out: Dict[str, Metric] = {}
    for kind in ("Wakeup", "Request"):
        blocks = re.findall(kind + r" Latencies percentiles \(usec\).*?(?=\n\S|\Z)",
                            text, re.S)
        if not blocks:
            continue
        for pct, short in SCHBENCH_PCTS:
            m = re.search(r"^\s*\*?\s*" + re.escape(pct) + r"th:\s*(\d+)", blocks[-1], re.M)
            if m:
                out[f"schbench {kind.lower()} {short}"] = Metric(float(m.group(1)), "us",
                                                                 "time", False)
    rps = list(re.finditer(r"average rps:\s*([0-9.]+)", text))
    if rps:
        out["schbench rps"] = Metric(float(rps[-1].group(1)), "req/s", "rate", True)
    return out


# guest/workloads/timed.sh's last line: the benchmark, the unit its count
# is in, the rounds, the count, the seconds they took and the seconds the
# benchmark reported itself (absent from older runs).
_TIMED = re.compile(r"^timed: (\S+) (\S+) (\d+) (\d+) ([0-9.]+)(?: ([0-9.]+))?$", re.M)


def timed(text: str) -> Dict[str, Metric]:
    """guest/workloads/timed.sh: a fixed-work benchmark started again until
    its time passed, as a rate by the wall clock ('LABEL UNIT/s') and, where
    the benchmark reports its own time (its work without its tasks' start
    and exit), by that ('LABEL UNIT/s, own time')."""
    m = _TIMED.search(text)
    if not m or float(m.group(5)) <= 0 or int(m.group(3)) < 1:
        return {}
    label, unit, count, secs = m.group(1), m.group(2), int(m.group(4)), float(m.group(5))
    out = {f"{label} {unit}/s": Metric(count / secs, f"{unit}/s", "rate", True),
           f"{label} rounds": Metric(float(m.group(3)), "rounds", "count", True)}
    own = float(m.group(6) or 0)
    if own > 0:
        out[f"{label} {unit}/s, own time"] = Metric(count / own, f"{unit}/s", "rate", True)
    return out


_TG_LINE = re.compile(r"^tg: (\w+) (\S+)", re.M)
# How far every group's CPU time over the window may exceed the CPUs
# before the window is taken for a wrong clock.  The lab's TCG runs reach
# 1.26 (the tg-* sets of docs/results/tg-*.md; cpu.stat and the window's ends are not read
# at one instant, which explains a little of it), icount runs 1.29; one
# icount run reached 10.8.
WINDOW_SLACK = 3.0


def tg_gather(text: str) -> Dict[str, Metric]:
    """guest/workloads/tg-gather.sh: the group's CPU time against its
    entitlement, how many CPUs carried its run time, its migrations and
    where its wakeups were placed (guest/bt/tg.bt), and the waker's own
    throughput."""
    tg = {k: v for k, v in _TG_LINE.findall(text)}
    out: Dict[str, Metric] = {}
    try:
        usage, window = float(tg["usage_usec"]), float(tg["window_usec"])
        entitled = float(tg["entitled"])
    except (KeyError, ValueError):
        return out
    if window <= 0:
        return out
    used = usage / window
    out["tg cpus entitled"] = Metric(entitled, "CPUs", "count", True)
    window_ok = True
    if "busy_usage_usec" in tg and "cpus" in tg:
        # Every CPU's time over the window, as the groups' cpu.stat saw it.
        every = (usage + float(tg["busy_usage_usec"])) / window
        out["tg all groups' cpus used"] = Metric(every, "CPUs", "count", True)
        # More than the machine has: the window (CLOCK_REALTIME) did not run
        # with the clock cpu.stat counts in (seen under qemu's icount: 173
        # CPUs' worth on 16), so nothing is divided by it.
        window_ok = every <= WINDOW_SLACK * float(tg["cpus"])
    if not window_ok:
        out["tg window check failed"] = Metric(1.0, "runs", "count", False)
    else:
        out["tg cpus used"] = Metric(used, "CPUs", "count", True)
        if entitled > 0:
            out["tg achieved/entitled"] = Metric(100.0 * used / entitled, "%", "count", True)
    # The probe's maps as printed when the window closed; what bpftrace
    # prints again at exit (maps cleared or refilled since) is not counted.
    start, stop = text.find("tg: counting"), text.find("tg: stopped")
    shown = text[start:stop] if 0 <= start < stop else ""
    maps = bpftrace_maps(shown)
    per_cpu = [v for k, v in maps.items() if k.startswith("rt[")]
    total = sum(per_cpu)
    if total > 0:
        out["tg cpus carrying >=10% of its time"] = Metric(
            float(sum(1 for v in per_cpu if v >= 0.1 * total)), "CPUs", "count", True)
        out["tg largest cpu share"] = Metric(100.0 * max(per_cpu) / total, "%", "count",
                                             False)
    secs = window / 1e6
    wakes = maps.get("wakes", 0.0)
    if window_ok:
        out["tg migrations per s"] = Metric(maps.get("mig", 0.0) / secs, "events/s", "count",
                                            False)
        out["tg wakeups per s"] = Metric(wakes / secs, "events/s", "count", True)
    if wakes:
        out["tg wakeups placed on a busy cpu"] = Metric(
            100.0 * maps.get("wakes_busy", 0.0) / wakes, "%", "count", False)
        out["tg wakeups moved"] = Metric(100.0 * maps.get("wakes_moved", 0.0) / wakes, "%",
                                         "count", False)
    hists = bpftrace_keyed_hist(shown)
    for name, label in (("flips", "wakee"), ("wflips", "waker")):
        med = hist_median(hists.get(name, []))
        if med is not None:
            out[f"tg {label} wakee_flips median"] = Metric(med, "flips", "count", False)
    waker = tg.get("waker", "")
    if not window_ok:
        # The waker's own rate comes from the same guest clock.
        return out
    if waker == "dbench":
        out.update(dbench(text))
    elif waker == "hackbench":
        if "rounds" in tg:
            out["hackbench rounds per s"] = Metric(float(tg["rounds"]) / secs, "rounds/s",
                                                   "rate", True)
    else:
        out.update({k: v for k, v in stress_ng(text).items() if k.endswith("bogo-ops/s")})
    return out


_CGN_LINE = re.compile(r"^cgn: (\w+) (-?\d+)", re.M)


def cg_nested(text: str) -> Dict[str, Metric]:
    """guest/workloads/cg-nested.sh: leaf0's CPU time against its nested
    siblings' (leaf1 + leaf2), which it is entitled to match.  The error is
    the cgroup selftest's measure, |leaf0 - nested| / (leaf0 + nested),
    whose tolerance there is 15%.  leaf0's share is exact at 50%; it is
    counted as higher-is-better because every run seen had it below."""
    v = {k: int(x) for k, x in _CGN_LINE.findall(text)}
    try:
        leaf0, nested = v["leaf0_usec"], v["leaf1_usec"] + v["leaf2_usec"]
        window, cpus = v["window_usec"], v["cpus"]
    except KeyError:
        return {}
    if leaf0 < 0 or nested < 0 or leaf0 + nested <= 0 or window <= 0 or cpus <= 0:
        return {}
    total = leaf0 + nested
    return {
        "nested share error": Metric(100.0 * abs(leaf0 - nested) / total, "%", "count", False),
        "leaf0 share": Metric(100.0 * leaf0 / total, "%", "count", True),
        "cg-nested cpus used": Metric(total / window, "CPUs", "count", True),
    }
