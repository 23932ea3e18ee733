"""The probes' parsers: what a probe's bpftrace maps (and the latency tool's
histogram) become as metrics.

Each function here fills Parsed.metrics (and histograms, problems) for one
probe of the registry (probes.py); the raw formats are read by parsers.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Tuple

from schedlab.measuring import insncount, lbphase, parsers
from schedlab.measuring.bpfgen import IDLE_KEYS
from schedlab.measuring.parsers import Metric


@dataclass
class Parsed:
    """What a probe's parser gets and gives."""
    maps: Dict[str, float]
    seconds: float
    probe_out: str
    latency_out: str = ""
    latency_more: Dict[str, str] = field(default_factory=dict)  # function -> its output
    latency_tool: str = "none"
    overhead: Optional[float] = None      # the cost probes' own instructions per call
    core_of: Dict[int, int] = field(default_factory=dict)   # CPU -> first CPU of its core
    schedstat: str = ""                   # /proc/schedstat before the run (domain spans)
    insns_out: str = ""                   # insns.txt (insncount.py)
    lines_out: str = ""                   # lines.json (linecount.py)
    perf_stat: str = ""                   # perf-stat.txt (perf stat -x, of the window)
    c2c_stats: str = ""                   # c2c-stats.txt (perf c2c report --stats)
    metrics: Dict[str, Metric] = field(default_factory=dict)
    histograms: Dict[str, dict] = field(default_factory=dict)
    problems: List[str] = field(default_factory=list)
    # What the run's numbers need said beside them, without making it
    # incomplete (a run with problems is measured again on resume).
    notes: List[str] = field(default_factory=list)

    def count(self, name: str, key: str, unit: str) -> float:
        """A count map as a metric and, with a duration, as a rate."""
        value = self.maps.get(key, 0.0)   # bpftrace prints nothing for a map never written
        self.metrics[name] = Metric(value, unit, "count", False)
        if self.seconds > 0:
            self.metrics[name + " per s"] = Metric(value / self.seconds, unit + "/s",
                                                   "count", False)
        return value


def swb(p: Parsed) -> None:
    calls = p.count("should_we_balance calls", "swb_calls", "calls")
    p.count("idle_cpu probes in should_we_balance", "swb_idle_probes", "probes")
    if calls:
        p.metrics["idle_cpu probes per should_we_balance call"] = Metric(
            p.maps.get("swb_idle_probes", 0.0) / calls, "probes", "count", False)
    hist = parsers.bpftrace_hist(p.probe_out).get("swb_ns")
    n = sum(c for _, _, c in hist) if hist else 0
    if "swb_ns_sum" in p.maps and calls and n:
        p.metrics["should_we_balance mean time (bpftrace)"] = Metric(
            p.maps["swb_ns_sum"] / n, "ns", "time", False)


def lb(p: Parsed) -> None:
    for idx, itype in enumerate(parsers.IDLE_TYPES):
        p.count(f"sched_balance_rq {itype} calls", f"lb_calls[{idx}]", "calls")
    for idx, itype in enumerate(parsers.IDLE_TYPES):
        # A map key never written is not printed: no call, no time.
        calls, total = p.maps.get(f"lb_calls[{idx}]"), p.maps.get(f"lb_ns_sum[{idx}]", 0.0)
        p.metrics[f"sched_balance_rq {itype} total time"] = Metric(total, "ns", "time", False)
        if calls:
            p.metrics[f"sched_balance_rq {itype} mean time"] = Metric(total / calls, "ns",
                                                                     "time", False)


def migrate(p: Parsed) -> None:
    """All migrations, and by direction: per the lowest domain of the source
    CPU whose span holds the destination (SMT: to a sibling thread; the top
    level: across its groups), as a rate and as a share of all."""
    total = p.count("migrations", "migrations", "events")
    spans = lbphase.parse_spans(p.schedstat)
    if not spans:       # no /proc/schedstat (a host kernel without SCHEDSTATS)
        return
    pair = re.compile(r"^mig_pair\[(\d+), (\d+)\]$")
    by_level: Dict[str, float] = {}
    for key, value in p.maps.items():
        m = pair.match(key)
        if m:
            name = lowest_shared_domain(spans, int(m.group(1)), int(m.group(2)))
            by_level[name] = by_level.get(name, 0.0) + value
    for name, n in sorted(by_level.items()):
        if p.seconds > 0:
            p.metrics[f"migrations per s, lowest shared domain ({name})"] = Metric(
                n / p.seconds, "events/s", "count", False)
        if total:
            p.metrics[f"migrations share, lowest shared domain ({name})"] = Metric(
                100.0 * n / total, "%", "count", False)


