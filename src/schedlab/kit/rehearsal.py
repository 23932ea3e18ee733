"""The hardware kit's rehearsal: `./schedlab hw` inside an SMT guest.

Detail: docs/modules.md, section kit/rehearsal.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from schedlab.core import topology as topomod
from schedlab.core import vm
from schedlab.core.spec import BuildSpec, TreeSpec
from schedlab.core.util import LabError, repo_dir, say, work_dir
from schedlab.kit import arms as armmod
from schedlab.kit import benchmarks as benchmod
from schedlab.kit import hw, hwreport, reporttext, rounds
from schedlab.measuring import results as resmod
from schedlab.series.topics import built

# The reference, its repeat (the A/A margin), the stock kernel (a second
# boot of the guest: the reboot a user makes) and v7.3's should_we_balance().
REHEARSAL_ARMS = ("series", "series-again", armmod.STOCK, "swb-v7.3")
SHARE_ARMS = ("series", "lbstats")
# What the --lb-share pass's report must show: at the level above SMT.
SHARE_METRIC = "group reads sums could serve"
# Its runs' length: in 3 s an smt8 guest may run no busy balance above SMT
# (none in one of two arms of a rehearsal), and the share has no value.
SHARE_SECONDS = 10
BENCH = ("stress-100",)
# The switch took effect: under load on every CPU, v7.3's should_we_balance()
# (swb_state 0) probes more CPUs per call than the series' (the KUnit tables
# of every fixture; 2.805 against 0.475 in the first rehearsal).
SWITCH_METRIC = "idle_cpu probes per should_we_balance call"
SWITCH_PAIR = ("swb-v7.3", "series")
# Left running after the kit, in the guest: any is a failure (full command
# lines; "[b]pftrace" matches bpftrace but not the shell that holds it).
LEFTOVERS = ("[b]pftrace", "[f]unclatency", "[s]tress-ng", "[h]ackbench", "[t]bench",
             "[p]erf bench", "[p]erf record", "[p]erf stat", "[p]erf c2c", "[s]chbench")
MARK = "@@rehearsal"
# schbench's rows the throughput pass's report.txt must have for each point.
SCHBENCH_ROWS = ("schbench wakeup p50", "schbench wakeup p99", "schbench wakeup p99.9",
                 "schbench request p99")


@dataclass(frozen=True)
class RehearsalRequest:
    topology: str = "smt8"
    arms: Tuple[str, ...] = REHEARSAL_ARMS
    bench: Tuple[str, ...] = BENCH
    seconds: int = 3
    tree: TreeSpec = TreeSpec()
    rounds: int = 1
    runs: int = 1
    c2c: bool = False
    share: bool = False         # the kit's --lb-share pass
    seed: Optional[int] = None  # the arms' order (hw --seed); None: the kit picks one
    pass_name: Optional[str] = None     # hw --pass; None: both passes
    bench_dir: Optional[Path] = None    # hw --bench-dir: schbench, built here for the guest

    def kinds(self) -> Tuple[hw.Pass, ...]:
        """The kit's passes the guest runs."""
        if self.share:
            return (hw.SHARE,)
        return (hw.PASSES[self.pass_name],) if self.pass_name else hw.DEFAULT_PASSES
    timeout: float = 5400
    memory: int = 4096


@dataclass
class RehearsalOutcome:
    ok: bool
    report: str = ""
    problems: List[str] = field(default_factory=list)
    seconds: float = 0.0


def folder() -> Path:
    return work_dir() / "hw-rehearsal"


