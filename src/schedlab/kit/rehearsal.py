"""The hardware kit's rehearsal: `./schedlab hw` inside an SMT guest.

Detail: docs/modules.md, section kit/rehearsal.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
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
from schedlab.kit import hw, hwreport, powerguest, reporttext, rounds
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
    arch: str = "x86_64"        # or ppc64le: the pseries guest (powerguest.py)
    # The pseries guest's SMT modes, swept on each boot (ppc64_cpu --smt=M),
    # each under --label smtM; () for none (the guest's own, unlabelled).
    smt_modes: Tuple[int, ...] = ()

    def labels(self) -> Tuple[str, ...]:
        """The kit's labels, one run of the kit each, in the order they run."""
        return tuple(f"smt{m}" for m in self.smt_modes) or ("",)

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


def smt_modes(given: Optional[str], arch: str, topology: str) -> Tuple[int, ...]:
    """--smt-modes (comma-separated), or on ppc64le the topology's threads a
    core halved down to 2; refused before any build."""
    topo = topomod.parse_topology(topology)
    if arch != "ppc64le":
        if given:
            raise LabError("hw --smt-modes: the SMT modes are swept in the pseries guest "
                           "(--arch ppc64le)")
        return ()
    if given is None:
        modes, m = [], topo.threads
        while m >= 2:
            modes.append(m)
            m //= 2
        return tuple(modes)
    try:
        modes = [int(x) for x in given.split(",")]
    except ValueError:
        raise LabError(f"hw --smt-modes {given!r}: comma-separated numbers (8,4,2)") from None
    wrong = powerguest.modes_valid(modes, topo.threads)
    if wrong:
        raise LabError(f"hw --smt-modes {given}: " + "; ".join(wrong))
    return tuple(modes)


def folder(arch: str = "x86_64") -> Path:
    return work_dir() / ("hw-rehearsal" + ("" if arch == "x86_64" else f"-{arch}"))


@dataclass(frozen=True)
class GuestPaths:
    """Where the guest finds the lab, its Python, the kernel's config, and
    keeps the kit's work folder."""
    lab: str
    python: str
    work: str
    config: str


def guest_script(req: RehearsalRequest, paths: GuestPaths, fresh: bool = True,
                 bench: Optional[str] = None) -> str:
    """What the guest runs: the kit as a user runs it, once a label (the
    SMT mode set first), then what is left; BENCH: schbench built on the host."""
    # --fresh in the first boot: the guest's results folder is the host's,
    # kept between rehearsals; each rehearsal measures everything again.  The
    # second boot (the stock kernel) goes on with the same command.
    cmd = [paths.python, "-m", "schedlab", "hw", "--rounds", str(req.rounds),
           "--max-rounds", str(req.rounds),
           "--runs", str(req.runs), "--seconds", str(req.seconds),
           "--bench", ",".join(req.bench), "--no-plots"] + (["--fresh"] if fresh else []) + (
               ["--c2c"] if req.c2c else []) + (["--lb-share"] if req.share else []) + (
               ["--seed", str(req.seed)] if req.seed is not None else []) + (
               ["--pass", req.pass_name] if req.pass_name else []) + (
               ["--bench-dir", bench] if bench else [])
    for a in req.arms:
        cmd += ["--arm", a]
    left = "|".join(LEFTOVERS)
    steps = [f"cd {shlex.quote(paths.lab)}",
             f"export SCHEDLAB_WORK={shlex.quote(paths.work)} PYTHONPATH=src "
             f"SCHEDLAB_KERNEL_CONFIG={shlex.quote(paths.config)} {armmod.REHEARSAL_ENV}=1"]
    runs = []
    for mode, label in zip(req.smt_modes or (0,), req.labels()):
        at = f"{label}." if label else ""
        # Everything after the kit runs whatever the kit did.
        runs.append("{ " + (f"{powerguest.smt_command(mode)} && " if mode else "")
                    + shlex.join(cmd + (["--label", label] if label else []))
                    + f"; echo {MARK} {at}hw-rc=$?; "
                    f"echo {MARK} {at}swb_state=$(cat /sys/kernel/debug/sched/swb_state 2>&1); "
                    + (f"echo {MARK} {at}online=$(cat /sys/devices/system/cpu/online); "
                       if mode else "") +
                    f"echo {MARK} {at}left=$(pgrep -f -d, '{left}' || true); }}")
    return " && ".join(steps) + " && " + "; ".join(runs)