def lowest_shared_domain(spans: Dict[int, List[Tuple[str, FrozenSet[int]]]], src: int,
                         dst: int) -> str:
    """The name of src's lowest domain whose span holds dst ('none' without one:
    a CPU offline when /proc/schedstat was read)."""
    for name, span in spans.get(src, []):
        if dst in span:
            return name
    return "none"


# ni.bt's and avgidle.bt's avg_idle buckets: below 1, 2, 4 and 10 times a
# domain's max_newidle_lb_cost, and above.
NI_GATE_MULTIPLES = (1, 2, 4, 10)


def _gate_shares(p: Parsed, buckets: Dict[int, float], n: float, name: str) -> None:
    """The cumulative shares of N in BUCKETS below each multiple, as NAME
    formatted with the multiple."""
    below = 0.0
    for b, x in enumerate(NI_GATE_MULTIPLES):
        below += buckets.get(b, 0.0)
        p.metrics[name.format(x)] = Metric(100.0 * below / n, "%", "count", False)


def avgidle(p: Parsed) -> None:
    n = p.maps.get("ai_n", 0.0)
    p.metrics["idle periods ended"] = Metric(n, "events", "count", False)
    if n:
        p.metrics["avg_idle at newidle mean"] = Metric(p.maps.get("ai_sum", 0.0) / n / 1000,
                                                       "us", "count", False)
        p.metrics["avg_idle at newidle below 500 us"] = Metric(
            100.0 * p.maps.get("ai_lt500", 0.0) / n, "%", "count", False)
        gate = {b: p.maps[f"ai_gate[{b}]"] for b in range(len(NI_GATE_MULTIPLES) + 1)
                if f"ai_gate[{b}]" in p.maps}
        if gate:    # older results have no buckets
            _gate_shares(p, gate, n, "idle entries with avg_idle below {}x the lowest "
                                     "max_newidle_lb_cost")


def ni(p: Parsed) -> None:
    """Per domain: newly idle balances that ran, their NI ratio (mean, share
    at 1024), the recomputations of the ratio seen, the domain's cost, and
    the cumulative shares of balances whose CPU's avg_idle was below each
    multiple of that cost."""
    names = parsers.bpftrace_string_maps(p.probe_out).get("ni_name", {})
    gate = re.compile(r"^ni_gate\[(\d+), (\d+)\]$")
    buckets: Dict[str, Dict[int, float]] = {}
    for key, value in p.maps.items():
        m = gate.match(key)
        if m:
            buckets.setdefault(m.group(1), {})[int(m.group(2))] = value
    for level in sorted((k[5:-1] for k in p.maps if k.startswith("ni_n[")), key=int):
        n = p.maps[f"ni_n[{level}]"]
        tag = f" ({names.get(level, 'level ' + level)})"
        p.metrics["newidle balances" + tag] = Metric(n, "calls", "count", False)
        if not n:
            continue
        p.metrics["NI ratio at newidle balance, mean" + tag] = Metric(
            p.maps.get(f"ni_ratio[{level}]", 0.0) / n, "/1024", "count", False)
        p.metrics["NI ratio at 1024 (die off)" + tag] = Metric(
            100.0 * p.maps.get(f"ni_off[{level}]", 0.0) / n, "%", "count", False)
        p.metrics["NI ratio recomputations seen" + tag] = Metric(
            p.maps.get(f"ni_recomputed[{level}]", 0.0), "changes", "count", False)
        p.metrics["max_newidle_lb_cost at newidle balance, mean" + tag] = Metric(
            p.maps.get(f"ni_cost[{level}]", 0.0) / n / 1000, "us", "count", False)
        _gate_shares(p, buckets.get(level, {}), n, "avg_idle below {}x max_newidle_lb_cost"
                     + tag)