def guest_script(req: RehearsalRequest, config: Path, out: Path, fresh: bool = True,
                 bench_dir: Optional[Path] = None) -> str:
    """What the guest runs: the kit as a user runs it, then what is left;
    BENCH_DIR: schbench built on the host (the guest has the host's files)."""
    # --fresh in the first boot: the guest's results folder is the host's,
    # kept between rehearsals; each rehearsal measures everything again.  The
    # second boot (the stock kernel) goes on with the same command.
    cmd = ["work/venv/bin/python", "-m", "schedlab", "hw", "--rounds", str(req.rounds),
           "--max-rounds", str(req.rounds),
          "--runs", str(req.runs), "--seconds", str(req.seconds),
          "--bench", ",".join(req.bench), "--no-plots"] + (["--fresh"] if fresh else []) + (
              ["--c2c"] if req.c2c else []) + (["--lb-share"] if req.share else []) + (
              ["--seed", str(req.seed)] if req.seed is not None else []) + (
              ["--pass", req.pass_name] if req.pass_name else []) + (
              ["--bench-dir", str(bench_dir)] if bench_dir else [])
    for a in req.arms:
        cmd += ["--arm", a]
    left = "|".join(LEFTOVERS)
    return " && ".join([
        f"cd {shlex.quote(str(repo_dir()))}",
        f"export SCHEDLAB_WORK={shlex.quote(str(out))} PYTHONPATH=src "
        f"SCHEDLAB_KERNEL_CONFIG={shlex.quote(str(config))} {armmod.REHEARSAL_ENV}=1",
        # Everything below runs whatever the kit did.
        "{ " + shlex.join(cmd) + f"; echo {MARK} hw-rc=$?; "
        f"echo {MARK} swb_state=$(cat /sys/kernel/debug/sched/swb_state 2>&1); "
        f"echo {MARK} left=$(pgrep -f -d, '{left}' || true); }}",
    ])


def parse_marks(output: str) -> Dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(rf"{MARK} (\S+?)=(\S*)", output)}


def switch_values(results: Path, bench: str) -> Dict[str, float]:
    """SWITCH_METRIC per arm of SWITCH_PAIR, from the runs the guest left in
    RESULTS (hw-ARM/run-BENCH-*.json; the mean over the runs found)."""
    out = {}
    for arm in SWITCH_PAIR:
        try:
            runs = resmod.read_runs(results / f"hw-{arm}")
        except LabError:        # no runs of this arm: check_switch says so
            continue
        vals = [float(r.metrics[SWITCH_METRIC]["value"]) for r in runs
                if r.workload == bench and SWITCH_METRIC in r.metrics]
        if vals:
            out[arm] = sum(vals) / len(vals)
    return out


def check_switch(values: Dict[str, float], req: RehearsalRequest) -> List[str]:
    if not set(SWITCH_PAIR) <= set(req.arms):
        return []
    old, new = SWITCH_PAIR
    if old not in values or new not in values:
        return [f"no '{SWITCH_METRIC}' for {old} or {new}: the switch's effect is unseen"]
    if values[old] <= values[new]:
        return [f"{old} probed {values[old]:.3f} CPUs per call, not more than {new}'s "
                f"{values[new]:.3f}: swb_state 0 did not take effect"]
    return []


def kernels(req: RehearsalRequest) -> List[str]:
    """The guest's boots, in order: the kit's kernel, then the stock one
    where the stock arm is asked for."""
    return [armmod.KIT] + ([armmod.STOCK] if armmod.STOCK in req.arms else [])


def check(marks: Dict[str, Dict[str, str]], reports: Dict[str, str],
          req: RehearsalRequest) -> List[str]:
    """What the rehearsal asks of each boot's marks (MARKS by kernel) and of
    each pass's report (REPORTS by pass name)."""
    problems = []
    boots = kernels(req)
    for n, kernel in enumerate(boots):
        m = marks.get(kernel, {})
        # The kit's kernel, with the stock kernel's arm still to run, says so.
        want = str(rounds.OTHER_KERNEL) if n < len(boots) - 1 else "0"
        at = f" on the {kernel} kernel" if len(boots) > 1 else ""
        if m.get("hw-rc") != want:
            problems.append(f"the kit exited{at} with status "
                            f"{m.get('hw-rc', 'none (no mark)')}, not {want}")
        if kernel == armmod.KIT and m.get("swb_state") != "4":
            problems.append(f"swb_state after the kit: {m.get('swb_state')!r}, not 4 "
                            "(the kit puts every knob back)")
        if m.get("left", "x"):
            problems.append(f"left running in the guest{at}: {m.get('left', '(no mark)')}")
    cpus = topomod.parse_topology(req.topology).cpus
    for kind in req.kinds():
        problems += [f"the {kind.name} pass: {p}"
                     for p in check_report(reports.get(kind.name, ""), req, kind, cpus)]
    return problems


