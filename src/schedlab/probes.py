"""The probes a measurement plan can attach: one record each.

A probe is a bpftrace program in guest/bt/NAME.bt (placeholders %ENTRY%,
%EXIT%, %IDLE% and %RQ% filled in per attach method, fentry or kprobe), the
maps it fills, the functions it needs out of line, its metrics (name, unit,
the summary tables that show them) and the function that turns its maps
into those metrics.  The latency probe is the exception: it runs a
funclatency tool (bcc, libbpf-tools, or bpftrace's own histogram).

Keyed by CPU, not by thread: should_we_balance() and sched_balance_rq() run
with preemption off, mostly in softirq context where tid is whoever was
interrupted.  Calls are counted at entry, so the counts are exact; a time is
taken only when entry and exit pair up on one CPU.  Nothing is counted until
the gate (guest/bt/gate.bt) opens: the counts cover the workload's run, not
the tools' start-up around it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from . import lbphase, parsers
from .parsers import Metric
from .util import LabError, package_file

ATTACH_METHODS = ("auto", "kfunc", "kprobe")
LATENCY_TOOLS = ("auto", "bcc", "libbpf", "bpftrace")
LATENCY_FUNCTION = "should_we_balance"
# bcc compiles its program with clang at every start; under TCG that takes
# minutes.  auto passes over it when its trial start takes longer than this.
BCC_MAX_START = 30


@dataclass(frozen=True)
class MetricSpec:
    """A metric and the summary tables that show it."""
    name: str
    unit: str
    headline: bool = False      # the rows 'ab' prints (compare --headline)
    sweep: str = ""             # the sweep table's column title
    plot: str = ""              # "count" or "time": a bar of the plots
    rank: int = 0               # the order of the bars in a plot
    per_domain: bool = False    # also "NAME (DOMAIN)", one per sched domain
    expected: bool = False      # every complete run of the probe has it


@dataclass
class Parsed:
    """What a probe's parser gets and gives."""
    maps: Dict[str, float]
    seconds: float
    probe_out: str
    latency_out: str = ""
    latency_tool: str = "none"
    overhead: Optional[float] = None      # the cost probes' own instructions per call
    core_of: Dict[int, int] = field(default_factory=dict)   # CPU -> first CPU of its core
    schedstat: str = ""                   # /proc/schedstat before the run (domain spans)
    metrics: Dict[str, Metric] = field(default_factory=dict)
    histograms: Dict[str, dict] = field(default_factory=dict)
    problems: List[str] = field(default_factory=list)

    def count(self, name: str, key: str, unit: str) -> float:
        """A count map as a metric and, with a duration, as a rate."""
        value = self.maps.get(key, 0.0)   # bpftrace prints nothing for a map never written
        self.metrics[name] = Metric(value, unit, "count", False)
        if self.seconds > 0:
            self.metrics[name + " per s"] = Metric(value / self.seconds, unit + "/s",
                                                   "count", False)
        return value


@dataclass(frozen=True)
class Probe:
    name: str
    what: str
    functions: Tuple[str, ...]        # must be in /proc/kallsyms (out of line)
    maps: Tuple[str, ...]             # printed when the counting window closes
    metrics: Tuple[MetricSpec, ...]
    parse: Callable[[Parsed], None]
    program: str = ""                 # guest/bt/PROGRAM.bt; "" for none
    # More placeholders of the program: (placeholder, kfunc value, kprobe value).
    params: Tuple[Tuple[str, str, str], ...] = ()

    def bpftrace(self, attach: str) -> str:
        """The program for one attach method ('kfunc' or 'kprobe'), with a line
        that prints its maps when the window closes."""
        if not self.program:
            return ""
        kfunc = attach == "kfunc"
        text = package_file(f"guest/bt/{self.program}.bt").read_text()
        for key, on_kfunc, on_kprobe in self.params:
            text = text.replace(key, on_kfunc if kfunc else on_kprobe)
        for key, value in (("%ENTRY%", "kfunc" if kfunc else "kprobe"),
                           ("%EXIT%", "kretfunc" if kfunc else "kretprobe"),
                           ("%IDLE%", "args->idle" if kfunc else "arg3"),
                           ("%RQ%", "args->rq" if kfunc else "((struct rq *)arg0)")):
            text = text.replace(key, value)
        return text.rstrip("\n") + "\n" + print_at_close(self.maps) + "\n"


