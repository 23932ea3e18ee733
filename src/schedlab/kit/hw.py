"""The hardware kit: `./schedlab hw`, run as root on an SMT machine booted
into a kernel with the series and the measurement series.

The passes, the plan and the runs as an 'ab' request, the report; the
arms are arms.py's, what the machine has is machine.py's.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from schedlab.core.util import LabError, say, work_dir
from schedlab.kit import hwreport, machine, noise, significance
from schedlab.kit.arms import (KIT_ARMS, MIN_ROUNDS, KitArm, arm_knobs, arms_here,
                                 check_rounds, patch_pairs)
from schedlab.measuring import ab, measure
from schedlab.measuring import plan as planmod
from schedlab.measuring import probes as probemod
from schedlab.measuring import results as resmod
from schedlab.measuring import resume

# The probe pass's probes (funclatency of should_we_balance(),
# sched_balance_rq() and sched_balance_newidle() with them; perf stat's
# cycles where the machine counts them).  perf c2c's modified-line loads
# only with --c2c: its sampling of every CPU's loads, and perf's own thread,
# change what the other numbers measure.
PROBES = "swb,lb,latency,latency-lb,cycles"
C2C_PROBE = "c2c"


# The lab's workloads the kit runs (workloads.py), the should_we_balance()
# busy levels first; schbench joins when it is on PATH.
BENCHMARKS = ("stress-100", "stress-90", "stress-50",
              # hackbench's four modes at 1 group per 4 CPUs, then one group
              # and 2 per CPU
              "hackbench-process", "hackbench-thread", "hackbench-process-pipe",
              "hackbench-pipe", "hackbench-one-group", "hackbench-overload",
              "perf-messaging", "perf-pipe", "tbench")


@dataclass(frozen=True)
class Pass:
    """One kind of kit run: its probes, the prefix of its result folders
    (work/results/PREFIX-ARM/, the report in work/results/PREFIX/, its run
    record in work/PREFIX/), the arms it runs by default (all this kernel
    can run if none) and its benchmarks by default."""
    name: str
    probes: str
    prefix: str
    arms: Tuple[str, ...] = ()
    bench: Tuple[str, ...] = BENCHMARKS
    about: str = ""


# The benchmarks with nothing attached: their own numbers.  The runner
# checks before, during and after each run that nothing is (run-plan.sh).
THROUGHPUT = Pass("throughput", probemod.NO_PROBES, "hw-tp", about=(
    "This is the kit's throughput pass: nothing was attached to the runs (no bpftrace, "
    "funclatency or perf process, no BPF program of a tracing type, no kprobe or ftrace "
    "tracer, schedstats left as the machine had them). The runner checked that before, "
    "every few seconds during and after each run (each run's `watch` in its run-*.json); "
    "a run with anything found is invalid and not in these tables. The numbers here are "
    "the benchmarks' own; the probe pass's report has the probes' counts and latencies."))
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


def estimate(arms: int, rounds: int, runs: int, seconds: int,
             benchmarks: Sequence[str] = BENCHMARKS, probe_list: str = PROBES) -> float:
    """The kit's duration: every arm's plan, every round (measure.py's estimate)."""
    plan = planmod.make_plan(",".join(benchmarks), probe_list, runs=runs, seconds=seconds)
    return arms * rounds * measure.estimate_seconds(plan, accel="host")


def plan_text(present: Sequence[str], rounds: int, runs: int, seconds: int,
              names: Optional[Sequence[str]] = None,
              bench: Optional[Sequence[str]] = None,
              kinds: Sequence[Pass] = DEFAULT_PASSES) -> str:
    """What `hw --plan` prints: the arms (NAMES only, if given, else those of
    KINDS' first), the benchmarks (BENCH, default its), the duration of every
    pass of KINDS here and, where this kernel lacks arms, booted into the
    series."""
    refuse_unknown(names, bench)
    kind = kinds[0]
    names = names or default_arms(kind, arms_here(present)[0]) or list(kind.arms)
    bench = list(bench or kind.bench)
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
    lines.append("benchmarks: " + ", ".join(bench))
    lines.append("passes, one after the other: " + ", ".join(k.name for k in kinds))
    for n, where in ((len(ok), "here"), (len(ok) + len(missing), "booted into the series")):
        secs = sum(estimate(n, rounds, runs, seconds, bench, k.probes) for k in kinds)
        lines.append(f"{len(kinds)} pass(es) x {n} arms x {rounds} rounds x {runs} run(s) x "
                     f"{len(bench)} benchmarks, {seconds}s each timed one, {where}: about "
                     f"{secs / 3600:.2f} h")
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
    unknown = [b for b in bench or () if b not in BENCHMARKS + ("schbench",)]
    if unknown:
        raise LabError(f"hw: unknown benchmark(s) {', '.join(unknown)}; known: "
                       + ", ".join(BENCHMARKS + ("schbench",)))


def pick(arms: Sequence[KitArm], names: Optional[Sequence[str]],
         bench: Optional[Sequence[str]]) -> Tuple[List[KitArm], List[str]]:
    """The arms and benchmarks asked for (all by default), the arms in the
    order given: the first is the reference; unknown names refused."""
    refuse_unknown(names, bench)
    if names:
        missing = [n for n in names if n not in {a.name for a in arms}]
        if missing:
            raise LabError(f"hw: this kernel cannot run the arm(s) {', '.join(missing)}")
        byname = {a.name: a for a in arms}
        arms = [byname[n] for n in dict.fromkeys(names)]
    if len(arms) < 2:
        raise LabError("hw: at least two arms: the reference and one to compare with it")
    return list(arms), list(bench or BENCHMARKS)


def request(arms: Sequence[KitArm], rounds: int, runs: int, seconds: int, fresh: bool = False,
            bench: Optional[Sequence[str]] = None, plots: bool = True,
            present: Sequence[str] = (), on_start: Optional[Callable[[], None]] = None,
            c2c: bool = False, kind: Pass = PROBE_PASS, order_seed: Optional[int] = None):
    """The kit's runs as an 'ab' request on this machine: every arm once a
    round, in an order shuffled with ORDER_SEED (None: as given), rounds for
    boots, the arms' debugfs writes as knobs: every switch of PRESENT (the
    KernelNeeds this kernel has, arm_knobs()); each benchmark warmed up once
    an arm and round, not recorded."""
    bench = list(bench or kind.bench)
    if not kind.arms and "schbench" not in bench and shutil.which("schbench"):
        bench.append("schbench")
    plan = planmod.make_plan(",".join(bench), kind.probes + ("," + C2C_PROBE if c2c
                                                             and kind is PROBE_PASS else ""),
                             runs=runs, seconds=seconds,
                             schbench=Path(shutil.which("schbench") or "schbench")
                             ).with_(warmup=True)
    return ab.AbRequest(tree=None, plan=plan, topology="host",
                        arms=tuple(ab.Arm(a.name, "host", arm_knobs(a, present))
                                   for a in arms),
                        prefix=kind.prefix, boots=rounds, fresh=fresh, host=True,
                        timeout=3600, pairs=patch_pairs(arms), plots=plots,
                        on_start=on_start, order_seed=order_seed)


def order_seed(kind: "Pass", fresh: bool, given: Optional[int]) -> int:
    """The seed that shuffles the arms each round: GIVEN, else the one of
    KIND's unfinished run that this run resumes, else a new one."""
    if given is not None:
        return given
    if not fresh:
        try:
            old = resume.read(resmod.results_dir(kind.prefix))
        except LabError:
            old = None
        seed = old.request.get("order_seed") if old and old.finished else None
        if isinstance(seed, int):
            return seed
    return random.SystemRandom().randrange(1 << 32)


RUN_RECORD = "run.json"


def _arm_states(arms: Sequence[KitArm], rounds: int, runs: int, bench: Sequence[str],
                present: Sequence[str] = (), kind: Pass = PROBE_PASS):
    """The arms as the report shows them: the writes they made (every switch
    of PRESENT), their runs finished of those planned."""
    planned = rounds * runs * len(bench)
    return [hwreport.ArmState(a.name, a.what, arm_knobs(a, present),
                              hwreport.runs_done(resmod.results_dir(f"{kind.prefix}-{a.name}")),
                              planned, a.before) for a in arms]


def report(record: dict, tables: bool = True) -> Path:
    """The report of the run RECORD describes (what run() saved in
    work/hw/run.json, the machine's record with it): the 'ab' tables again
    from the finished runs (TABLES), then work/results/hw/report.md."""
    byname = {a.name: a for a in KIT_ARMS}
    arms = [byname[n] for n in record["arms"] if n in byname]
    bench = record["bench"]
    kind = PASSES.get(record.get("pass", PROBE_PASS.name), PROBE_PASS)
    if tables:
        try:
            ab.run(request(arms, record["rounds"], record["runs"], record["seconds"],
                           bench=bench, plots=record.get("plots", True),
                           present=record.get("switches", ()), c2c=record.get("c2c", False),
                           kind=kind, order_seed=record.get("order_seed")),
                   tables_only=True)
        except Exception as e:      # noqa: BLE001 - the report lists what finished anyway
            say(f"hw: no tables ({type(e).__name__}: {e}); the report lists what finished")
    box = record.get("machine") or hwreport.load_json(work_dir() / kind.prefix / "machine.json")
    folders = [resmod.results_dir(f"{kind.prefix}-{a.name}") for a in arms]
    states = _arm_states(arms, record["rounds"], record["runs"], bench,
                         record.get("switches", ()), kind)
    family = significance.headline_tests(
        {a.name: f for a, f in zip(arms, folders)},
        [(a, b) for a, b, _ in hwreport.pairs(states)]) if len(states) > 1 else []
    path = hwreport.write(resmod.results_dir(kind.prefix), box, states,
                          record["argv"], record.get("missing", ()),
                          record.get("left_out", ()),
                          {k: record[k] for k in ("rounds", "runs", "seconds")}
                          | ({"rounds": f"{record['rounds']} (a rehearsal of the kit: too few "
                              "for a comparison)"} if record["rounds"] < MIN_ROUNDS else {})
                          | {"benchmarks": ", ".join(bench)}
                          | _order_setting(record, [a.name for a in arms])
                          | _stopping_setting(record),
                          hwreport.probes_missing(folders), kind.about,
                          hwreport.run_notes(folders), kind.name,
                          significance.section(family))
    say(f"hw: the report: {path}")
    return path


def _order_setting(record: dict, names: Sequence[str]) -> Dict[str, str]:
    """The report's line on the arms' order: the seed and each round's."""
    seed = record.get("order_seed")
    if seed is None:
        return {"arm order": "as given, every round"}
    rounds = ab.round_orders(names, seed, record["rounds"])
    return {"arm order": f"shuffled every round with seed {seed} ("
            + "; ".join(", ".join(r) for r in rounds) + ")"}


def _stopping_setting(record: dict) -> Dict[str, str]:
    """The report's line on when the rounds stopped."""
    stop = record.get("stopping")
    if not stop:
        return {}
    how = (f"every headline interval within {stop['width']}% of its mean"
           if stop["met"] else f"the most rounds, {stop['max']}, with "
           f"{stop['wide']} headline interval(s) still wider than {stop['width']}% "
           f"(widest: {stop['widest']})")
    return {"rounds stopped at": f"{record['rounds']}: {how}"}


def _clear_tables(folder: Path) -> None:
    """The tables, plots and report of an earlier run, before this one
    starts: a report after Ctrl-C must not show them as this run's."""
    for pattern in ("headline*.md", "compare*.md", "compare*.txt", "equivalence.*",
                    "sweep.*", "report.md"):
        for p in folder.glob(pattern):
            p.unlink()
    for d in folder.glob("plots*"):
        if d.is_dir():
            shutil.rmtree(d)


def _again(kind: Pass) -> str:
    """The command that writes KIND's report again."""
    return "./schedlab hw --report" + (" --lb-share" if kind is SHARE else
                                       f" --pass {kind.name}")


def report_again(plots: bool = True, kinds: Sequence[Pass] = DEFAULT_PASSES) -> int:
    """`./schedlab hw --report`: the report of each of KINDS' last run, from
    what finished; with PLOTS, whatever the run was told (a rehearsal's guest
    leaves the plots to the host)."""
    records = [(k, hwreport.load_json(work_dir() / k.prefix / RUN_RECORD)) for k in kinds]
    if not any(r for _, r in records):
        raise LabError("hw --report: no run to report on (work/PASS/run.json is written when "
                       "'./schedlab hw' starts a pass's runs)")
    for _, record in records:
        if record:
            report(record | {"plots": plots})
    return 0


@dataclass(frozen=True)
class KitRun:
    """What `./schedlab hw` is asked to run: the least and the most rounds
    (more while a headline metric's 95% interval is wider than WIDTH percent
    of its mean), the runs of each arm and benchmark a round, the arms (the
    first the reference) and benchmarks by name (None: the pass's), the
    passes, the seed of the arms' order, and the governor pinned."""
    rounds: int = 5
    max_rounds: int = 10
    width: float = 5.0
    runs: int = 1
    seconds: int = 30
    fresh: bool = False
    arms: Optional[Tuple[str, ...]] = None
    bench: Optional[Tuple[str, ...]] = None
    argv: Tuple[str, ...] = ("./schedlab", "hw")
    plots: bool = True
    c2c: bool = False
    kinds: Tuple[Pass, ...] = DEFAULT_PASSES
    seed: Optional[int] = None
    pin: bool = True

    def check(self) -> None:
        """Refused before the machine is looked at."""
        check_rounds(self.rounds)
        if self.max_rounds < self.rounds:
            raise LabError(f"hw: --max-rounds {self.max_rounds} is below --rounds "
                           f"{self.rounds}")
        if not 0 < self.width <= 100:
            raise LabError(f"hw: --ci-width {self.width}: a percentage above 0, at most 100")


def run(check_only: bool, kit: KitRun = KitRun()) -> int:
    """`./schedlab hw`: the preflight, the machine record, then each pass of
    KIT's in turn: its runs and its report; with kit.pin, under the
    performance governor (put back after)."""
    kit.check()
    pf = machine.preflight()
    say("hw: what the kit needs here")
    say(pf.text())
    with noise.pinned(kit.pin and pf.ok and not check_only) as pinning:
        return _run(pf, pinning, check_only, kit)


def _run(pf: machine.Preflight, pinning: str, check_only: bool, kit: KitRun) -> int:
    box = machine.machine_record()
    box["noise"] = noise.record() | {"governor for the runs": pinning}
    say("  " + "; ".join(f"{k}: {v}" for k, v in box["noise"].items() if v))
    for kind in kit.kinds:
        out = work_dir() / kind.prefix
        out.mkdir(parents=True, exist_ok=True)
        (out / "machine.json").write_text(json.dumps(box, indent=1) + "\n")
        (out / "preflight.json").write_text(json.dumps([asdict(c) for c in pf.checks],
                                                       indent=1) + "\n")
    say(f"  the machine's record: {work_dir() / kit.kinds[0].prefix / 'machine.json'}")
    if not pf.ok:
        names = ", ".join(c.name for c in pf.missing())
        raise LabError(f"hw: cannot measure on this machine as it is: {names} "
                       "(each with its fix above)")
    if check_only:
        say("hw: everything the kit needs is here")
        return 0
    present = machine.kernel_pieces(machine.DEBUG_SCHED)
    here, cannot = arms_here(present)
    status = 0
    for kind in kit.kinds:
        arms, chosen = pick(here, kit.arms or default_arms(kind, here), kit.bench or kind.bench)
        status = max(status, _run_pass(kind, arms, chosen, kit, box, present, cannot))
    return status


def _run_pass(kind: Pass, arms: Sequence[KitArm], bench: Sequence[str], kit: KitRun,
              box: dict, present: Sequence[str], cannot: Sequence[KitArm]) -> int:
    """One pass of the kit: its 'ab' request, its record in work/PREFIX/run.json,
    its report (also after Ctrl-C); a round more while a headline interval
    is too wide, up to kit.max_rounds."""
    out = work_dir() / kind.prefix
    record: Dict[str, Any] = {}
    started: List[bool] = []

    def begin() -> None:
        """The request was accepted: this run's record, no earlier tables."""
        (out / RUN_RECORD).write_text(json.dumps(record, indent=1) + "\n")
        if not started:
            _clear_tables(resmod.results_dir(kind.prefix))
        started.append(True)

    seed = order_seed(kind, kit.fresh, kit.seed)
    rounds = kit.rounds

    def req_of(n: int) -> ab.AbRequest:
        return request(arms, n, kit.runs, kit.seconds, kit.fresh and n == kit.rounds, bench,
                       kit.plots, present, begin, kit.c2c, kind, seed)

    req = req_of(rounds)
    bench = [w.name for w in req.plan.workloads]
    record.update({"argv": list(kit.argv), "arms": [a.name for a in arms],
                   "bench": bench, "rounds": rounds, "runs": kit.runs, "seconds": kit.seconds,
                   "plots": kit.plots, "switches": list(present), "c2c": kit.c2c,
                   "machine": box, "order_seed": seed, "pass": kind.name,
                   "missing": [a.name for a in cannot],
                   "left_out": [t.names[0] for t in machine.TOOLS if t.optional
                                and not any(shutil.which(n) for n in t.names)]})
    say(f"hw: the {kind.name} pass: arms {', '.join(a.name for a in arms)} (the first is the "
        f"reference); benchmarks {', '.join(bench)}; {rounds} to {kit.max_rounds} rounds "
        f"(until every headline 95% interval is within {kit.width}% of its mean), the arms "
        f"shuffled every round with seed {seed} (--seed {seed} repeats the order)")
    folders = {a.name: resmod.results_dir(f"{kind.prefix}-{a.name}") for a in arms}
    status = 0
    try:
        while True:
            status = ab.run(req)
            wide = significance.too_wide(folders, kit.width)
            record["stopping"] = {"width": kit.width, "max": kit.max_rounds, "met": not wide,
                                  "wide": len(wide), "widest": _widest(wide)}
            if not wide or rounds >= kit.max_rounds:
                break
            rounds += 1
            record["rounds"] = rounds
            say(f"hw: {len(wide)} headline interval(s) wider than {kit.width}% (widest: "
                f"{_widest(wide)}): round {rounds} of at most {kit.max_rounds}")
            req = req_of(rounds)
        return status
    finally:
        # Also after Ctrl-C or a failed run, once the runs had started: the
        # report of what finished ('ab' made the tables when all did).
        if started:
            (out / RUN_RECORD).write_text(json.dumps(record, indent=1) + "\n")
            try:
                report(record, tables=False)
            except Exception as e:      # noqa: BLE001 - never hide why the run ended
                say(f"hw: no report ({type(e).__name__}: {e}); '{_again(kind)}' tries again")


def _widest(wide: Sequence[Tuple[str, str, str, float]]) -> str:
    if not wide:
        return ""
    arm, workload, metric, w = wide[0]
    return f"{arm} {workload} {metric}, {w:.1f}%"