def parse_marks(output: str) -> Dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(rf"{MARK} (\S+?)=(\S*)", output)}


def switch_values(results: Path, bench: str, label: str = "") -> Dict[str, float]:
    """SWITCH_METRIC per arm of SWITCH_PAIR, from the probe pass's runs the
    guest left in RESULTS under LABEL (hw[@LABEL]-ARM/run-BENCH-*.json; the
    mean over the runs found)."""
    out = {}
    prefix = hw.PROBE_PASS.labelled(label).prefix
    for arm in SWITCH_PAIR:
        try:
            runs = resmod.read_runs(results / f"{prefix}-{arm}")
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


def online_count(cpus: str) -> int:
    """The CPUs of a sysfs list ("0-3,8-11": 8); 0 for none or garbage."""
    n = 0
    for part in filter(None, cpus.split(",")):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return 0
        n += int(hi or lo) - int(lo) + 1
    return n


def passes(req: RehearsalRequest) -> List[Tuple[hw.Pass, int]]:
    """Each pass of each label, with the CPUs online while it ran."""
    topo = topomod.parse_topology(req.topology)
    return [(kind.labelled(label), topo.cpus * mode // topo.threads if mode else topo.cpus)
            for mode, label in zip(req.smt_modes or (0,), req.labels())
            for kind in req.kinds()]


def check(marks: Dict[str, Dict[str, str]], reports: Dict[str, str],
          req: RehearsalRequest) -> List[str]:
    """What the rehearsal asks of each boot's marks (MARKS by kernel, each
    label's run of the kit) and of each pass's report (REPORTS by folder)."""
    problems = []
    boots = kernels(req)
    online = {k.label: n for k, n in passes(req)}
    for n, kernel in enumerate(boots):
        for label in req.labels():
            m = {k[len(label) + 1:] if label else k: v
                 for k, v in marks.get(kernel, {}).items()
                 if (k.startswith(label + ".") if label else "." not in k)}
            # The kit's kernel, with the stock kernel's arm still to run, says so.
            want = str(rounds.OTHER_KERNEL) if n < len(boots) - 1 else "0"
            at = (f" on the {kernel} kernel" if len(boots) > 1 else "") + (
                f" ({label})" if label else "")
            if m.get("hw-rc") != want:
                problems.append(f"the kit exited{at} with status "
                                f"{m.get('hw-rc', 'none (no mark)')}, not {want}")
            if kernel == armmod.KIT and m.get("swb_state") != "4":
                problems.append(f"swb_state after the kit{at}: {m.get('swb_state')!r}, not 4 "
                                "(the kit puts every knob back)")
            if m.get("left", "x"):
                problems.append(f"left running in the guest{at}: {m.get('left', '(no mark)')}")
            if label and online_count(m.get("online", "")) != online[label]:
                problems.append(f"CPUs online{at}: {m.get('online') or '(no mark)'}, not "
                                f"{online[label]} (the SMT mode did not take)")
    for kind, cpus in passes(req):
        problems += [f"the {kind.title} pass: {p}"
                     for p in check_report(reports.get(kind.prefix, ""), req, kind, cpus)]
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
    """The throughput pass's runs (RESULTS/hw-tp-ARM/run-*.json, a folder
    each label): each with the runner's checks before, during and after
    it, none finding anything."""
    problems = []
    for kind, _ in passes(req):
        if kind.name != hw.THROUGHPUT.name:
            continue
        for arm in req.arms:
            try:
                runs = resmod.read_runs(results / f"{kind.prefix}-{arm}")
            except LabError:
                problems.append(f"the {kind.title} pass: no runs of {arm}")
                continue
            for r in runs:
                watch = r.watch or []
                bad = resmod.watch_problems(watch)
                if not any(ln.startswith("during ") for ln in watch):
                    bad.append("no check during the run")
                problems += [f"the {kind.title} pass: {arm} {r.name()}: {b}" for b in bad]
    return problems


def check_mail(results: Path, req: RehearsalRequest) -> List[str]:
    """Each pass's report.txt: there, under 80 columns, every pair in it,
    the throughput pass's with schbench's percentiles."""
    problems = []
    for kind, cpus in passes(req):
        what = f"the {kind.title} pass"
        try:
            text = (results / kind.prefix / reporttext.REPORT).read_text()
        except OSError:
            problems.append(f"{what}: no {reporttext.REPORT}")
            continue
        wide = [n for n, ln in enumerate(text.splitlines(), 1) if len(ln) >= 80]
        if wide:
            problems.append(f"{what}: {reporttext.REPORT} has lines of 80 "
                            f"columns or more (line {wide[0]})")
        if kind.name == hw.THROUGHPUT.name:     # every percentile of schbench's
            problems += [f"{what}: {reporttext.REPORT} has no {b}: {m}"
                         for b in benchmod.expand(req.bench, cpus)
                         if benchmod.needs_schbench([b])
                         for m in SCHBENCH_ROWS if f"{b}: {m} (" not in text]
        if kind.name == hw.PROBE_PASS.name and all(
                a in req.arms for a, _ in reporttext.MODEL_ARMS) and (
                "cost model of" not in text or "    model, " not in text):
            problems.append(f"{what}: {reporttext.REPORT} has no cost model's prediction "
                            "beside funclatency")
        ref = req.arms[0]
        arms = [a for a in req.arms[1:] if kind.runs(hw_arm(a))]
        for a in arms:      # a pair is shown one way (significance.one_way())
            if f"{a} against {ref}" not in text and f"{ref} against {a}" not in text:
                problems.append(f"{what}: {reporttext.REPORT} has no {a} against {ref}")
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
    power = req.arch == "ppc64le"
    if power:
        wrong = powerguest.modes_valid(req.smt_modes, topo.threads)
        if req.bench_dir is not None or benchmod.needs_schbench(
                benchmod.expand(req.bench, topo.cpus)):
            wrong.append("schbench is not built for the pseries guest here (a ppc64el "
                         "cross build): leave it out of --bench, without --bench-dir")
        if wrong:
            raise LabError("rehearsal: " + "; ".join(wrong))
    elif req.smt_modes:
        raise LabError("rehearsal: SMT modes are swept in the pseries guest (--arch ppc64le)")
    root = None
    if power:   # the ppc64el packages fetched (or found) before the builds
        root = powerguest.userspace(folder(req.arch) / "userspace.log")
    tree = req.tree.resolve()
    config = "probe" if power else "icount"
    specs = {armmod.KIT: BuildSpec("patched", config, arch=req.arch, kit=True),
             armmod.STOCK: BuildSpec("base", config, arch=req.arch)}
    builds = {k: built(tree, specs[k]) for k in kernels(req)}
    out = folder(req.arch)
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
        config_file = build.build_dir / ".config"
        try:
            if root is not None:
                boot = powerguest.Boot(
                    build.image, config_file,
                    guest_script(req, GuestPaths("/" + powerguest.LAB, "python3",
                                                 "/" + powerguest.WORK, "/" + powerguest.CONFIG),
                                 n == 0, "/" + powerguest.BENCH if bench else None),
                    work=guest_work if n else None, bench=bench)
                res = powerguest.run_boot(boot, root, topo, log, guest_work, req.timeout)
            else:
                res = vm.boot(build.image, topo,
                              # the guest has the host's files: this Python
                              guest_script(req, GuestPaths(str(repo_dir()), sys.executable,
                                                           str(guest_work), str(config_file)),
                                           n == 0, str(bench) if bench else None),
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
        for label in req.labels():
            try:
                rounds.report_again(plots=True,
                                    kinds=[k.labelled(label) for k in req.kinds()])
            except LabError as e:
                say(f"  rehearsal: no report{f' ({label})' if label else ''} ({e})")
        for kind, _ in passes(req):
            try:
                reports[kind.prefix] = (guest_work / "results" / kind.prefix
                                        / hwreport.REPORT).read_text()
            except OSError as e:
                say(f"  rehearsal: no report of the {kind.title} pass ({e})")
    problems = check(marks, reports, req) + check_clean(guest_work / "results", req)
    problems += check_mail(guest_work / "results", req)
    if hw.PROBE_PASS in req.kinds():     # only the probe pass counts idle_cpu() probes
        for label in req.labels():
            switch = switch_values(guest_work / "results", req.bench[0], label)
            at = f" ({label})" if label else ""
            if switch:
                say(f"  rehearsal{at}: " + SWITCH_METRIC + ": " +
                    ", ".join(f"{a} {v:.3f}" for a, v in switch.items()))
            problems += [p + at for p in check_switch(switch, req)]
    for p in problems:
        say(f"  rehearsal: {p}")
    return RehearsalOutcome(not problems, "\n".join(reports.values()), problems, seconds)