def print_at_close(maps: Sequence[str]) -> str:
    """Print the maps when the window closes, before the gate says 'stopped'
    (the gate is attached last, so it runs last): the counts are out even when
    bpftrace then hangs detaching its fentry probes under TCG and has to be
    killed, which lost 3 of 15 runs of one plan before this."""
    prints = " ".join(f"print(@{m});" for m in maps)
    return f'tracepoint:sched:sched_process_exec /comm == "schedlab-off"/ {{ {prints} }}'


def _swb(p: Parsed) -> None:
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


def _lb(p: Parsed) -> None:
    for idx, itype in enumerate(parsers.IDLE_TYPES):
        p.count(f"sched_balance_rq {itype} calls", f"lb_calls[{idx}]", "calls")
    for idx, itype in enumerate(parsers.IDLE_TYPES):
        # A map key never written is not printed: no call, no time.
        calls, total = p.maps.get(f"lb_calls[{idx}]"), p.maps.get(f"lb_ns_sum[{idx}]", 0.0)
        p.metrics[f"sched_balance_rq {itype} total time"] = Metric(total, "ns", "time", False)
        if calls:
            p.metrics[f"sched_balance_rq {itype} mean time"] = Metric(total / calls, "ns",
                                                                     "time", False)


def _migrate(p: Parsed) -> None:
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


def _avgidle(p: Parsed) -> None:
    n = p.maps.get("ai_n", 0.0)
    p.metrics["idle periods ended"] = Metric(n, "events", "count", False)
    if n:
        p.metrics["avg_idle at newidle mean"] = Metric(p.maps.get("ai_sum", 0.0) / n / 1000,
                                                       "us", "count", False)
        p.metrics["avg_idle at newidle below 500 us"] = Metric(
            100.0 * p.maps.get("ai_lt500", 0.0) / n, "%", "count", False)


def _latency(p: Parsed) -> None:
    if p.latency_tool in ("bcc", "libbpf"):
        lat = parsers.funclatency(p.latency_out)
        if not lat.buckets:
            p.problems.append(f"no histogram from {p.latency_tool} funclatency")
            return
        p.histograms["should_we_balance"] = {"tool": p.latency_tool, "unit": lat.unit,
                                             "buckets": lat.buckets}
        mean = lat.avg if lat.avg is not None else parsers.hist_mean(lat.buckets)
        p.metrics["should_we_balance mean time (funclatency)"] = Metric(
            mean * parsers.UNIT_NS.get(lat.unit, 1), "ns", "time", False)
        return
    hist = parsers.bpftrace_hist(p.probe_out).get("swb_ns")
    if hist:
        p.histograms["should_we_balance"] = {"tool": "bpftrace", "unit": "nsecs",
                                             "buckets": hist}


def _rate(name: str, unit: str, **kw) -> Tuple[MetricSpec, MetricSpec]:
    return MetricSpec(name, unit), MetricSpec(name + " per s", unit + "/s", **kw)


_LB_METRICS: Tuple[MetricSpec, ...] = ()
for _t in parsers.IDLE_TYPES:
    _LB_METRICS += (MetricSpec(f"sched_balance_rq {_t} calls", "calls", expected=True,
                               headline=_t == "newidle",
                               sweep="newidle balance runs" if _t == "newidle" else ""),
                    MetricSpec(f"sched_balance_rq {_t} calls per s", "calls/s", headline=True,
                               plot="count" if _t == "newidle" else "", rank=2),
                    MetricSpec(f"sched_balance_rq {_t} total time", "ns",
                               headline=_t == "newidle",
                               sweep="newidle balance time (ms)" if _t == "newidle" else ""),
                    MetricSpec(f"sched_balance_rq {_t} mean time", "ns",
                               plot="time" if _t == "newidle" else "", rank=2))

