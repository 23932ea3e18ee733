"""The hardware kit: `./schedlab hw`, run as root on an SMT machine booted
into a kernel with the series and the measurement series.

The passes, the benchmarks, the plan, the request (KitRun) and the runs of
a pass as an 'ab' request; the arms are arms.py's, what the machine has is
machine.py's, the passes run in rounds.py.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from schedlab.core import build as buildmod
from schedlab.core.util import LabError
from schedlab.kit import benchmarks as benchmod
from schedlab.kit import machine
from schedlab.kit.arms import (KIT, KIT_ARMS, STOCK, KitArm, arm_knobs, arms_here, check_rounds,
                               patch_pairs)
from schedlab.measuring import ab, measure
from schedlab.measuring import plan as planmod
from schedlab.measuring import probes as probemod
from schedlab.measuring import results as resmod
from schedlab.measuring import resume
from schedlab.measuring import workloads as workmod

# The probe pass's probes (funclatency of should_we_balance(),
# sched_balance_rq() and sched_balance_newidle() with them; perf stat's
# cycles where the machine counts them).  perf c2c's modified-line loads
# only with --c2c: its sampling of every CPU's loads, and perf's own thread,
# change what the other numbers measure.
PROBES = "swb,lb,latency,latency-lb,cycles"
C2C_PROBE = "c2c"


# What --label may be: it names the passes' folders (work/results/hw-tp@LABEL/;
# no arm's or pass's folder has an @), the arms' PREFIX@LABEL-ARM; with
# no -, which would let LABEL-ARM be another label's folder.
LABEL = re.compile(r"[a-z0-9][a-z0-9.+_]{0,31}")


@dataclass(frozen=True)
class Pass:
    """One kind of kit run: its probes, the prefix of its result folders
    (work/results/PREFIX-ARM/, the report in work/results/PREFIX/, its run
    record in work/PREFIX/), the arms it runs by default (all this kernel
    can run if none), its benchmarks by default, and the kernels whose arms
    it runs: the probes need the functions the measurement series keeps out
    of line, which the stock kernel inlines."""
    name: str
    probes: str
    prefix: str
    arms: Tuple[str, ...] = ()
    bench: Tuple[str, ...] = benchmod.PROBES
    about: str = ""
    kernels: Tuple[str, ...] = (KIT,)
    label: str = ""     # --label: kept apart from the passes of other labels

    def runs(self, arm: KitArm) -> bool:
        return arm.kernel in self.kernels

    def labelled(self, label: str) -> "Pass":
        """This pass under --label LABEL: its own folders."""
        if not label:
            return self
        if not LABEL.fullmatch(label):
            raise LabError(f"hw: --label {label!r}: lower-case letters, digits and . + _, "
                           "at most 32, starting with a letter or digit (smt4, llc_off)")
        return replace(self, prefix=f"{self.prefix}@{label}", label=label)

    @property
    def title(self) -> str:
        return self.name + (f" ({self.label})" if self.label else "")


# The benchmarks with nothing attached: their own numbers.  The runner
# checks before, during and after each run that nothing is (run-plan.sh).
THROUGHPUT = Pass("throughput", probemod.NO_PROBES, "hw-tp", about=(
    "This is the kit's throughput pass: nothing was attached to the runs (no bpftrace, "
    "funclatency or perf process, no BPF program of a tracing type, no kprobe or ftrace "
    "tracer, schedstats left as the machine had them). The runner checked that before, "
    "every few seconds during and after each run (each run's `watch` in its run-*.json); "
    "a run with anything found is invalid and not in these tables. The numbers here are "
    "the benchmarks' own; the probe pass's report has the probes' counts and latencies."),
    kernels=(KIT, STOCK), bench=benchmod.THROUGHPUT)
# The same benchmarks with the probes: what each arm's code does per call.
# The probes cost more in the arms that call the probed functions more, so
# the benchmarks' own numbers of this pass are not results.
PROBE_PASS = Pass("probes", PROBES, "hw", about=(
    "This is the kit's probe pass: the benchmarks ran with the probes attached "
    "(bpftrace's counts, funclatency, schedstat, perf stat where the PMU counts). Read "
    "its probe counts and latencies; the benchmarks' own numbers in it carry the probes' "
    "cost, which differs by arm, and are not results: the throughput pass's report has "
    "them without."))
# `hw --lb-share`: how close in time the busy balances of a level come on
# this machine, which decides what SG_STATS_REUSE can save (patch 10's
# changelog leaves it to hardware).  A pass of its own: its probe on
# should_we_balance() would add to the time funclatency measures there.  The
# loads where every CPU is busy, and one with idle time.
SHARE = Pass("lb-share", "lb-share,lb-time", "hw-share", ("series", "lbstats"),
             ("stress-100", "stress-90", "hackbench-process"),
             "This is the kit's `--lb-share` pass. It records every busy balance above the "
             "lowest sched domain level (CPU, level, last_balance, busy interval, time). It "
             "then replays "
             "them under SG_STATS_REUSE's rule (patch 10): a busy balance leaves the sums of "
             "the groups it read, and another busy balance of the level takes them within "
             "1/64 of its busy interval. `group reads sums could serve (LEVEL)` is the share "
             "of those balances' per-CPU reads the sums could have served. Moves are not "
             "seen, so it is an upper bound of what the feature saves with this machine's "
             "own balancing phases. `group reads sums could serve, the measured time a "
             "runqueue (LEVEL)` walks each balance's groups in the kernel's order at this "
             "machine's own pace (the level's median time in "
             "sched_balance_find_src_group() over the runqueues a balance reads, each arm "
             "its own): balances that start together race. The lbstats arm runs the "
             "feature itself.")
PASSES = {p.name: p for p in (THROUGHPUT, PROBE_PASS, SHARE)}
# What `./schedlab hw` runs, in this order; --pass NAME runs one.
DEFAULT_PASSES = (THROUGHPUT, PROBE_PASS)


def estimate(arms: int, rounds: int, runs: int, seconds: int, points: Sequence[str],
             probe_list: str = PROBES) -> float:
    """The kit's duration: every arm's plan, every round (measure.py's estimate)."""
    plan = planmod.make_plan(",".join(points), probe_list, runs=runs, seconds=seconds,
                             schbench=Path(workmod.SCHBENCH)).with_(
        warmup=True, warm=tuple(benchmod.first_points(points)))
    return arms * rounds * measure.estimate_seconds(plan, accel="host")


def attach_method(config: str) -> str:
    """How bpftrace attaches to the kernel of CONFIG: "kprobe" where a BPF
    trampoline cannot (function tracing without direct calls: ppc64le
    built by a compiler whose patchable entries the kernel rejects), else
    "auto" (fentry where there is BTF, run-plan.sh)."""
    conf = buildmod.parse_config(config)
    if conf.get("CONFIG_FUNCTION_TRACER") == "y" and \
            conf.get("CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS") != "y":
        return "kprobe"
    return "auto"


def online_cpus() -> str:
    """This machine's online CPUs, as sysfs lists them ("0-3,8-11" in SMT4
    on two 8-thread cores): a resume under another SMT mode is refused."""
    try:
        return Path("/sys/devices/system/cpu/online").read_text().strip()
    except OSError:
        return ""


def ncpu() -> int:
    """The CPUs the sweeps' points are picked for: those this process may run on."""
    return len(os.sched_getaffinity(0))


def points(kind: Pass, bench: Optional[Sequence[str]], schbench: Optional[Path],
           cpus: int) -> List[str]:
    """The workloads KIND runs: BENCH (families or points; the pass's own
    by default) on CPUS CPUs; without a schbench binary its points are left
    out of the default and refused when asked for."""
    out = benchmod.expand(list(bench or kind.bench), cpus)
    if schbench is None and benchmod.needs_schbench(out):
        if bench:
            raise LabError("hw: schbench is asked for but not here: './schedlab hw --setup' "
                           "fetches and builds it at the kit's commit, --bench-dir DIR takes "
                           "a local copy")
        out = [b for b in out if not benchmod.needs_schbench([b])]
    return out


def plan_text(present: Sequence[str], rounds: int, runs: int, seconds: int,
              names: Optional[Sequence[str]] = None,
              bench: Optional[Sequence[str]] = None,
              kinds: Sequence[Pass] = DEFAULT_PASSES, schbench: Optional[Path] = None,
              cpus: int = 0) -> str:
    """What `hw --plan` prints: the arms (NAMES only, if given, else those of
    KINDS' first), each pass's benchmarks (BENCH, default its own) on CPUS
    CPUs (default this machine's), the duration of every pass of KINDS here
    and, where this kernel lacks arms, booted into the series."""
    refuse_unknown(names, bench)
    if names is not None and len(dict.fromkeys(names)) < 2:
        raise LabError("hw: at least two arms: the reference and one to compare with it")
    cpus = cpus or ncpu()
    kind = kinds[0]
    names = names or default_arms(kind, arms_here(present)[0]) or list(kind.arms)
    ok, missing = arms_here(present)
    if names:
        order = {n: i for i, n in enumerate(names)}
        ok = sorted((a for a in ok if a.name in order), key=lambda a: order[a.name])
        missing = [a for a in missing if a.name in order]
    lines = [] if present else ["this kernel has none of the series' knobs and features: "
                                "booted into the series, the kit would run"]
    lines.append("arms, each once a round in an order shuffled every round; the first is "
                 "the reference:")
    lines += [f"  {a.name:14} {a.what}" for a in ok]
    lines += [f"  {a.name:14} NOT HERE: this kernel lacks {a.needs}" for a in missing]
    each = {k.name: points(k, bench, schbench, cpus) for k in kinds}
    for k in kinds:
        lines.append(f"the {k.name} pass's benchmarks on {cpus} CPUs: " + ", ".join(each[k.name]))
    if schbench is None and not bench and any(benchmod.needs_schbench(
            benchmod.expand(k.bench, cpus)) for k in kinds):
        lines.append("schbench: not here, left out ('./schedlab hw --setup' fetches and "
                     "builds it)")
    elif schbench is not None and any(benchmod.needs_schbench(each[k.name]) for k in kinds):
        lines.append(f"schbench: {schbench}")
    # A pass with fewer than two of its kernels' arms asked for does not
    # run (the probes run the kit kernel's arms only).
    every = ok + missing
    skipped = [k for k in kinds if len([a for a in every if k.runs(a)]) < 2]
    lines += [f"no {k.name} pass: fewer than two of the arms run on "
              f"{' or '.join(k.kernels)} kernels" for k in skipped]
    kinds = [k for k in kinds if k not in skipped]
    lines.append("passes, one after the other: " + ", ".join(k.name for k in kinds)
                 + f"; each sweep's first point warmed up for "
                 f"{planmod.warmup_seconds(seconds)}s an arm and round")
    for these, where in ((ok, "here"), (every, "booted into the series")):
        n = len(these)
        # Each pass runs the arms of its own kernels (the probes: the kit's).
        secs = sum(estimate(len([a for a in these if k.runs(a)]), rounds, runs, seconds,
                            each[k.name], k.probes) for k in kinds)
        lines.append(f"{len(kinds)} pass(es) x {n} arms x {rounds} rounds x {runs} run(s), "
                     f"{seconds}s a run, {where}: about {secs / 3600:.2f} h")
        if not missing:
            break
    return "\n".join(lines)


def default_arms(kind: Pass, here: Sequence[KitArm]) -> Optional[List[str]]:
    """KIND's arms where this kernel runs them (None: every arm here); where
    it runs fewer than two, the reference's repeat joins."""
    if not kind.arms:
        return None
    names = {a.name for a in here}
    out = [n for n in kind.arms if n in names]
    if len(out) < 2 and "series-again" in names:
        out.append("series-again")
    if len(out) < 2:
        raise LabError(f"hw --{kind.name}: this kernel runs {', '.join(out) or 'none'} of its "
                       f"arms ({', '.join(kind.arms)}, or series-again)")
    return out


def refuse_unknown(names: Optional[Sequence[str]], bench: Optional[Sequence[str]]) -> None:
    """Arm and benchmark names the kit does not know, refused before anything
    is checked or run."""
    unknown = [n for n in names or () if n not in {a.name for a in KIT_ARMS}]
    if unknown:
        raise LabError(f"hw: unknown arm(s) {', '.join(unknown)}; known: "
                       + ", ".join(a.name for a in KIT_ARMS))
    if bench is not None and (not bench or "" in bench):
        raise LabError("hw: --bench: an empty name (a comma too many?)")
    for b in bench or ():
        bad = benchmod.refusal(b)
        if bad:
            raise LabError(f"hw: --bench {b}: {bad}")
    unknown = [b for b in bench or () if not benchmod.known(b)]
    if unknown:
        raise LabError(f"hw: unknown benchmark(s) {', '.join(unknown)}; known: "
                       + ", ".join(benchmod.FAMILIES) + ", a point of theirs (hw --plan "
                       "lists them) or a workload of the lab ('./schedlab measure --help')")


def pick(arms: Sequence[KitArm], names: Optional[Sequence[str]],
         bench: Optional[Sequence[str]] = None) -> List[KitArm]:
    """The arms asked for (all by default), in the order given: the first is
    the reference; unknown names refused."""
    refuse_unknown(names, bench)
    if names:
        missing = [n for n in names if n not in {a.name for a in arms}]
        if missing:
            raise LabError(f"hw: this kernel cannot run the arm(s) {', '.join(missing)}")
        byname = {a.name: a for a in arms}
        arms = [byname[n] for n in dict.fromkeys(names)]
    if len(arms) < 2:
        raise LabError("hw: at least two arms: the reference and one to compare with it")
    return list(arms)


def request(arms: Sequence[KitArm], rounds: int, runs: int, seconds: int, fresh: bool = False,
            bench: Optional[Sequence[str]] = None, plots: bool = True,
            present: Sequence[str] = (), on_start: Optional[Callable[[], None]] = None,
            c2c: bool = False, kind: Pass = PROBE_PASS, order_seed: Optional[int] = None,
            here: Optional[Sequence[str]] = None, schbench: Optional[Path] = None):
    """The kit's runs as an 'ab' request on this machine: every arm once a
    round, in an order shuffled with ORDER_SEED (None: as given), rounds for
    boots, the arms' debugfs writes as knobs: every switch of PRESENT (the
    KernelNeeds this kernel has, arm_knobs()); each sweep's first point
    warmed up once an arm and round, not recorded.  HERE: the arms the running kernel runs
    (each arm's variant is its kernel's name), maybe none; None: all.
    BENCH: workloads by name, sweep points picked (points()); SCHBENCH: the
    binary its points run."""
    bench = list(bench or points(kind, None, schbench, ncpu()))
    c2c = c2c and kind.name == PROBE_PASS.name
    plan = planmod.make_plan(",".join(bench), kind.probes + ("," + C2C_PROBE if c2c else ""),
                             runs=runs, seconds=seconds,
                             schbench=schbench, attach=attach_method(machine.config_text())
                             ).with_(warmup=True, warm=tuple(benchmod.first_points(bench)))
    return ab.AbRequest(tree=None, plan=plan, topology="host",
                        arms=tuple(ab.Arm(a.name, a.kernel, arm_knobs(a, present))
                                   for a in arms),
                        prefix=kind.prefix, boots=rounds, fresh=fresh, host=True,
                        timeout=3600, pairs=patch_pairs(arms), plots=plots,
                        on_start=on_start, order_seed=order_seed,
                        here=None if here is None else tuple(here), cpus=online_cpus())


def resumed(kind: Pass, key: str) -> Optional[int]:
    """KEY of the request of KIND's run with boots finished, the run this
    one resumes (the arms' seed, the rounds): None without such a run."""
    try:
        old = resume.read(resmod.results_dir(kind.prefix))
    except LabError:
        return None
    value = old.request.get(key) if old and old.finished else None
    return value if isinstance(value, int) else None


def order_seed(kind: Pass, fresh: bool, given: Optional[int]) -> int:
    """The seed that shuffles the arms each round: GIVEN, else the one of
    KIND's run that this run resumes, else a new one."""
    if given is not None:
        return given
    seed = None if fresh else resumed(kind, "order_seed")
    return random.SystemRandom().randrange(1 << 32) if seed is None else seed


@dataclass(frozen=True)
class KitRun:
    """What `./schedlab hw` is asked to run: the least and the most rounds
    (more while a headline metric's 95% interval is wider than WIDTH percent
    of its mean), the runs of each arm and benchmark a round, the arms (the
    first the reference) and benchmarks by name (None: the pass's), the
    passes, the seed of the arms' order, the governor pinned, where the
    benchmarks no distribution packages come from (--bench-dir; None: built
    at the kit's commit) and the label that keeps the passes apart."""
    rounds: int = 5
    max_rounds: int = 10
    width: float = 5.0
    runs: int = 1
    seconds: int = 10
    fresh: bool = False
    arms: Optional[Tuple[str, ...]] = None
    bench: Optional[Tuple[str, ...]] = None
    argv: Tuple[str, ...] = ("./schedlab", "hw")
    plots: bool = True
    c2c: bool = False
    kinds: Tuple[Pass, ...] = DEFAULT_PASSES
    seed: Optional[int] = None
    pin: bool = True
    bench_dir: Optional[Path] = None
    label: str = ""

    def check(self) -> None:
        """Refused before the machine is looked at."""
        check_rounds(self.rounds)
        Pass("", "", "").labelled(self.label)
        if self.bench_dir is not None and not self.bench_dir.exists():
            raise LabError(f"hw: --bench-dir {self.bench_dir} is not there")
        if self.max_rounds < self.rounds:
            raise LabError(f"hw: --max-rounds {self.max_rounds} is below --rounds "
                           f"{self.rounds}")
        if not 0 < self.width <= 100:
            raise LabError(f"hw: --ci-width {self.width}: a percentage above 0, at most 100")