def hw_arm(name: str) -> armmod.KitArm:
    return {a.name: a for a in armmod.KIT_ARMS}[name]


def check_report(report: str, req: RehearsalRequest, kind: hw.Pass, cpus: int = 16) -> List[str]:
    """What the rehearsal asks of one pass's (KIND's) report on a guest of
    CPUS CPUs: every arm of the pass in it, every run finished, every
    benchmark's row, every pair compared."""
    problems = []
    if not report:
        problems.append("no report")
        return problems
    for a in [n for n in req.arms if kind.runs(hw_arm(n))]:
        m = re.search(rf"^\| {re.escape(a)} \|.*\| (\d+) of (\d+) \|$", report, re.M)
        if not m:
            problems.append(f"arm {a}: not in the report")
        elif m.group(1) != m.group(2):
            problems.append(f"arm {a}: {m.group(1)} of {m.group(2)} runs finished")
    for b in benchmod.expand(req.bench, cpus):
        if f"| {b} |" not in report:
            problems.append(f"benchmark {b}: no row in the report")
    if "Not compared yet" in report:
        problems.append("a pair was not compared")
    if req.share and f"| {SHARE_METRIC} (" not in report:
        problems.append(f"the lb-share pass's report has no '{SHARE_METRIC}' row")
    return problems


def check_clean(results: Path, req: RehearsalRequest) -> List[str]:
    """The throughput pass's runs (RESULTS/hw-tp-ARM/run-*.json): each with
    the runner's checks before, during and after it, none finding anything."""
    if hw.THROUGHPUT not in req.kinds():
        return []
    problems = []
    for arm in req.arms:
        try:
            runs = resmod.read_runs(results / f"{hw.THROUGHPUT.prefix}-{arm}")
        except LabError:
            problems.append(f"the throughput pass: no runs of {arm}")
            continue
        for r in runs:
            watch = r.watch or []
            bad = resmod.watch_problems(watch)
            if not any(ln.startswith("during ") for ln in watch):
                bad.append("no check during the run")
            problems += [f"the throughput pass: {arm} {r.name()}: {b}" for b in bad]
    return problems


def check_mail(results: Path, req: RehearsalRequest) -> List[str]:
    """Each pass's report.txt: there, under 80 columns, every pair in it,
    the throughput pass's with schbench's percentiles."""
    problems = []
    cpus = topomod.parse_topology(req.topology).cpus
    for kind in req.kinds():
        try:
            text = (results / kind.prefix / reporttext.REPORT).read_text()
        except OSError:
            problems.append(f"the {kind.name} pass: no {reporttext.REPORT}")
            continue
        wide = [n for n, ln in enumerate(text.splitlines(), 1) if len(ln) >= 80]
        if wide:
            problems.append(f"the {kind.name} pass: {reporttext.REPORT} has lines of 80 "
                            f"columns or more (line {wide[0]})")
        if kind.name == hw.THROUGHPUT.name:     # every percentile of schbench's
            problems += [f"the {kind.name} pass: {reporttext.REPORT} has no {b}: {m}"
                         for b in benchmod.expand(req.bench, cpus)
                         if benchmod.needs_schbench([b])
                         for m in SCHBENCH_ROWS if f"{b}: {m} (" not in text]
        ref = req.arms[0]
        arms = [a for a in req.arms[1:] if kind.runs(hw_arm(a))]
        for a in arms:      # a pair is shown one way (significance.one_way())
            if f"{a} against {ref}" not in text and f"{ref} against {a}" not in text:
                problems.append(f"the {kind.name} pass: {reporttext.REPORT} has no "
                                f"{a} against {ref}")
    return problems