def cost_probe(name: str, func: str, prefix: str, sd: Optional[Tuple[str, str]], top: int,
               step: int = 1, nargs: int = 1, key_out: str = "",
               entry_key: Optional[Tuple[str, str]] = None,
               paths: Optional[Dict[str, str]] = None, pairs: bool = False,
               key_tag: str = "", idle: Optional[Tuple[str, str]] = None) -> Probe:
    """Instructions per call of FUNC by sched domain (guest/bt/cost.bt; SD is the
    domain's expression at entry per attach method, None for a function without):
    meant for --accel icount, where the guest clock counts instructions.  Calls
    up to TOP go into STEP-wide buckets; NARGS: the trampoline restores that
    many arguments inside the window (one instruction each).  With PATHS, the
    calls are keyed at exit instead, by KEY_OUT (which may read what ENTRY_KEY
    stored at entry in @PREFIX_lv[cpu]), and PATHS names each key's value.
    PAIRS: also count the calls by (entry key, cpu) in @PREFIX_pair, before the
    clock read at entry.  KEY_TAG: the metrics' tag for ENTRY_KEY's values
    ('wakee depth 2').  IDLE: with SD, the balance's idle type at entry per
    attach method; the calls are then keyed by domain and idle type ('MC, busy')."""
    def parse(p: Parsed) -> None:
        _cost(p, func, prefix, nargs, step, paths, key_tag, by_idle=idle is not None)
        if pairs:
            _pairs(p, func, prefix)
    lv = f"@{prefix}_lv[cpu]"
    kf, kp = sd or ("", "")
    key = (f"{kf}->level", f"{kp}->level") if sd else entry_key or ("0", "0")
    if sd and idle:
        key = (f"{key[0]} * {_IDLE_KEYS} + {idle[0]}", f"{key[1]} * {_IDLE_KEYS} + {idle[1]}")
    store = (f"@{prefix}_name[$k] = str({kf}->name);",
             f"@{prefix}_name[$k] = str({kp}->name);") if sd else ("", "")
    if pairs:
        pair = f"@{prefix}_pair[$k, cpu] = count();"
        store = (f"{store[0]} {pair}", f"{store[1]} {pair}")
    params = (("%FUNC%", func, func), ("%P%", prefix, prefix), ("%KEY%", *key),
              ("%NAME%", *store), ("%KEY_OUT%", key_out or lv, key_out or lv),
              ("%TOP%", str(top), str(top)), ("%STEP%", str(step), str(step)))
    over = f"{func} calls over {top} instructions (interrupted or straddling a vCPU switch)"
    by = ("by where the task goes" if paths else f"by {key_tag}" if key_tag
          else "by sched domain and idle type" if idle else "by sched domain")
    return Probe(name, f"{func}(): instructions per call {by} (with --accel icount)", (func,),
                 tuple(f"{prefix}_{m}" for m in ("calls", "long", "n", "d")
                       + (("name",) if sd else ()) + (("pair",) if pairs else ())),
                 (MetricSpec(f"{func} instructions per call, median", "instructions",
                             headline=True, per_domain=True),
                  MetricSpec(f"{func} instructions per call, mean", "instructions",
                             headline=True, per_domain=True),
                  MetricSpec(over, "calls", headline=True, per_domain=True)), parse,
                 "cost", params)


# A cost probe keyed by domain and idle type keys a call by level * 4 + idle
# (7.3's enum cpu_idle_type has three values).
_IDLE_KEYS = 4


