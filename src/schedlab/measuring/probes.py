"""The probes a measurement plan can attach: one record each.

Detail: docs/modules.md, section measuring/probes.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from schedlab.core.util import LabError
from schedlab.measuring import bpfgen, insncount, lbphase, linecount, parsers
from schedlab.measuring import probe_parsers as pp
# A probe's parser gets and gives a Parsed (probe_parsers.py); importers of
# the registry take it from here.
from schedlab.measuring.probe_parsers import Parsed

ATTACH_METHODS = ("auto", "kfunc", "kprobe")
LATENCY_TOOLS = ("auto", "bcc", "libbpf", "bpftrace")
LATENCY_FUNCTION = "should_we_balance"
# The latency-lb probe's functions: one funclatency each, beside the latency
# probe's (the hardware kit's histograms of the balance paths).
LATENCY_MORE = ("sched_balance_rq", "sched_balance_newidle")
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
        that prints its maps when the window closes (bpfgen.py)."""
        return bpfgen.program(self.program, attach, self.maps, self.params)


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
    over = f"{func} calls over {top} instructions (interrupted or straddling a vCPU switch)"

    def parse(p: Parsed) -> None:
        pp.cost(p, func, prefix, nargs, step, over, paths, key_tag, by_idle=idle is not None)
        if pairs:
            pp.pairs(p, func, prefix)
    params = bpfgen.cost_params(func, prefix, sd, top, step, key_out, entry_key, pairs, idle)
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