def _funclatency(p: Parsed, func: str, text: str) -> None:
    """One funclatency output: FUNC's histogram and its mean time."""
    lat = parsers.funclatency(text)
    if not lat.buckets:
        p.problems.append(f"no histogram of {func}() from {p.latency_tool} funclatency")
        return
    p.histograms[func] = {"tool": p.latency_tool, "unit": lat.unit, "buckets": lat.buckets}
    mean = lat.avg if lat.avg is not None else parsers.hist_mean(lat.buckets)
    p.metrics[f"{func} mean time (funclatency)"] = Metric(
        mean * parsers.UNIT_NS.get(lat.unit, 1), "ns", "time", False)


def latency(p: Parsed) -> None:
    if p.latency_tool in ("bcc", "libbpf"):
        _funclatency(p, "should_we_balance", p.latency_out)
        return
    hist = parsers.bpftrace_hist(p.probe_out).get("swb_ns")
    if hist:
        p.histograms["should_we_balance"] = {"tool": "bpftrace", "unit": "nsecs",
                                             "buckets": hist}


def latency_more(p: Parsed) -> None:
    """The latency-lb probe: one funclatency output per function. With
    bpftrace's fallback for the latency tool there is none, which the guest
    notes among the probes missing: not a problem of the run, which would
    make every run incomplete and measured again on resume."""
    if p.latency_tool not in ("bcc", "libbpf"):
        return
    for func, text in sorted(p.latency_more.items()):
        _funclatency(p, func, text)


def cost(p: Parsed, func: str, prefix: str, nargs: int, step: int, top: str,
         paths: Optional[Dict[str, str]] = None, key_tag: str = "",
         by_idle: bool = False) -> None:
    """Per sched domain (or per path), over the calls up to the histogram's top:
    the median and the mean instructions per call, less the probe's own (the
    calibrated overhead, plus one per argument beyond the calibration function's
    one); the calls, those over the top, and those lost to nesting (with paths,
    a call is keyed when it returns: the lost ones are counted only in total)."""
    hists = parsers.bpftrace_value_counts(p.probe_out, f"{prefix}_d", step)
    names = parsers.bpftrace_string_maps(p.probe_out).get(f"{prefix}_name", {})
    if p.overhead is None:
        p.problems.append(f"{func}: no calibrated overhead: instructions per call not given")
    over = (p.overhead or 0.0) + (nargs - 1)
    if paths:
        keyed = {k[k.index("[") + 1:-1] for k in p.maps
                 if k.startswith((f"{prefix}_n[", f"{prefix}_long["))}
        calls = sum(v for k, v in p.maps.items() if k.startswith(f"{prefix}_calls["))
        done = sum(v for k, v in p.maps.items()
                   if k.startswith((f"{prefix}_n[", f"{prefix}_long[")))
        p.metrics[f"{func} calls"] = Metric(calls, "calls", "count", False)
        p.metrics[f"{func} calls lost to nesting"] = Metric(calls - done, "calls", "count",
                                                            False)
        names = {k: paths.get(k, "path " + k) for k in keyed}
    else:
        keyed = {k[k.index("[") + 1:-1] for k in p.maps if k.startswith(f"{prefix}_calls[")}
        if key_tag:
            names = {k: f"{key_tag} {k}" for k in keyed}
        elif by_idle:
            names = {k: f"{names.get(k, 'level ' + str(int(k) // IDLE_KEYS))}, "
                        f"{idle_name(int(k) % IDLE_KEYS)}" for k in keyed}
    for key in sorted(keyed, key=int):
        tag = f" ({names.get(key, 'level ' + key)})" if names else ""
        n, long_ = p.maps.get(f"{prefix}_n[{key}]", 0.0), p.maps.get(f"{prefix}_long[{key}]", 0.0)
        calls = n + long_ if paths else p.maps[f"{prefix}_calls[{key}]"]
        buckets = hists.get(key, [])
        p.metrics[f"{func} calls{tag}"] = Metric(calls, "calls", "count", False)
        p.metrics[top + tag] = Metric(long_, "calls", "count", False)
        if not paths:
            p.metrics[f"{func} calls lost to nesting{tag}"] = Metric(calls - n - long_, "calls",
                                                                       "count", False)
        median = parsers.hist_median(buckets)
        if not n or median is None or p.overhead is None:
            continue
        p.metrics[f"{func} instructions per call, median{tag}"] = Metric(
            median - over, "instructions", "count", False)
        p.metrics[f"{func} instructions per call, mean{tag}"] = Metric(
            parsers.hist_mean(buckets) - over, "instructions", "count", False)