def _cost(p: Parsed, func: str, prefix: str, nargs: int, step: int,
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
    top = next(m.name for m in PROBES_BY_FUNC[func].metrics if " calls over " in m.name)
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
            names = {k: f"{names.get(k, 'level ' + str(int(k) // _IDLE_KEYS))}, "
                        f"{_idle_name(int(k) % _IDLE_KEYS)}" for k in keyed}
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


def _idle_name(idle: int) -> str:
    return parsers.IDLE_TYPES[idle] if idle < len(parsers.IDLE_TYPES) else f"idle type {idle}"


def _lbphase(p: Parsed) -> None:
    events = lbphase.parse_events(p.probe_out)
    spans = lbphase.parse_spans(p.schedstat)
    if p.maps.get("lbp_n") and len(events) < p.maps["lbp_n"]:
        p.problems.append(f"lb-phase: {len(events)} events of {p.maps['lbp_n']:.0f} balances "
                          "(a full map, or two on one CPU in one ns)")
    if events and not spans:
        p.problems.append("lb-phase: no domain spans in /proc/schedstat")
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


def _lbreads(p: Parsed) -> None:
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


def _pairs(p: Parsed, func: str, prefix: str) -> None:
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


COST_PROBES = (
    cost_probe("swb-cost", "should_we_balance", "swbc",
               ("args->env->sd", "((struct lb_env *)arg0)->sd"), 6000),
    cost_probe("lb-cost", "sched_balance_rq", "lbc",
               ("args->sd", "((struct sched_domain *)arg2)"), 100000, step=25, nargs=5),
    cost_probe("wake-cost", "select_task_rq_fair", "wkc", None, 6000, nargs=3),
    # The group statistics and the busiest group's choice alone, by domain and
    # idle type: what SG_STATS_REUSE saves in a busy balance that computes them.
    cost_probe("fsg-cost", "sched_balance_find_src_group", "fsg",
               ("args->env->sd", "((struct lb_env *)arg0)->sd"), 100000, step=25,
               idle=("args->env->idle", "((struct lb_env *)arg0)->idle")),
)
# The same count split by where the woken task goes: its previous CPU, the
# waker's CPU (where select_task_rq_fair() runs), another; and whether those
# two were the same CPU.  The previous CPU is the key at entry; the path is
# worked out after the clock has been read at exit.  @wkp_pair[prev, waker's
# cpu] (raw output only) says which CPUs a ping-pong pair ran on.
WAKE_PATHS = {"0": "elsewhere", "1": "to the waker's cpu", "2": "to its previous cpu",
              "4": "prev = waker's cpu, elsewhere", "7": "prev = waker's cpu, stays"}
WAKE_PATH = cost_probe(
    "wake-path", "select_task_rq_fair", "wkp", None, 6000, nargs=3,
    entry_key=("args->prev_cpu", "arg1"),
    key_out="(retval == @wkp_lv[cpu] ? 2 : 0) + (retval == cpu ? 1 : 0)"
            " + (@wkp_lv[cpu] == cpu ? 4 : 0)",
    paths=WAKE_PATHS, pairs=True)
# Patch 6's scan alone, where a build keeps select_group_idle_cpu() out
# of line (it is inlined into select_task_rq_fair() otherwise, and then
# reported missing): five arguments; by the wakee's depth, since the root
# group's tasks return at its first test.
SCAN_COST = cost_probe(
    "scan-cost", "select_group_idle_cpu", "sgic", None, 6000, nargs=5,
    entry_key=("args->p->se.depth", "((struct task_struct *)arg0)->se.depth"),
    key_tag="wakee depth")
# And by the depth of the woken task's sched entity in the task-group
# hierarchy (0: the root group), to count a nested group's wakeups apart.
WAKE_DEPTH = cost_probe(
    "wake-depth", "select_task_rq_fair", "wkd", None, 6000, nargs=3,
    entry_key=("args->p->se.depth", "((struct task_struct *)arg0)->se.depth"),
    key_tag="wakee depth")
# The calibration: the same program on idle_cpu(), keyed by what it returns
# (1 only on its longest path), attached alone for a few seconds before the
# runs (guest/run-plan.sh, icount.py).
CALIBRATION = cost_probe("calibrate", "idle_cpu", "cal", None, 2000, key_out="retval")
PROBES_BY_FUNC = {p.functions[0]: p for p in (*COST_PROBES, SCAN_COST, CALIBRATION)}

PROBES: Dict[str, Probe] = {p.name: p for p in (
    Probe("swb", "should_we_balance(): calls, the idle_cpu() probes made inside it, time",
          ("should_we_balance", "idle_cpu"),
          ("swb_calls", "swb_idle_probes", "swb_ns_sum", "swb_ns"),
          (*_rate("should_we_balance calls", "calls", headline=True, expected=True,
                  plot="count", rank=1),
           *_rate("idle_cpu probes in should_we_balance", "probes", headline=True,
                  expected=True, plot="count", rank=0),
           MetricSpec("idle_cpu probes per should_we_balance call", "probes", headline=True,
                      expected=True),
           MetricSpec("should_we_balance mean time (bpftrace)", "ns", expected=True,
                      plot="time", rank=1)),
          _swb, "swb"),
    Probe("lb", "sched_balance_rq(): calls and time by idle type (busy, idle, newidle)",
          ("sched_balance_rq",), ("lb_calls", "lb_ns_sum"), _LB_METRICS, _lb, "lb"),
    Probe("migrate", "sched:sched_migrate_task events, in all and by the lowest domain "
                     "spanning both CPUs", (), ("migrations", "mig_pair"),
          (*_rate("migrations", "events", headline=True, expected=True, plot="count",
                  rank=3),
           MetricSpec("migrations per s, lowest shared domain", "events/s", per_domain=True),
           MetricSpec("migrations share, lowest shared domain", "%", headline=True,
                      per_domain=True)),
          _migrate, "migrate"),
    Probe("lb-phase", "busy and idle balances that compute group statistics, by CPU, level, "
                      "softirq pass and time: how often a parent level finds its groups' totals fresh "
                      "(lbphase.py)",
          ("should_we_balance", "sched_balance_softirq"), ("lbp_n", "lbp_ev"),
          (MetricSpec("busy balances computing group statistics", "calls", per_domain=True),
           MetricSpec("busy balances with a same-pass child balance", "%", headline=True,
                      per_domain=True),
           *(MetricSpec(f"group reads fresh from child totals, {w} ms", "%", headline=True,
                        per_domain=True) for w in lbphase.WINDOWS_MS),
           *(MetricSpec(f"group reads fresh with write on miss, {w} ms", "%", headline=True,
                        per_domain=True) for w in lbphase.WINDOWS_MS)),
          _lbphase, "lbphase", (("%ENV%", "args->env", "arg0"),)),
    Probe("lb-reads", "runqueues read to compute group statistics (cpu_util_cfs() calls "
                      "inside sched_balance_find_src_group()), per balance, by level and "
                      "idle type",
          ("sched_balance_find_src_group", "cpu_util_cfs"), ("lbr_calls", "lbr_reads"),
          tuple(MetricSpec(f"{what}, {itype}" if what.startswith("group") else
                           f"runqueue reads per {itype} balance",
                           unit, headline=itype == "busy" and unit == "reads",
                           per_domain=True)
                for itype in parsers.IDLE_TYPES
                for what, unit in (("group statistics computed", "calls"),
                                   ("reads", "reads"))),
          _lbreads, "lbreads", (("%ENV%", "args->env", "arg0"),)),
    Probe("avgidle", "rq->avg_idle as newidle balancing saw it when a CPU went idle (read "
                     "when the idle period ends): mean, share below 500 us, histogram",
          ("update_rq_avg_idle",), ("ai_n", "ai_lt500", "ai_sum", "ai_us"),
          (MetricSpec("idle periods ended", "events", expected=True),
           MetricSpec("avg_idle at newidle mean", "us"),
           MetricSpec("avg_idle at newidle below 500 us", "%", headline=True,
                      sweep="avg_idle < 500 us %")),
          _avgidle, "avgidle"),
    Probe("latency", "funclatency histogram of should_we_balance() (bcc, else libbpf-tools, "
                     "else bpftrace)", ("should_we_balance",), (),
          (MetricSpec("should_we_balance mean time (funclatency)", "ns", headline=True,
                      expected=True, plot="time", rank=0),),
          _latency),
    *COST_PROBES,
    WAKE_PATH,
    WAKE_DEPTH,
    SCAN_COST,
)}
DEFAULT_PROBES = ["swb", "lb", "migrate", "latency"]

# The metrics every run has, whatever its probes: CPU busy time from
# /proc/stat, balance counts by domain from /proc/schedstat (names made up
# from the domains, so not listed).
SYSTEM_METRICS = (MetricSpec("cpu busy", "%", headline=True, sweep="cpu busy %"),)


def probe_names(text: Optional[str]) -> List[str]:
    names = text.split(",") if text else list(DEFAULT_PROBES)
    for n in names:
        if n not in PROBES:
            raise LabError(f"unknown probe {n!r}; known: "
                           + "; ".join(f"{p.name} ({p.what})" for p in PROBES.values()))
    return names


def gate() -> str:
    return package_file("guest/bt/gate.bt").read_text()


def parse(probes_used: Sequence[str], parsed: Parsed) -> None:
    """Every used probe's metrics into parsed.metrics, in the order of PROBES."""
    for name, probe in PROBES.items():
        if name in probes_used:
            probe.parse(parsed)


def catalogue() -> List[MetricSpec]:
    """Every metric a probe or the system produces (workloads' own: workloads.py)."""
    return [m for p in PROBES.values() for m in p.metrics] + list(SYSTEM_METRICS)