COST_PROBES = (
    cost_probe("swb-cost", "should_we_balance", "swbc",
               ("args->env->sd", "((struct lb_env *)arg0)->sd"), 6000),
    # The same by the balance's idle type: the kit's switch proof compares
    # each path (kitproof.py), not only the most frequent one.
    cost_probe("swb-cost-idle", "should_we_balance", "swbi",
               ("args->env->sd", "((struct lb_env *)arg0)->sd"), 6000,
               idle=("args->env->idle", "((struct lb_env *)arg0)->idle")),
    cost_probe("lb-cost", "sched_balance_rq", "lbc",
               ("args->sd", "((struct sched_domain *)arg2)"), 100000, step=25, nargs=5),
    # The same by the balance's idle type (busy, idle, newly idle): what a
    # newly idle balance costs apart from the periodic ones.
    cost_probe("lb-cost-idle", "sched_balance_rq", "lbi",
               ("args->sd", "((struct sched_domain *)arg2)"), 100000, step=25, nargs=5,
               idle=("args->idle", "arg3")),
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
          pp.swb, "swb"),
    Probe("lb", "sched_balance_rq(): calls and time by idle type (busy, idle, newidle)",
          ("sched_balance_rq",), ("lb_calls", "lb_ns_sum"), _LB_METRICS, pp.lb, "lb"),
    Probe("migrate", "sched:sched_migrate_task events, in all and by the lowest domain "
                     "spanning both CPUs", (), ("migrations", "mig_pair"),
          (*_rate("migrations", "events", headline=True, expected=True, plot="count",
                  rank=3),
           MetricSpec("migrations per s, lowest shared domain", "events/s", per_domain=True),
           MetricSpec("migrations share, lowest shared domain", "%", headline=True,
                      per_domain=True)),
          pp.migrate, "migrate"),
    Probe("lb-phase", "busy and idle balances that compute group statistics, by CPU, level, "
                      "softirq pass and time: how often a parent level finds its groups' totals "
                      "fresh (lbphase.py)",
          ("should_we_balance", "sched_balance_softirq"), ("lbp_n", "lbp_ev"),
          (MetricSpec("busy balances computing group statistics", "calls", per_domain=True),
           MetricSpec("busy balances with a same-pass child balance", "%", headline=True,
                      per_domain=True),
           *(MetricSpec(f"group reads fresh from child totals, {w} ms", "%", headline=True,
                        per_domain=True) for w in lbphase.WINDOWS_MS),
           *(MetricSpec(f"group reads fresh with write on miss, {w} ms", "%", headline=True,
                        per_domain=True) for w in lbphase.WINDOWS_MS)),
          pp.lb_phase, "lbphase", (("%ENV%", "args->env", "arg0"),)),
    Probe("lb-share", "busy balances above the lowest level that compute group statistics, "
                      "by CPU, level, jiffy and busy interval, replayed under SG_STATS_REUSE's "
                      "rule: the share of their group reads that sums another busy balance of "
                      "the level left within their lifetime could serve; moves not seen, an "
                      "upper bound, on any kernel (lbphase.py)",
          ("should_we_balance",), ("lbs_n", "lbs_ev"),
          (MetricSpec("busy balances above the lowest level", "calls", per_domain=True),
           MetricSpec("group reads in busy balances", "reads", per_domain=True),
           MetricSpec("retries of busy balances", "calls", per_domain=True),
           MetricSpec("group reads sums could serve", "%", headline=True, per_domain=True),
           MetricSpec("group reads sums another CPU left could serve", "%",
                      per_domain=True),
           MetricSpec("group reads sums could serve, the measured time a runqueue", "%",
                      per_domain=True)),
          pp.lb_share, "lbshare", (("%ENV%", "args->env", "arg0"),)),
    Probe("lb-time", "sched_balance_find_src_group()'s time in the busy balances above the "
                     "lowest level, by level: with lb-share, its replay walks each balance's "
                     "groups at this machine's time of a runqueue's read (lbphase.py)",
          ("sched_balance_find_src_group",), ("lbt_dur",),
          (MetricSpec("group statistics time of busy balances, median", "us",
                      per_domain=True),),
          pp.lb_time, "lbtime", (("%ENV%", "args->env", "arg0"),)),
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
          pp.lb_reads, "lbreads", (("%ENV%", "args->env", "arg0"),)),
    Probe("ni", "newly idle balances that ran, by sched domain: NI_RANDOM's ratio (mean, "
                "share at 1024 where the die is off, recomputations seen) and avg_idle as a "
                "multiple of the domain's max_newidle_lb_cost (shares below 1, 2, 4, 10)",
          ("sched_balance_rq",), ("ni_n", "ni_ratio", "ni_cost", "ni_off", "ni_recomputed",
                                  "ni_gate", "ni_name"),
          (MetricSpec("newidle balances", "calls", per_domain=True),
           MetricSpec("NI ratio at newidle balance, mean", "/1024", per_domain=True),
           MetricSpec("NI ratio at 1024 (die off)", "%", headline=True, per_domain=True),
           MetricSpec("NI ratio recomputations seen", "changes", per_domain=True),
           MetricSpec("max_newidle_lb_cost at newidle balance, mean", "us", per_domain=True),
           *(MetricSpec(f"avg_idle below {x}x max_newidle_lb_cost", "%",
                        headline=x == pp.NI_GATE_MULTIPLES[-1], per_domain=True)
             for x in pp.NI_GATE_MULTIPLES)),
          pp.ni, "ni", (("%SD%", "args->sd", "((struct sched_domain *)arg2)"),
                        ("%THISRQ%", "args->this_rq", "((struct rq *)arg1)"))),
    Probe("avgidle", "rq->avg_idle as newidle balancing saw it when a CPU went idle (read "
                     "when the idle period ends): mean, share below 500 us, histogram, "
                     "shares below 1, 2, 4, 10 times the lowest domain's "
                     "max_newidle_lb_cost (the early bail's comparison)",
          ("update_rq_avg_idle",), ("ai_n", "ai_lt500", "ai_sum", "ai_us", "ai_gate"),
          (MetricSpec("idle periods ended", "events", expected=True),
           MetricSpec("avg_idle at newidle mean", "us"),
           MetricSpec("avg_idle at newidle below 500 us", "%", headline=True,
                      sweep="avg_idle < 500 us %"),
           *(MetricSpec(f"idle entries with avg_idle below {x}x the lowest "
                        "max_newidle_lb_cost", "%") for x in pp.NI_GATE_MULTIPLES)),
          pp.avgidle, "avgidle"),
    Probe("latency", "funclatency histogram of should_we_balance() (bcc, else libbpf-tools, "
                     "else bpftrace)", ("should_we_balance",), (),
          (MetricSpec("should_we_balance mean time (funclatency)", "ns", headline=True,
                      expected=True, plot="time", rank=0),),
          pp.latency),
    Probe("latency-lb", "funclatency histograms of " + " and ".join(
              f"{f}()" for f in LATENCY_MORE) + ", one tool per function beside the latency "
          "probe's (bcc or libbpf-tools only: bpftrace's fallback has none); with latency",
          LATENCY_MORE, (),
          tuple(MetricSpec(f"{f} mean time (funclatency)", "ns") for f in LATENCY_MORE),
          pp.latency_more),
    Probe("cycles", "perf stat of every CPU over the run's window: cycles, instructions, "
                    "their ratio (needs a PMU: where perf stat cannot count cycles, as in "
                    "the lab's TCG guests, the probe is dropped with a note)", (), (),
          (MetricSpec("cycles (perf stat)", "cycles", headline=True, expected=True),
           MetricSpec("cycles per s (perf stat)", "cycles/s"),
           MetricSpec("instructions per cycle (perf stat)", "insns/cycle")),
          pp.cycles),
    Probe("c2c", "perf c2c record of every CPU's kernel loads over the run's window: the "
                 "sampled loads that found their line modified in another core's cache "
                 "(HITM), on this node and on another, per 1000 sampled loads; the report "
                 "by cache line kept in the run's folder (needs load sampling, a PMU "
                 "feature: where perf c2c cannot record, as in the lab's TCG guests, the "
                 "probe is dropped with a note)", (), (),
          (MetricSpec("HITM per 1000 sampled loads (perf c2c)", "permille", headline=True),
           MetricSpec("local HITM loads (perf c2c)", "samples"),
           MetricSpec("remote HITM loads (perf c2c)", "samples"),
           MetricSpec("sampled loads (perf c2c)", "samples")),
          pp.c2c),
    Probe("insns", "instructions per execution of parts of the group statistics (a domain's, "
                   "a group's, one per-CPU read, the cache's lookup and write), counted by a "
                   "qemu TCG plugin over the whole boot, no probe attached (insncount.py); "
                   "--accel icount, alone in its plan",
          (), (),
          tuple(m for part in insncount.PARTS for m in (
              MetricSpec(f"{part.name} executions (insns)", "executions"),
              MetricSpec(f"{part.name} instructions per execution (insns)", "insns",
                         headline=True))),
          pp.insns),
    Probe("lines", "cache lines moved between CPUs per call of the balance's functions "
                   "(should_we_balance() and the rest), by sched domain, counted by a qemu "
                   "TCG plugin's coherence directory over each run's window, nothing "
                   "attached (linecount.py); --accel icount, alone in its plan",
          (), (),
          tuple(MetricSpec(f"{func} {name}", unit, headline=headline, per_domain=True)
                for func in linecount.COUNTED_NAMES
                for _, _, name, unit, headline in linecount.METRICS)
          + tuple(MetricSpec(f"{func} calls (lines)", "calls", per_domain=True)
                  for func in linecount.COUNTED_NAMES),
          linecount.parse_probe),
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


