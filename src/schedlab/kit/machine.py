"""What the machine, its kernel and its tools have, checked before the kit
runs (the preflight), and the record of the machine for the report.

What each check needs is data (KERNEL_NEEDS, CONFIG_NEEDS, TOOLS), so the
rehearsal and the tests see the same list as the machine.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

from schedlab.core import build as buildmod
from schedlab.core import hostbuild
from schedlab.kit import benchmarks as benchmod
from schedlab.kit import distro
from schedlab.kit.arms import LLC_ACTIVE, REHEARSAL_ENV
from schedlab.kit.distro import BCC_DIR

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
    """A tool the benchmark set or the probes run: any of NAMES on PATH.
    Its fix: the distribution's packages of ROLES (distro.py), else HOW."""
    names: tuple
    purpose: str
    roles: Tuple[str, ...] = ()
    how: str = ""
    optional: bool = False   # missing, its benchmark is left out


TOOLS = (
    Tool(("funclatency-bpfcc", "funclatency"),
         "should_we_balance(), sched_balance_rq() and sched_balance_newidle() latency",
         ("bcc", "libbpf-tools")),
    Tool(("bpftrace",), "call counts and the counting window", ("bpftrace",)),
    Tool(("perf",), "perf stat cycles, perf bench sched, perf c2c", ("perf",)),
    Tool(("hackbench",), "hackbench process and thread, pipes and sockets", ("hackbench",)),
    Tool(("tbench", "tbench_srv"), "tbench", ("tbench",)),
    Tool(("stress-ng",), "the busy levels of the should_we_balance() runs", ("stress-ng",)),
    Tool(("schbench",), "wakeup latency under load",
         how="not packaged: ./schedlab hw --setup clones and builds it at the kit's commit "
         "(work/bench/), or hw --bench-dir DIR takes a local copy", optional=True),
)


@dataclass
class PreflightCheck:
    name: str
    ok: bool
    detail: str
    fix: str = ""