def idle_name(idle: int) -> str:
    return parsers.IDLE_TYPES[idle] if idle < len(parsers.IDLE_TYPES) else f"idle type {idle}"


def _checked_events(p: Parsed, probe: str, count: str, events: list) -> None:
    """A balance-event probe's problems: events lost (fewer keys than the
    COUNT map saw), or no spans to replay them against."""
    if p.maps.get(count) and len(events) < p.maps[count]:
        p.problems.append(f"{probe}: {len(events)} events of {p.maps[count]:.0f} balances "
                          "(a full map, or two on one CPU in one ns)")
    if events and not lbphase.parse_spans(p.schedstat):
        p.problems.append(f"{probe}: no domain spans in /proc/schedstat")


def lb_phase(p: Parsed) -> None:
    events = lbphase.parse_events(p.probe_out)
    spans = lbphase.parse_spans(p.schedstat)
    _checked_events(p, "lb-phase", "lbp_n", events)
    for name, s in lbphase.replay(events, spans).items():
        p.metrics[f"busy balances computing group statistics ({name})"] = Metric(
            s.balances, "calls", "count", False)
        if not s.reads or name == next(iter(lbphase.level_names(spans)), name):
            continue
        p.metrics[f"busy balances with a same-pass child balance ({name})"] = Metric(
            100.0 * s.same_pass / s.balances, "%", "count", True)
        for w, c, m in zip(lbphase.WINDOWS_MS, s.child, s.wom):
            p.metrics[f"group reads fresh from child totals, {w} ms ({name})"] = Metric(
                100.0 * c / s.reads, "%", "count", True)
            p.metrics[f"group reads fresh with write on miss, {w} ms ({name})"] = Metric(
                100.0 * m / s.reads, "%", "count", True)


def lb_share(p: Parsed) -> None:
    """What SG_STATS_REUSE's rule could take from sums, per level that keeps
    them: lbshare.bt's busy balances replayed (lbphase.share_replay())."""
    events = lbphase.parse_share_events(p.probe_out)
    _checked_events(p, "lb-share", "lbs_n", events)
    spans = lbphase.parse_spans(p.schedstat)
    hz = lbphase.hz_of(events)
    if events and hz is None:
        p.notes.append("lb-share: too few balances of one CPU's level to tell HZ: 250 "
                       "assumed")
    tick = lbphase.tick_ns_of(hz or 250)
    off = lbphase.tick_phase(events, tick)
    if len(events) >= 10 and tick // 4 < off < tick - tick // 4:
        p.notes.append(f"lb-share: the balances follow ticks {off / 1e6:.2f} ms into the "
                       "clock's jiffy grid (a low resolution tick?): jiffies may be off by one")
    drift = lbphase.clock_drift(events, hz or 250)
    if drift is not None and drift > 4:
        p.notes.append(f"lb-share: jiffies fell {drift} behind the clock over the window "
                       "(ticks lost: a periodic low resolution tick under TCG?): the replay's "
                       "jiffies, from the clock, are not the kernel's, and its shares are not "
                       "measured")
    shares = lbphase.share_replay(events, spans, hz or 250)
    walked = lbphase.share_replay(events, spans, hz or 250, lbphase.RQ_NS)
    # The walk at this machine's own time of a runqueue's read, where the
    # lb-time probe ran beside: each arm its own (with SG_STATS_REUSE on,
    # sums taken shorten it)
    durations = lbphase.balance_ns(p.maps)
    label = lbphase.labels((e.name, e.weight) for e in events)
    reads = {lv: shares[lb].reads / shares[lb].balances for lv, lb in label.items()
             if lb in shares and shares[lb].balances}
    level_rq_ns = lbphase.rq_ns_of(durations, reads)
    timed = lbphase.share_replay(events, spans, hz or 250,
                                 level_rq_ns=level_rq_ns) if level_rq_ns else {}
    # A level that keeps sums without a busy balance in the window: 0, not
    # missing from the tables.
    for name in lbphase.level_names(spans)[1:]:
        if name not in shares and name != "NUMA":
            p.metrics[f"busy balances above the lowest level ({name})"] = Metric(
                0, "calls", "count", False)
    for name, s in shares.items():
        p.metrics[f"busy balances above the lowest level ({name})"] = Metric(
            s.balances, "calls", "count", False)
        p.metrics[f"retries of busy balances ({name})"] = Metric(
            s.retries, "calls", "count", False)
        if not s.reads:
            continue
        p.metrics[f"group reads in busy balances ({name})"] = Metric(
            s.reads, "reads", "count", False)
        p.metrics[f"group reads sums could serve ({name})"] = Metric(
            100.0 * s.taken / s.reads, "%", "count", None)
        p.metrics[f"group reads sums another CPU left could serve ({name})"] = Metric(
            100.0 * s.taken_other / s.reads, "%", "count", None)
        p.metrics[f"group reads sums could serve, {lbphase.RQ_NS} ns a runqueue ({name})"] = \
            Metric(100.0 * walked[name].taken / s.reads, "%", "count", None)
        if any(label[lv] == name for lv in level_rq_ns):
            p.metrics[f"group reads sums could serve, the measured time a runqueue ({name})"] = \
                Metric(100.0 * timed[name].taken / s.reads, "%", "count", None)