# The probes counted by a qemu plugin, each alone in its plan: the other
# probes' own instructions and accesses would be in its counts.
PLUGIN_PROBES = ("insns", "lines")

# The probe list of a clean run: nothing attached (guest/run-plan.sh checks).
NO_PROBES = "none"


def probe_names(text: Optional[str]) -> List[str]:
    if text == NO_PROBES:
        return []
    names = text.split(",") if text else list(DEFAULT_PROBES)
    for alone in PLUGIN_PROBES:
        if alone in names and len(names) > 1:
            raise LabError(f"the {alone} probe runs alone: the other probes' own instructions "
                           f"would be in its counts (asked: {','.join(names)})")
    if "latency-lb" in names and "latency" not in names:
        raise LabError("the latency-lb probe runs beside the latency probe, with the tool "
                       "it picks: name both (latency,latency-lb)")
    for n in names:
        if n not in PROBES:
            raise LabError(f"unknown probe {n!r}; known: "
                           + "; ".join(f"{p.name} ({p.what})" for p in PROBES.values()))
    return names


def parse(probes_used: Sequence[str], parsed: Parsed) -> None:
    """Every used probe's metrics into parsed.metrics, in the order of PROBES."""
    for name, probe in PROBES.items():
        if name in probes_used:
            probe.parse(parsed)


def catalogue() -> List[MetricSpec]:
    """Every metric a probe or the system produces (workloads' own: workloads.py)."""
    return [m for p in PROBES.values() for m in p.metrics] + list(SYSTEM_METRICS)