@dataclass
class Preflight:
    checks: List[PreflightCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def missing(self) -> List[PreflightCheck]:
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


def switches_here(debug_sched: Path) -> List[str]:
    """The kit's switches here: the KernelNeeds this kernel has, and
    arms.LLC_ACTIVE where cache aware scheduling is active."""
    active = llc_balancing_state(debug_sched)[1]
    return kernel_pieces(debug_sched) + ([LLC_ACTIVE] if active else [])


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


def check_llc_balancing(debug_sched: Path, cpu_dir: Path = CPU_DIR) -> Optional[PreflightCheck]:
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
        return PreflightCheck("cache aware scheduling", True,
                              f"{where} is {text}, {why}: the lbstats arm measures the reuse")
    detail = (f"{where} is {text} and "
              + ("this machine has several LLCs, so cache aware scheduling is active: "
                 if active else "neither debugfs nor sysfs shows whether there are several "
                 "LLCs: if there are, cache aware scheduling is active and ")
              + "SG_STATS_REUSE keeps no sums, the lbstats arm measures the feature's "
              "static branch only")
    return PreflightCheck("cache aware scheduling", True, detail + (
        "; the kit's lbstats arm turns it off (0) for its runs, and the llc-off arm, the "
        "series with it off, is lbstats' reference; the other arms run with it on (1)"
        if active else "; if it is, write 0 to it before the kit to measure the reuse"))


# The variant of the stock kernel the lab builds for a machine (build
# --host-config --variant base): the same tree and config, no series.
STOCK_VARIANT = "base"


def running_kernel(present: Sequence[str], identity: Dict[str, str]) -> str:
    """Which of the kit's kernels this is: "kit" (it has the kit's switch),
    "stock" (the lab's build of the tree without the series; in the
    rehearsal's guest, any kernel without the switch), or "" (neither)."""
    if "swb_state" in present:
        return "kit"
    if identity.get("variant") == STOCK_VARIANT or os.environ.get(REHEARSAL_ENV):
        return "stock"
    return ""


def check_kernel(debug_sched: Path, config_text: str,
                 cpu_dir: Path = CPU_DIR, stock: bool = False) -> List[PreflightCheck]:
    """The series in the running kernel (none in the STOCK one: its arm runs
    there, the others after a reboot into the kit's), and the options the
    kit needs."""
    checks = []
    found = _features(debug_sched)
    names = found or set()
    if found is None:
        checks.append(PreflightCheck("debugfs", False,
                                     f"{debug_sched / 'features'} is not readable",
                                     "mount -t debugfs none /sys/kernel/debug (as root), on a "
                                     "kernel with CONFIG_DEBUG_FS"))
    if stock:
        checks.append(PreflightCheck("the stock kernel", True,
                                     f"{os.uname().release}: the tree without the series; its "
                                     "arm runs here, the series' after a reboot into the kit's "
                                     "kernel"))
    for need in KERNEL_NEEDS if not stock else ():
        ok = _has(debug_sched, names, need)
        where = (f"SCHED_FEAT {need.name}" if need.what == "feature"
                 else f"{debug_sched / need.name}")
        checks.append(PreflightCheck(f"series: {need.patch}", ok,
                                     f"{where} {'present' if ok else 'absent'}",
                                     "" if ok else "boot a kernel built with the series "
                                     "(patches/series applied to your tree; README, 'Measuring on "
                                     "real SMT hardware')"))
    llc = check_llc_balancing(debug_sched, cpu_dir)
    if llc:
        checks.append(llc)
    config = buildmod.parse_config(config_text)
    if not config:
        checks.append(PreflightCheck("kernel config", False, "neither /proc/config.gz nor "
                                     f"/boot/config-{os.uname().release} is readable",
                                     "install the config with the kernel (make install does), or "
                                     f"name the kernel's .config in ${CONFIG_ENV}"))
    else:
        for opt, why in CONFIG_NEEDS.items():
            ok = config.get(opt) == "y"
            checks.append(PreflightCheck(f"config {opt}", ok, why if ok else f"not set: {why}",
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
                  euid: Optional[int] = None) -> List[PreflightCheck]:
    root = (os.geteuid() if euid is None else euid) == 0
    checks = [PreflightCheck("root", root, "BPF programs, debugfs writes and perf need root",
                             "" if root else "run it with sudo")]
    threads = threads_per_core(cpu_dir)
    try:
        active = smt_active.read_text().strip() == "1"
    except OSError:
        active = threads > 1
    ok = threads > 1 and active
    checks.append(PreflightCheck("SMT", ok, f"{threads} thread(s) per core, SMT "
                                 f"{'active' if active else 'inactive'}",
                                 "" if ok else "the series is for SMT machines: turn SMT on "
                                 "(ppc64_cpu --smt=on on POWER; the firmware or "
                                 "/sys/devices/system/cpu/smt/control elsewhere)"))
    return checks


# Where a distribution keeps tools off PATH: /usr/sbin, bcc's tools folder
# (Fedora, RHEL: funclatency there is bcc's).
TOOL_DIRS = ("/usr/sbin", BCC_DIR)


def find_tool(names: Sequence[str],
              which: Callable[[str], Optional[str]] = shutil.which) -> Optional[str]:
    """The first of NAMES on PATH or in TOOL_DIRS, as found."""
    for n in names:
        for cand in (n, *(f"{d}/{n}" for d in TOOL_DIRS)):
            if which(cand):
                return cand
    return None


def check_tools(which: Callable[[str], Optional[str]] = shutil.which,
                where: Optional[distro.Distro] = None) -> List[PreflightCheck]:
    """Each tool of TOOLS: found, or its fix on WHERE (default: this
    machine's distribution)."""
    where = where or distro.here()
    out = []
    for t in TOOLS:
        # A benchmark built by the kit (work/bench/NAME-COMMIT/NAME) counts.
        found = find_tool(t.names, which) or next(
            (str(p) for n in t.names for p in sorted(benchmod.bench_root().glob(f"{n}-*/{n}"))),
            None)
        skipped = "" if found or not t.optional else " (optional: not found, left out)"
        out.append(PreflightCheck(f"tool {t.names[0]}", found is not None or t.optional,
                                  f"{found or ' or '.join(t.names)}: {t.purpose}{skipped}",
                                  "" if found else
                                  distro.tool_fix(where, t.roles) if t.roles else t.how))
    return out


def check_perf(run: Callable[[Sequence[str]], Tuple[int, str]]) -> Optional[PreflightCheck]:
    """Whether perf runs on this kernel (Ubuntu's /usr/bin/perf is a wrapper
    that fails on a kernel without its linux-tools package); None without
    perf (check_tools names it)."""
    rc, text = run(["perf", "stat", "-e", "task-clock", "--", "true"])
    if rc == 127:
        return None
    ok = rc == 0 and "task-clock" in text
    why = " ".join(text.split())[:160]
    return PreflightCheck("perf on this kernel", ok,
                          "perf stat runs" if ok else f"perf stat fails here: {why}",
                          "" if ok else "build the perf of the kernel's own tree and put it "
                          "first on PATH: make -C TREE/tools/perf O=/tmp/perf && export "
                          "PATH=/tmp/perf:$PATH")


def _run_text(argv: Sequence[str]) -> Tuple[int, str]:
    """ARGV's exit status and its output and errors (127: not there)."""
    if not shutil.which(argv[0]):
        return 127, ""
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, str(e)
    return p.returncode, p.stdout + p.stderr


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
    return hostbuild.running_config_text()


def preflight() -> Preflight:
    conf = config_text()
    stock = running_kernel(kernel_pieces(DEBUG_SCHED),
                           kernel_identity(os.uname().release, conf)) == "stock"
    perf = check_perf(_run_text)
    return Preflight(check_machine() + check_kernel(DEBUG_SCHED, conf, stock=stock)
                     + check_tools() + ([perf] if perf else []))


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


# A kernel the lab built for a machine: its release ends in the variant and
# the hash of its sources (hostbuild.host_config_edits()), and a '+' that
# scripts/setlocalversion adds for a tree not at a release tag.
_LAB_RELEASE = re.compile(r"-schedlab-(?P<variant>[a-z0-9+_.-]+?)-(?P<sources>[0-9a-f]{8})\+?$")


def kernel_identity(release: str, config: str) -> Dict[str, str]:
    """What tells two kernels apart: the release, the variant and the hash of
    the sources where the lab built it ("" otherwise), the config's hash."""
    m = _LAB_RELEASE.search(release)
    return {"release": release, "variant": m.group("variant") if m else "",
            "sources": m.group("sources") if m else "",
            "config": config_hash(config) if config else ""}


def machine_record() -> dict:
    """What the report says about the machine; what is unreadable is left empty."""
    conf = config_text()
    model = _read("/proc/device-tree/model").strip("\0\n") or " ".join(
        _read(f"/sys/class/dmi/id/{f}").strip() for f in ("sys_vendor", "product_name")).strip()
    return {
        "kernel": os.uname().release,
        "identity": kernel_identity(os.uname().release, conf),
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