def lb_time(p: Parsed) -> None:
    """lbtime.bt: the median time of a level's group statistics in its busy
    balances (the level's name, with its weight where several levels have
    the name)."""
    durations = lbphase.balance_ns(p.maps)
    label = lbphase.labels(durations)
    for level, ns in sorted(durations.items()):
        p.metrics[f"group statistics time of busy balances, median ({label[level]})"] = Metric(
            ns / 1000.0, "us", "time", False)


def lb_reads(p: Parsed) -> None:
    """Runqueue reads per balance that computed group statistics, by domain and
    idle type."""
    keyed = re.compile(r"^lbr_(calls|reads)\[(\S+), (\d)\]$")
    counts: Dict[Tuple[str, int], Dict[str, float]] = {}
    for key, value in p.maps.items():
        m = keyed.match(key)
        if m:
            counts.setdefault((m.group(2), int(m.group(3))), {})[m.group(1)] = value
    for (name, idle), c in sorted(counts.items()):
        if idle >= len(parsers.IDLE_TYPES) or not c.get("calls"):
            continue
        itype = parsers.IDLE_TYPES[idle]
        p.metrics[f"group statistics computed, {itype} ({name})"] = Metric(
            c["calls"], "calls", "count", False)
        p.metrics[f"runqueue reads per {itype} balance ({name})"] = Metric(
            c.get("reads", 0.0) / c["calls"], "reads", "count", False)


def pairs(p: Parsed, func: str, prefix: str) -> None:
    """The share of calls whose entry key (a CPU) and the calling CPU are the
    same CPU, two threads of one core, or on different cores (the guest's
    sibling lists, cores.txt, say which)."""
    pairs = parsers.bpftrace_pairs(p.probe_out, f"{prefix}_pair")
    total = sum(pairs.values())
    if not total or not p.core_of:
        return
    where = {"same cpu": 0, "same core": 0, "other core": 0}
    for (a, b), n in pairs.items():
        key = ("same cpu" if a == b else "same core" if p.core_of.get(a, -1) ==
               p.core_of.get(b, -2) else "other core")
        where[key] += n
    for key, n in where.items():
        p.metrics[f"{func} calls, previous cpu and waker's cpu: {key}"] = Metric(
            100.0 * n / total, "%", "count", False)