@contextmanager
def _work(path: Path) -> Iterator[None]:
    """The host's `hw --report` reads and writes where the guest did."""
    old = os.environ.get("SCHEDLAB_WORK")
    os.environ["SCHEDLAB_WORK"] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SCHEDLAB_WORK", None)
        else:
            os.environ["SCHEDLAB_WORK"] = old


def run(req: RehearsalRequest) -> RehearsalOutcome:
    unknown = set(req.arms) - {a.name for a in armmod.KIT_ARMS}
    if unknown or len(req.arms) < 2:
        raise LabError(f"rehearsal: arms {', '.join(req.arms)}: two or more of "
                       + ", ".join(a.name for a in armmod.KIT_ARMS))
    topo = topomod.parse_topology(req.topology)
    if topo.threads < 2:
        raise LabError(f"rehearsal: {req.topology} has no SMT; the kit refuses such a "
                       "machine (use smt4 or smt8)")
    tree = req.tree.resolve()
    specs = {armmod.KIT: BuildSpec("patched", "icount", kit=True),
             armmod.STOCK: BuildSpec("base", "icount")}
    builds = {k: built(tree, specs[k]) for k in kernels(req)}
    out = folder()
    out.mkdir(parents=True, exist_ok=True)
    bench = None
    if req.bench_dir is not None:
        made = benchmod.from_dir(benchmod.SCHBENCH, req.bench_dir, out / "bench")
        say(f"  rehearsal: schbench {made.line()}")
        bench = made.binary
    guest_work = out / "guest"
    marks: Dict[str, Dict[str, str]] = {}
    seconds = 0.0
    for n, (kernel, build) in enumerate(builds.items()):
        log = out / f"vm-{kernel}.log"
        try:
            res = vm.boot(build.image, topo,
                          guest_script(req, build.build_dir / ".config", guest_work, n == 0,
                                       bench),
                          memory_mib=req.memory, timeout=req.timeout, rwdirs=(out,),
                          icount=True, log=log)
        except LabError as e:       # a timeout or a boot that failed: the log says more
            say(f"  rehearsal: {e}")
            return RehearsalOutcome(False, "", [f"the guest on the {kernel} kernel: {e} "
                                                f"(console: {log})"])
        (out / f"console-{kernel}.txt").write_text(res.output)
        marks[kernel] = parse_marks(res.output)
        seconds += res.seconds
    (out / "marks.json").write_text(json.dumps(marks, indent=1) + "\n")
    reports: Dict[str, str] = {}
    with _work(guest_work):
        try:
            rounds.report_again(plots=True, kinds=req.kinds())
        except LabError as e:
            say(f"  rehearsal: no report ({e})")
        for kind in req.kinds():
            try:
                reports[kind.name] = (guest_work / "results" / kind.prefix
                                      / hwreport.REPORT).read_text()
            except OSError as e:
                say(f"  rehearsal: no report of the {kind.name} pass ({e})")
    problems = check(marks, reports, req) + check_clean(guest_work / "results", req)
    problems += check_mail(guest_work / "results", req)
    probing = hw.PROBE_PASS in req.kinds()
    switch = switch_values(guest_work / "results", req.bench[0]) if probing else {}
    if switch:
        say("  rehearsal: " + SWITCH_METRIC + ": " +
            ", ".join(f"{a} {v:.3f}" for a, v in switch.items()))
    if probing:     # only the probe pass counts idle_cpu() probes
        problems += check_switch(switch, req)
    for p in problems:
        say(f"  rehearsal: {p}")
    return RehearsalOutcome(not problems, "\n".join(reports.values()), problems, seconds)
