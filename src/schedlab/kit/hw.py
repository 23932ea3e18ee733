"""The hardware kit: `./schedlab hw`, run as root on an SMT machine booted
into a kernel with the series and the measurement series.

This module has the kit's first stage: what it needs of the running kernel,
of the machine and of its tools, checked before anything runs, each missing
piece named with how to add it; and the record of the machine that goes at
the top of the report (lscpu, SMT mode, NUMA, LPAR or firmware, the kernel's
command line and config hash).  On a kernel without the series, or on a
machine without SMT, it refuses with the list of what is missing.

What each check needs is data (KERNEL_NEEDS, CONFIG_NEEDS, TOOLS), so the
rehearsal and the tests see the same list as the machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

from schedlab.core import build as buildmod
from schedlab.core.util import LabError, say, work_dir

DEBUG_SCHED = Path("/sys/kernel/debug/sched")
SMT_ACTIVE = Path("/sys/devices/system/cpu/smt/active")
CPU_DIR = Path("/sys/devices/system/cpu")


@dataclass(frozen=True)
class KernelNeed:
    """A file under /sys/kernel/debug/sched, or a SCHED_FEAT name in its
    features file, that one patch of the series adds."""
    what: str           # "feature" or "knob"
    name: str
    patch: str          # which patch adds it, for the message


KERNEL_NEEDS = (
    KernelNeed("knob", "swb_state", "the kit's switches (patches/kit/: './schedlab build "
               "--host-config' applies them)"),
    KernelNeed("knob", "newidle_cost_pct", "patch 8 (newidle topic)"),
    KernelNeed("feature", "SIS_GROUP_IDLE", "patch 9 (wake topic)"),
    KernelNeed("feature", "SG_STATS_REUSE", "patch 10 (lbstats topic)"),
)

# Config options the kit's probes and switches need: name -> why.
CONFIG_NEEDS: Dict[str, str] = {
    "CONFIG_DEBUG_FS": "the series' knobs and features are in debugfs",
    "CONFIG_SCHEDSTATS": "balance counts by domain (/proc/schedstat)",
    "CONFIG_BPF_SYSCALL": "bpftrace and funclatency",
    "CONFIG_DEBUG_INFO_BTF": "bpftrace's kfunc probes",
    "CONFIG_JUMP_LABEL": "the switches patch kernel text, as distributions build it",
    "CONFIG_SCHED_SMT": "SMT scheduling domains",
}


@dataclass(frozen=True)
class Tool:
    """A tool the benchmark set or the probes run: any of NAMES on PATH."""
    names: tuple
    purpose: str
    how: str            # how to add it (a Debian package, or build steps)
    optional: bool = False   # missing, its benchmark is left out


TOOLS = (
    Tool(("funclatency-bpfcc", "funclatency"),
         "should_we_balance(), sched_balance_rq() and sched_balance_newidle() latency",
         "apt-get install bpfcc-tools (or libbpf-tools)"),
    Tool(("bpftrace",), "call counts and the counting window", "apt-get install bpftrace"),
    Tool(("perf",), "perf stat cycles, perf bench sched, perf c2c",
         "apt-get install linux-perf"),
    Tool(("hackbench",), "hackbench process and thread, pipes and sockets",
         "apt-get install rt-tests"),
    Tool(("tbench", "tbench_srv"), "tbench", "apt-get install dbench"),
    Tool(("stress-ng",), "the busy levels of the should_we_balance() runs",
         "apt-get install stress-ng"),
    Tool(("schbench",), "wakeup latency under load",
         "not packaged: git clone of schbench (kernel.org's mason/schbench), make, "
         "and put schbench on PATH", optional=True),
)


@dataclass(frozen=True)
class Arm:
    """One state of the running kernel the kit measures: the writes under
    /sys/kernel/debug/sched/ that make it, and the piece of the kernel it
    needs (a KernelNeed name; "" for none beyond the series)."""
    name: str
    what: str
    knobs: Tuple[Tuple[str, str], ...] = ()
    needs: str = ""
    before: str = ""    # the arm of the patch before this one: the patch's own effect


# Interleaved in this order, round after round: the reference, its repeat,
# the should_we_balance() topic's states before the series' (the kit's
# swb_state: each patch's function, patches/kit/), then patches 8-10's knobs.
ARMS = (
    Arm("series", "the series, every experimental feature off: the reference",
        before="swb-one-core"),
    Arm("series-again", "the same state again: the A/A margin"),
    Arm("swb-v7.3", "should_we_balance() of v7.3 (swb_state 0)", (("swb_state", "0"),),
        "swb_state"),
    Arm("swb-busy", "should_we_balance() up to 'Skip the should_we_balance() scan on a busy "
        "CPU' (swb_state 1)", (("swb_state", "1"),), "swb_state", "swb-v7.3"),
    Arm("swb-one-cpu", "should_we_balance() up to 'Skip the should_we_balance() probes for a "
        "group of one CPU' (swb_state 2)", (("swb_state", "2"),), "swb_state", "swb-busy"),
    Arm("swb-one-core", "should_we_balance() up to 'Scan for the first idle CPU directly "
        "where cores do not matter' (swb_state 3)", (("swb_state", "3"),), "swb_state", "swb-one-cpu"),
    Arm("newidle-400", "patch 8: newidle_cost_pct=400", (("newidle_cost_pct", "400"),),
        "newidle_cost_pct"),
    Arm("wake-tg", "patch 9: SIS_GROUP_IDLE on", (("features", "SIS_GROUP_IDLE"),),
        "SIS_GROUP_IDLE"),
    Arm("lbstats", "patch 10: SG_STATS_REUSE on", (("features", "SG_STATS_REUSE"),),
        "SG_STATS_REUSE"),
)

# The probes of every run (funclatency of should_we_balance(),
# sched_balance_rq() and sched_balance_newidle() with them; perf stat's
# cycles where the machine counts them), and the prefix of the kit's result
# folders (work/results/hw-ARM/).  perf c2c's modified-line loads only with
# --c2c: its sampling of every CPU's loads, and perf's own thread, change
# what the other numbers measure, so it is a pass of its own.
PROBES = "swb,lb,latency,latency-lb,cycles"
C2C_PROBE = "c2c"
PREFIX = "hw"


def probes(c2c: bool = False) -> str:
    return PROBES + ("," + C2C_PROBE if c2c else "")


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


MAIN = Pass("main", PROBES, PREFIX)
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
PASSES = {p.name: p for p in (MAIN, SHARE)}


def arms_here(present: Sequence[str]) -> Tuple[List[Arm], List[Arm]]:
    """The arms this kernel can run, and those it cannot (what they need is
    not in PRESENT, the names of the KernelNeeds found)."""
    ok = [a for a in ARMS if not a.needs or a.needs in present]
    return ok, [a for a in ARMS if a not in ok]


def estimate(arms: int, rounds: int, runs: int, seconds: int,
             benchmarks: Sequence[str] = BENCHMARKS, probe_list: str = PROBES) -> float:
    """The kit's duration: every arm's plan, every round (measure.py's estimate)."""
    from schedlab.measuring import measure
    from schedlab.measuring import plan as planmod
    plan = planmod.make_plan(",".join(benchmarks), probe_list, runs=runs, seconds=seconds)
    return arms * rounds * measure.estimate_seconds(plan, accel="host")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


@dataclass
class Preflight:
    checks: List[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def missing(self) -> List[Check]:
        return [c for c in self.checks if not c.ok]

    def text(self) -> str:
        lines = []
        for c in self.checks:
            lines.append(f"  [{'ok' if c.ok else 'MISSING'}] {c.name}: {c.detail}")
            if c.fix:
                lines.append(f"      fix: {c.fix}")
        return "\n".join(lines)


# ------------------------------------------------------------------ checks


def config_hash(text: str) -> str:
    """The config's options, sorted, hashed (what the report names the kernel by)."""
    keep = sorted(ln for ln in text.splitlines() if ln.startswith("CONFIG_"))
    return hashlib.sha256("\n".join(keep).encode()).hexdigest()[:12]


def _features(debug_sched: Path) -> Optional[set]:
    """The SCHED_FEAT names in debugfs; None when it is not readable."""
    try:
        return {w.removeprefix("NO_") for w in (debug_sched / "features").read_text().split()}
    except OSError:
        return None


def _has(debug_sched: Path, features: set, need: KernelNeed) -> bool:
    return need.name in features if need.what == "feature" else (debug_sched / need.name).exists()


def kernel_pieces(debug_sched: Path) -> List[str]:
    """The names of the KernelNeeds this kernel has."""
    names = _features(debug_sched) or set()
    return [n.name for n in KERNEL_NEEDS if _has(debug_sched, names, n)]


# Cache aware scheduling (CONFIG_SCHED_CACHE), on by default on machines
# with several LLCs: while it is on, SG_STATS_REUSE keeps and uses no sums.
LLC_BALANCING = Path("llc_balancing") / "enabled"
CPU0_DOMAINS = Path("domains") / "cpu0"
SWITCH_ON = ("1", "Y", "y")         # llc_balancing/enabled's "on"


def _cpu_list(text: str) -> FrozenSet[int]:
    """A kernel CPU list ('0-7,16')."""
    out: Set[int] = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def several_llcs(debug_sched: Path, cpu_dir: Path = CPU_DIR) -> Optional[bool]:
    """Whether cpu0's topmost LLC domain (SD_SHARE_LLC) has a parent: what
    7.3's build_sched_domains() asks (sd_in_multi_llcs()) before cache aware
    scheduling can be active at all, whatever llc_balancing/enabled says.
    debugfs shows the domains only with sched/verbose on (a domain's parent
    is wider: sd_init() sets min_interval to the span's weight); otherwise
    several NUMA nodes, or the cache cpu0's last cache level shares against
    the online CPUs.  None where none of them says."""
    doms = sorted((debug_sched / CPU0_DOMAINS).glob("domain*"),
                  key=lambda p: int(p.name[len("domain"):] or 0))
    try:
        flags = [(d / "flags").read_text().split() for d in doms]
        weights = [int((d / "min_interval").read_text()) for d in doms]
    except (OSError, ValueError):
        doms = []
    if doms:
        llc = [i for i, f in enumerate(flags) if "SD_SHARE_LLC" in f]
        return bool(llc) and any(w > weights[llc[-1]] for w in weights[llc[-1] + 1:])
    try:        # several nodes: one LLC each at least (sub-NUMA clusters too)
        if len(_cpu_list((cpu_dir.parent / "node" / "online").read_text())) > 1:
            return True
    except (OSError, ValueError):
        pass
    caches = sorted((cpu_dir / "cpu0" / "cache").glob("index*"),
                    key=lambda p: int(p.name[len("index"):] or 0))
    try:
        llc_cpus = _cpu_list((caches[-1] / "shared_cpu_list").read_text())
        online = _cpu_list((cpu_dir / "online").read_text())
    except (IndexError, OSError, ValueError):
        return None
    return bool(online - llc_cpus)


def llc_balancing_state(debug_sched: Path,
                        cpu_dir: Path = CPU_DIR) -> Tuple[str, Optional[bool]]:
    """llc_balancing/enabled as written ("" without the switch) and whether
    cache aware scheduling is active: the switch on and several LLCs (None
    where it cannot be told)."""
    try:
        text = (debug_sched / LLC_BALANCING).read_text().strip()
    except OSError:
        return "", None
    if text not in SWITCH_ON:
        return text, False
    return text, several_llcs(debug_sched, cpu_dir)


def check_llc_balancing(debug_sched: Path, cpu_dir: Path = CPU_DIR) -> Optional[Check]:
    """Whether the lbstats arm can measure anything here: a note (never a
    failure) when cache aware scheduling is active, or may be; None where
    the kernel has no such switch."""
    text, active = llc_balancing_state(debug_sched, cpu_dir)
    if not text:
        return None
    where = debug_sched / LLC_BALANCING
    if active is False:
        why = ("with one LLC it is not active (7.3 turns it on only where the LLC domain "
               "has a parent)" if text in SWITCH_ON else "off")
        return Check("cache aware scheduling", True,
                     f"{where} is {text}, {why}: the lbstats arm measures the reuse")
    detail = (f"{where} is {text} and "
              + ("this machine has several LLCs, so cache aware scheduling is active: "
                 if active else "neither debugfs nor sysfs shows whether there are several "
                 "LLCs: if there are, cache aware scheduling is active and ")
              + "SG_STATS_REUSE keeps no sums, the lbstats arm measures the feature's "
              "static branch only")
    return Check("cache aware scheduling", True, detail,
                 f"to measure the reuse, write 0 to {where} before the kit (every arm then "
                 "runs without cache aware scheduling), and say so with the report")


def check_kernel(debug_sched: Path, config_text: str, cpu_dir: Path = CPU_DIR) -> List[Check]:
    """The series in the running kernel, and the options the kit needs."""
    checks = []
    found = _features(debug_sched)
    names = found or set()
    if found is None:
        checks.append(Check("debugfs", False, f"{debug_sched / 'features'} is not readable",
                            "mount -t debugfs none /sys/kernel/debug (as root), on a kernel "
                            "with CONFIG_DEBUG_FS"))
    for need in KERNEL_NEEDS:
        ok = _has(debug_sched, names, need)
        where = f"SCHED_FEAT {need.name}" if need.what == "feature" else f"{debug_sched / need.name}"
        checks.append(Check(f"series: {need.patch}", ok,
                            f"{where} {'present' if ok else 'absent'}",
                            "" if ok else "boot a kernel built with the series "
                            "(patches/series applied to your tree; README, 'Measuring on "
                            "real SMT hardware')"))
    llc = check_llc_balancing(debug_sched, cpu_dir)
    if llc:
        checks.append(llc)
    config = buildmod.parse_config(config_text)
    if not config:
        checks.append(Check("kernel config", False, "neither /proc/config.gz nor "
                            f"/boot/config-{os.uname().release} is readable",
                            "install the config with the kernel (make install does), or "
                            f"name the kernel's .config in ${CONFIG_ENV}"))
    else:
        for opt, why in CONFIG_NEEDS.items():
            ok = config.get(opt) == "y"
            checks.append(Check(f"config {opt}", ok, why if ok else f"not set: {why}",
                                "" if ok else f"rebuild with {opt}=y"))
    return checks


def threads_per_core(cpu_dir: Path = CPU_DIR) -> int:
    most = 1
    for sib in cpu_dir.glob("cpu[0-9]*/topology/thread_siblings_list"):
        try:
            most = max(most, len(_cpu_list(sib.read_text())))
        except (OSError, ValueError):
            continue
    return most


def check_machine(cpu_dir: Path = CPU_DIR, smt_active: Path = SMT_ACTIVE,
                  euid: Optional[int] = None) -> List[Check]:
    root = (os.geteuid() if euid is None else euid) == 0
    checks = [Check("root", root, "BPF programs, debugfs writes and perf need root",
                    "" if root else "run it with sudo")]
    threads = threads_per_core(cpu_dir)
    try:
        active = smt_active.read_text().strip() == "1"
    except OSError:
        active = threads > 1
    ok = threads > 1 and active
    checks.append(Check("SMT", ok, f"{threads} thread(s) per core, SMT "
                        f"{'active' if active else 'inactive'}",
                        "" if ok else "the series is for SMT machines: turn SMT on "
                        "(ppc64_cpu --smt=on on POWER; the firmware or "
                        "/sys/devices/system/cpu/smt/control elsewhere)"))
    return checks


def check_tools(which: Callable[[str], Optional[str]] = shutil.which) -> List[Check]:
    out = []
    for t in TOOLS:
        found = next((n for n in t.names if which(n) or which(f"/usr/sbin/{n}")), None)
        skipped = "" if found or not t.optional else " (optional: not found, left out)"
        out.append(Check(f"tool {t.names[0]}", found is not None or t.optional,
                         f"{found or ' or '.join(t.names)}: {t.purpose}{skipped}",
                         "" if found else t.how))
    return out


# A kernel config to read instead of the running kernel's, where it keeps
# none (/proc/config.gz, /boot/config-*): the rehearsal's guest.
CONFIG_ENV = "SCHEDLAB_KERNEL_CONFIG"


def config_text() -> str:
    given = os.environ.get(CONFIG_ENV)
    if given:
        try:
            return Path(given).read_text(errors="replace")
        except OSError:
            return ""
    return buildmod.running_config_text()


def preflight() -> Preflight:
    return Preflight(check_machine() + check_kernel(DEBUG_SCHED, config_text())
                     + check_tools())


# ------------------------------------------------------------------ the machine


def _cmd(argv: Sequence[str]) -> str:
    if not shutil.which(argv[0]):
        return ""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=30,
                              check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def _llc_record(debug_sched: Path, cpu_dir: Path = CPU_DIR) -> str:
    """The report's value: the switch and whether it is active ("" without it)."""
    text, active = llc_balancing_state(debug_sched, cpu_dir)
    if not text:
        return ""
    if active is None:
        return text + " (several LLCs or not: unknown)"
    if active:
        return text + " (active: several LLCs)"
    return text + (" (not active)" if text in SWITCH_ON else "")


def machine_record() -> dict:
    """What the report says about the machine; what is unreadable is left empty."""
    conf = config_text()
    model = _read("/proc/device-tree/model").strip("\0\n") or " ".join(
        _read(f"/sys/class/dmi/id/{f}").strip() for f in ("sys_vendor", "product_name")).strip()
    return {
        "kernel": os.uname().release,
        "arch": platform.machine(),
        "config_hash": config_hash(conf) if conf else "",
        "cmdline": _read("/proc/cmdline").strip(),
        "lscpu": _cmd(["lscpu"]),
        "threads_per_core": threads_per_core(),
        "smt_mode": _cmd(["ppc64_cpu", "--smt"]).strip(),
        "numa": _cmd(["numactl", "-H"]) or _cmd(["lscpu", "-e=cpu,node,socket,core"]),
        "lpar": _read("/proc/powerpc/lparcfg"),
        "model": model,
        "firmware": _read("/sys/class/dmi/id/bios_version").strip()
        or _read("/proc/device-tree/openprom/model").strip("\0\n"),
        # while it is active, the lbstats arm measures only SG_STATS_REUSE's branch
        "llc_balancing": _llc_record(DEBUG_SCHED),
    }


def plan_text(present: Sequence[str], rounds: int, runs: int, seconds: int,
              names: Optional[Sequence[str]] = None,
              bench: Optional[Sequence[str]] = None, kind: Pass = MAIN) -> str:
    """What `hw --plan` prints: the arms (NAMES only, if given, else KIND's),
    the benchmarks (BENCH, default KIND's), the duration here and, where
    this kernel lacks arms, booted into the series."""
    refuse_unknown(names, bench)
    names = names or default_arms(kind, arms_here(present)[0]) or list(kind.arms)
    bench = list(bench or kind.bench)
    ok, missing = arms_here(present)
    if names:
        ok = [a for a in ok if a.name in names]
        missing = [a for a in missing if a.name in names]
    lines = [] if present else ["this kernel has none of the series' knobs and features: "
                                "booted into the series, the kit would run"]
    lines.append("arms, interleaved in this order every round:")
    lines += [f"  {a.name:14} {a.what}" for a in ok]
    lines += [f"  {a.name:14} NOT HERE: this kernel lacks {a.needs}" for a in missing]
    lines.append("benchmarks: " + ", ".join(bench))
    for n, where in ((len(ok), "here"), (len(ok) + len(missing), "booted into the series")):
        secs = estimate(n, rounds, runs, seconds, bench, kind.probes)
        lines.append(f"{n} arms x {rounds} rounds x {runs} run(s) x {len(bench)} benchmarks, "
                     f"{seconds}s each timed one, {where}: about {secs / 3600:.2f} h")
        if not missing:
            break
    return "\n".join(lines)


def default_arms(kind: Pass, here: Sequence[Arm]) -> Optional[List[str]]:
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
    unknown = [n for n in names or () if n not in {a.name for a in ARMS}]
    if unknown:
        raise LabError(f"hw: unknown arm(s) {', '.join(unknown)}; known: "
                       + ", ".join(a.name for a in ARMS))
    unknown = [b for b in bench or () if b not in BENCHMARKS + ("schbench",)]
    if unknown:
        raise LabError(f"hw: unknown benchmark(s) {', '.join(unknown)}; known: "
                       + ", ".join(BENCHMARKS + ("schbench",)))


def pick(arms: Sequence[Arm], names: Optional[Sequence[str]],
         bench: Optional[Sequence[str]]) -> Tuple[List[Arm], List[str]]:
    """The arms and benchmarks asked for (all by default); unknown names refused."""
    refuse_unknown(names, bench)
    if names:
        missing = [n for n in names if n not in {a.name for a in arms}]
        if missing:
            raise LabError(f"hw: this kernel cannot run the arm(s) {', '.join(missing)}")
        arms = [a for a in arms if a.name in names]
    if len(arms) < 2:
        raise LabError("hw: at least two arms: the reference and one to compare with it")
    return list(arms), list(bench or BENCHMARKS)


def request(arms: Sequence[Arm], rounds: int, runs: int, seconds: int, fresh: bool = False,
            bench: Optional[Sequence[str]] = None, plots: bool = True, swb: bool = False,
            on_start: Optional[Callable[[], None]] = None, c2c: bool = False,
            kind: Pass = MAIN):
    """The kit's runs as an 'ab' request on this machine: every arm once a
    round, rounds for boots, the arms' debugfs writes as knobs; with SWB
    (the kernel has the kit's switch) every arm without a state of its own
    writes the series' state, 4, so that none runs in the state another
    arm left behind."""
    from schedlab.measuring import ab
    from schedlab.measuring import plan as planmod
    bench = list(bench or kind.bench)
    if kind is MAIN and "schbench" not in bench and shutil.which("schbench"):
        bench.append("schbench")
    plan = planmod.make_plan(",".join(bench), kind.probes + ("," + C2C_PROBE if c2c else ""),
                             runs=runs, seconds=seconds,
                             schbench=Path(shutil.which("schbench") or "schbench"))
    return ab.AbRequest(tree=None, plan=plan, topology="host",
                        arms=tuple(ab.Arm(a.name, "host", arm_knobs(a, swb)) for a in arms),
                        prefix=kind.prefix, boots=rounds, fresh=fresh, host=True,
                        timeout=3600, pairs=patch_pairs(arms), plots=plots,
                        on_start=on_start)


SERIES_SWB_STATE = "4"


def arm_knobs(arm: Arm, swb: bool) -> Tuple[Tuple[str, str], ...]:
    if swb and "swb_state" not in dict(arm.knobs):
        return (("swb_state", SERIES_SWB_STATE),) + arm.knobs
    return arm.knobs


def patch_pairs(arms: Sequence[Arm]) -> Tuple[Tuple[str, str], ...]:
    """Each arm against the arm of the patch before it, where both run: the
    should_we_balance() topic patch by patch."""
    names = {a.name for a in arms}
    return tuple((a.before, a.name) for a in arms if a.before in names)


RUN_RECORD = "run.json"


def _arm_states(arms: Sequence[Arm], rounds: int, runs: int, bench: Sequence[str],
                swb: bool = False, kind: Pass = MAIN):
    """The arms as the report shows them: the writes they made (with SWB the
    series' state too), their runs finished of those planned."""
    from schedlab.kit import hwreport
    from schedlab.measuring import results as resmod
    planned = rounds * runs * len(bench)
    return [hwreport.ArmState(a.name, a.what, arm_knobs(a, swb),
                              hwreport.runs_done(resmod.results_dir(f"{kind.prefix}-{a.name}")),
                              planned, a.before) for a in arms]


def report(record: dict, tables: bool = True) -> Path:
    """The report of the run RECORD describes (what run() saved in
    work/hw/run.json, the machine's record with it): the 'ab' tables again
    from the finished runs (TABLES), then work/results/hw/report.md."""
    from schedlab.kit import hwreport
    from schedlab.measuring import ab
    from schedlab.measuring import results as resmod
    byname = {a.name: a for a in ARMS}
    arms = [byname[n] for n in record["arms"] if n in byname]
    bench = record["bench"]
    kind = PASSES.get(record.get("pass", MAIN.name), MAIN)
    if tables:
        try:
            ab.run(request(arms, record["rounds"], record["runs"], record["seconds"],
                           bench=bench, plots=record.get("plots", True),
                           swb=record.get("swb", False), c2c=record.get("c2c", False),
                           kind=kind),
                   tables_only=True)
        except Exception as e:      # noqa: BLE001 - the report lists what finished anyway
            say(f"hw: no tables ({type(e).__name__}: {e}); the report lists what finished")
    machine = record.get("machine") or hwreport.load_json(work_dir() / kind.prefix
                                                          / "machine.json")
    folders = [resmod.results_dir(f"{kind.prefix}-{a.name}") for a in arms]
    path = hwreport.write(resmod.results_dir(kind.prefix), machine,
                          _arm_states(arms, record["rounds"], record["runs"], bench,
                                      record.get("swb", False), kind),
                          record["argv"], record.get("missing", ()),
                          record.get("left_out", ()),
                          {k: record[k] for k in ("rounds", "runs", "seconds")}
                          | {"benchmarks": ", ".join(bench)},
                          hwreport.probes_missing(folders), kind.about,
                          hwreport.run_notes(folders))
    say(f"hw: the report: {path}")
    return path


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


def report_again(plots: bool = True, kind: Pass = MAIN) -> int:
    """`./schedlab hw --report`: the report of KIND's last run, from what
    finished; with PLOTS, whatever the run was told (a rehearsal's guest
    leaves the plots to the host)."""
    from schedlab.kit import hwreport
    path = work_dir() / kind.prefix / RUN_RECORD
    record = hwreport.load_json(path)
    if not record:
        raise LabError(f"hw --report: no run to report on ({path} is written when "
                       f"'./schedlab hw{'' if kind is MAIN else ' --' + kind.name}' starts "
                       "its runs)")
    report(record | {"plots": plots})
    return 0


def run(check_only: bool, rounds: int = 5, runs: int = 1, seconds: int = 30,
        fresh: bool = False, arm_names: Optional[Sequence[str]] = None,
        bench: Optional[Sequence[str]] = None, argv: Sequence[str] = (),
        plots: bool = True, c2c: bool = False, kind: Pass = MAIN) -> int:
    """`./schedlab hw`: the preflight, the machine record, the runs, the report."""
    pf = preflight()
    say("hw: what the kit needs here")
    say(pf.text())
    out = work_dir() / kind.prefix
    out.mkdir(parents=True, exist_ok=True)
    machine = machine_record()
    (out / "machine.json").write_text(json.dumps(machine, indent=1) + "\n")
    (out / "preflight.json").write_text(json.dumps([asdict(c) for c in pf.checks],
                                                   indent=1) + "\n")
    say(f"  the machine's record: {out / 'machine.json'}")
    if not pf.ok:
        names = ", ".join(c.name for c in pf.missing())
        raise LabError(f"hw: cannot measure on this machine as it is: {names} "
                       "(each with its fix above)")
    if check_only:
        say("hw: everything the kit needs is here")
        return 0
    from schedlab.measuring import ab
    from schedlab.measuring import results as resmod
    present = kernel_pieces(DEBUG_SCHED)
    here, cannot = arms_here(present)
    arms, bench = pick(here, arm_names or default_arms(kind, here), bench or kind.bench)
    swb = "swb_state" in present
    record: Dict[str, Any] = {}
    started: List[bool] = []

    def begin() -> None:
        """The request was accepted: this run's record, no earlier tables."""
        (out / RUN_RECORD).write_text(json.dumps(record, indent=1) + "\n")
        _clear_tables(resmod.results_dir(kind.prefix))
        started.append(True)

    req = request(arms, rounds, runs, seconds, fresh, bench, plots, swb, begin, c2c, kind)
    bench = [w.name for w in req.plan.workloads]
    record.update({"argv": list(argv) or ["./schedlab", "hw"], "arms": [a.name for a in arms],
                   "bench": bench, "rounds": rounds, "runs": runs, "seconds": seconds,
                   "plots": plots, "swb": swb, "c2c": c2c, "machine": machine,
                   "pass": kind.name,
                   "missing": [a.name for a in cannot],
                   "left_out": [t.names[0] for t in TOOLS if t.optional
                                and not any(shutil.which(n) for n in t.names)]})
    say(f"hw: arms {', '.join(a.name for a in arms)}; benchmarks {', '.join(bench)}; "
        f"{rounds} round(s)")
    try:
        return ab.run(req)
    finally:
        # Also after Ctrl-C or a failed run, once the runs had started: the
        # report of what finished ('ab' made the tables when all did).
        if started:
            try:
                report(record, tables=False)
            except Exception as e:      # noqa: BLE001 - never hide why the run ended
                say(f"hw: no report ({type(e).__name__}: {e}); './schedlab hw --report"
                    f"{'' if kind is MAIN else ' --' + kind.name}' tries again")