def insns(p: Parsed) -> None:
    """Each part's instructions per execution and executions, over the boot
    that ran the run (insncount.py): the same in every run of a boot."""
    costs = insncount.parse_costs(p.insns_out)
    if not costs:
        p.problems.append("insns: no insns.txt (the plugin counted nothing, or the host "
                          "could not attribute its counts)")
        return
    for part in insncount.PARTS:
        execs, per = costs.get(part.name, (0, 0.0))
        p.metrics[f"{part.name} executions (insns)"] = Metric(execs, "executions", "count",
                                                              False)
        if execs:
            p.metrics[f"{part.name} instructions per execution (insns)"] = Metric(
                per, "insns", "count", False)


# The events of the cycles probe (guest/run-plan.sh), in perf stat's CSV:
# value,unit,event,run time,enabled %,metric,metric unit.
PERF_STAT_EVENTS = ("cycles", "instructions")


def perf_stat_counts(text: str) -> Dict[str, Optional[float]]:
    """Each event's count in perf stat -x, output; None where perf says
    '<not supported>' or '<not counted>'."""
    out: Dict[str, Optional[float]] = {}
    for line in text.splitlines():
        f = line.strip().split(",")
        if len(f) < 3 or f[2] not in PERF_STAT_EVENTS:
            continue
        try:
            out[f[2]] = float(f[0])
        except ValueError:
            out[f[2]] = None
    return out


def cycles(p: Parsed) -> None:
    """The cycles probe: every CPU's cycles and instructions in the run's
    window (a fixed amount of work costs fewer cycles; a timed one shows the
    rate), and their ratio."""
    counts = perf_stat_counts(p.perf_stat)
    cyc, ins = counts.get("cycles"), counts.get("instructions")
    if cyc is None:
        p.problems.append("cycles: perf stat counted no cycles in this run: "
                          + (p.perf_stat.strip().splitlines() or ["no perf-stat.txt"])[-1][:160])
        return
    p.metrics["cycles (perf stat)"] = Metric(cyc, "cycles", "count", False)
    if p.seconds > 0:
        p.metrics["cycles per s (perf stat)"] = Metric(cyc / p.seconds, "cycles/s", "count",
                                                       False)
    if ins is not None and cyc > 0:
        p.metrics["instructions per cycle (perf stat)"] = Metric(ins / cyc, "insns/cycle",
                                                                 "rate", True)


# perf c2c report --stats prints 'name : value' lines in blocks (Trace Event
# Information, Global Shared Cache Line Event Information, ...).
_C2C_LINE = re.compile(r"^\s*([A-Za-z][^:]*?)\s*:\s*(-?[0-9][0-9.]*)\s*$")


def c2c_stat_counts(text: str) -> Dict[str, float]:
    """Every integer or decimal 'name : value' line of perf c2c's stats, the
    first of each name (percentages, which end in '%', are left out)."""
    out: Dict[str, float] = {}
    for line in text.splitlines():
        m = _C2C_LINE.match(line)
        if m and m.group(1) not in out:
            out[m.group(1)] = float(m.group(2))
    return out


def c2c(p: Parsed) -> None:
    """The c2c probe: loads perf c2c sampled in the kernel over the run's
    window that found the line modified in another core's cache (HITM), on
    this node and on another, and per thousand sampled loads. Samples, not
    counts: compare arms' ratios, not totals. Where perf reports no HITM
    (AMD's IBS reports peer cache hits instead) the counts read 0."""
    counts = c2c_stat_counts(p.c2c_stats)
    loads = counts.get("Load Operations")
    if loads is None:
        # Not a problem of the run: the guest noted why (notes.txt), and the
        # run's scheduler counts stand without these.
        return
    p.metrics["sampled loads (perf c2c)"] = Metric(loads, "samples", "count", False)
    for where in ("Local", "Remote"):
        n = counts.get(f"Load {where} HITM", 0.0)
        p.metrics[f"{where.lower()} HITM loads (perf c2c)"] = Metric(n, "samples", "count",
                                                                     False)
    if loads > 0:
        hitm = counts.get("Load Local HITM", 0.0) + counts.get("Load Remote HITM", 0.0)
        p.metrics["HITM per 1000 sampled loads (perf c2c)"] = Metric(
            1000.0 * hitm / loads, "permille", "count", False)
