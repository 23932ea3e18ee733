"""The config matrix's cells: an arch and Kconfig requests on top of
tinyconfig, as records, and the tiers that pick them (docs/matrix.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from schedlab.core import build as buildmod
from schedlab.core.util import LabError
from schedlab.series import series_check

Options = Tuple[Tuple[str, str], ...]     # (SYMBOL without CONFIG_, "y" or "n"), in order

TIERS = ("default", "full")

# How the series' KUnit option is asked for.
TEST_OPTION = series_check.KUNIT_OPTION[len("CONFIG_"):]
TEST_MODES: Dict[str, Options] = {
    "off": (),
    "direct": (("KUNIT", "y"), (TEST_OPTION, "y")),
    "all-tests": (("KUNIT", "y"), ("KUNIT_ALL_TESTS", "y")),
}
# What a test mode must come out with: KUNIT_ALL_TESTS turns the option on,
# as Documentation/dev-tools/kunit/style.rst asks of a test option.
TEST_EXPECT: Dict[str, Options] = {"all-tests": ((TEST_OPTION, "y"),)}

# The matrix's architectures: the build side (ARCH=, CROSS_COMPILE=) and what
# every cell of it must come out with.  ARCH=i386 and ARCH=x86_64 are two
# karch values of the same source arch; 64BIT follows from them.
ARCHES: Dict[str, buildmod.Arch] = {
    "x86_64": buildmod.Arch("x86_64", "x86_64", "", "tinyconfig", "vmlinux", "vmlinux"),
    "i386": buildmod.Arch("i386", "i386", "", "tinyconfig", "vmlinux", "vmlinux"),
    "ppc64le": buildmod.Arch("ppc64le", "powerpc", buildmod.ARCHES["ppc64le"].cross_compile,
                             "tinyconfig", "vmlinux", "vmlinux"),
}
ARCH_EXPECT: Dict[str, Options] = {
    "x86_64": (("64BIT", "y"),),
    "i386": (("64BIT", "n"),),
    "ppc64le": (("PPC64", "y"), ("CPU_LITTLE_ENDIAN", "y")),
}

_NAME = re.compile(r"[a-z0-9][a-z0-9+-]*")
_SYMBOL = re.compile(r"[A-Z0-9_]+")


@dataclass(frozen=True)
class Cell:
    """One configuration of the matrix (a bad record is a bug: ValueError)."""
    name: str
    arch: str             # a key of ARCHES
    options: Options      # applied in order with scripts/config, before the test mode's
    test: str             # a key of TEST_MODES
    tier: str             # "default" or "full"
    why: str              # one line, for the docs and the report
    expect: Options = ()  # values the final .config must have besides the requests
    link: bool = True     # build vmlinux; False: the config check alone

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"cell name {self.name!r}")
        if self.arch not in ARCHES or self.test not in TEST_MODES or self.tier not in TIERS:
            raise ValueError(f"cell {self.name}: arch {self.arch!r}, test {self.test!r}, "
                             f"tier {self.tier!r}")
        for sym, val in self.options + self.expect:
            if not _SYMBOL.fullmatch(sym) or sym.startswith("CONFIG_") or val not in ("y", "n"):
                raise ValueError(f"cell {self.name}: {sym}={val}")

    @property
    def requests(self) -> Options:
        """Everything scripts/config sets, in order: the options, then the test mode's."""
        return self.options + TEST_MODES[self.test]

    def config_args(self) -> List[str]:
        """scripts/config's arguments for the requests."""
        out: List[str] = []
        for sym, val in self.requests:
            out += ["--enable" if val == "y" else "--disable", sym]
        return out


# ------------------------------------------------------------------ the cells

def _y(*symbols: str) -> Options:
    return tuple((s, "y") for s in symbols)


def _without(options: Options, drop: Sequence[str]) -> Options:
    return tuple(o for o in options if o[0] not in drop)


# NO_HZ_IDLE is a choice member (kernel/time/Kconfig): its sibling is set
# too, so that the choice does not depend on the order of lines in .config.
TICKLESS: Options = (("HZ_PERIODIC", "n"), ("NO_HZ_IDLE", "y"))
PERIODIC: Options = (("NO_HZ_IDLE", "n"), ("HZ_PERIODIC", "y"))

# What the series touches, all on (x86_64; 64BIT comes from ARCH=x86_64).
# NUMA needs only SMP and X86_64: ACPI/AMD NUMA detection is not needed to
# compile it.  DEBUG_KERNEL is selected by EXPERT, which tinyconfig sets.
ALL: Options = (_y("SMP", "SCHED_MC", "NUMA", "NUMA_MIGRATION", "NUMA_BALANCING",
                   "CGROUPS", "CGROUP_SCHED", "FAIR_GROUP_SCHED", "CFS_BANDWIDTH",
                   "SCHED_AUTOGROUP", "SCHED_CORE", "SCHED_CACHE", "JUMP_LABEL")
                + TICKLESS + _y("DEBUG_FS", "DEBUG_KERNEL", "PROVE_LOCKING"))

# The "all minus one" cells: (name after "no-", symbols leaving ALL with it,
# the requests replacing them, expectations, why).
DROPS: Tuple[Tuple[str, Tuple[str, ...], Options, Options, str], ...] = (
    ("sched-mc", ("SCHED_MC",), (("SCHED_MC", "n"),), (),
     "no MC level; x86 lets SCHED_MC be n with SMP (it selects only ARCH_SUPPORTS_SCHED_MC)"),
    ("numa", ("NUMA", "NUMA_MIGRATION", "NUMA_BALANCING"), (("NUMA", "n"),), (),
     "no NUMA: NUMA_MIGRATION and NUMA_BALANCING go with it"),
    ("numa-balancing", ("NUMA_BALANCING",), (("NUMA_BALANCING", "n"),), (),
     "NUMA without the NUMA task counts of the group statistics (fair.c, lb_stats tests)"),
    ("fair-group-sched", ("FAIR_GROUP_SCHED", "CFS_BANDWIDTH", "SCHED_AUTOGROUP"),
     (("FAIR_GROUP_SCHED", "n"),), (),
     "cgroups without task groups of the fair class: the wake suite compiles out; "
     "CFS_BANDWIDTH depends on it and SCHED_AUTOGROUP selects it"),
    ("cfs-bandwidth", ("CFS_BANDWIDTH",), (("CFS_BANDWIDTH", "n"),), (),
     "task groups without bandwidth: the throttled-group tests and cfs_bandwidth_usage_*()"),
    ("sched-autogroup", ("SCHED_AUTOGROUP",), (("SCHED_AUTOGROUP", "n"),), (),
     "no autogroups (the root-task wake case)"),
    ("sched-core", ("SCHED_CORE",), (("SCHED_CORE", "n"),), (),
     "no core scheduling cookies (the wakeup placement must respect them)"),
    ("sched-cache", ("SCHED_CACHE",), (("SCHED_CACHE", "n"),), (),
     "no cache aware balancing (a refusal of the statistics reuse)"),
    ("jump-label", ("JUMP_LABEL",), (("JUMP_LABEL", "n"),), (),
     "sched_feat() and the static keys as plain tests"),
    ("nohz", ("HZ_PERIODIC", "NO_HZ_IDLE"), PERIODIC, (("NO_HZ_COMMON", "n"),),
     "periodic tick: no NO_HZ_COMMON (the nohz balancing code compiles out)"),
    ("prove-locking", ("PROVE_LOCKING",), (("PROVE_LOCKING", "n"),), (),
     "no lockdep annotations' code (raw_spinlock + seqcount of the statistics cache)"),
    ("debug-fs", ("DEBUG_FS",), (("DEBUG_FS", "n"),), (),
     "no debugfs: the newidle_cost_pct knob compiles out"),
)

PPC64LE: Options = (_y("PPC64", "PPC_BOOK3S_64") + (("CPU_BIG_ENDIAN", "n"),)
                    + _y("CPU_LITTLE_ENDIAN", "PPC_PSERIES", "SMP"))


def _cells() -> Tuple[Cell, ...]:
    out = [
        Cell("tiny", "x86_64", (), "off", "full",
             "x86_64 tinyconfig as is: uniprocessor; fair.c has no CONFIG_SMP block, so "
             "all of the series' fair.c code compiles"),
        Cell("tiny-smp-kunit", "x86_64", _y("SMP"), "direct", "full",
             "the smallest cell with the test option (it depends on KUNIT=y && SMP)"),
        Cell("all-tests-turns-option-on", "x86_64", _y("SMP"), "all-tests", "default",
             "KUNIT_ALL_TESTS turns the option on (style.rst; fair.c's code does not "
             "change with it): the config alone", link=False),
        Cell("fgs-no-cfs-bandwidth+all-tests", "x86_64",
             _y("SMP", "CGROUPS", "CGROUP_SCHED", "FAIR_GROUP_SCHED") + (("CFS_BANDWIDTH", "n"),),
             "all-tests", "default",
             "what the 0-day robot builds: task groups without bandwidth, every KUnit "
             "suite on"),
        Cell("all", "x86_64", ALL, "direct", "full",
             "everything the series touches, on", expect=(("NO_HZ_COMMON", "y"),)),
    ]
    # Each drop with the option set directly, then with KUNIT_ALL_TESTS as
    # well: consecutive, so that the second rebuilds only the other suites.
    for short, gone, instead, expect, why in DROPS:
        for test, suffix in (("direct", ""), ("all-tests", "+all-tests")):
            out.append(Cell(f"no-{short}{suffix}", "x86_64", _without(ALL, gone) + instead,
                            test, "full", why, expect))
    out += [
        Cell("rt", "x86_64", _without(ALL, ("NUMA_BALANCING",))
             + (("NUMA_BALANCING", "n"),) + _y("EXPERT", "PREEMPT_RT"), "direct", "full",
             "PREEMPT_RT (NUMA_BALANCING depends on !PREEMPT_RT): sleeping spinlocks "
             "around the statistics cache"),
        Cell("i386", "i386", _without(ALL, ("NUMA", "NUMA_MIGRATION", "NUMA_BALANCING")),
             "direct", "full", "32-bit: NUMA is x86_64 only"),
        Cell("ppc64le-nosmt", "ppc64le", PPC64LE + (("SCHED_SMT", "n"),), "direct", "full",
             "SMP without SCHED_SMT, impossible on x86 (SMP selects SCHED_SMT there)"),
        Cell("ppc64le-all", "ppc64le", PPC64LE + _y("SCHED_SMT") + _without(ALL, ("SMP",)),
             "direct", "full", "POWER's SMT4/SMT8 machines, everything on"),
    ]
    return tuple(out)


CELLS: Dict[str, Cell] = {c.name: c for c in _cells()}
BISECT_CELLS = ("tiny", "fgs-no-cfs-bandwidth+all-tests")
SPARSE_CELL = "all"
SPARSE_TOO_OLD = ("not run: the tree's scripts/checker-valid.sh refuses this sparse (7.3 needs "
                  "__typeof_unqual__, newer than sparse 0.6.4, Debian's); make C=2 would "
                  "check nothing")
SPARSE_HINT = ("sparse is not installed: './schedlab setup' installs it (Debian package "
               "sparse), or as root: apt-get install sparse")


def parse_cells(text: str) -> List[str]:
    """Cell names, comma-separated; an unknown one is refused naming the known ones."""
    names = [n.strip() for n in text.split(",")]
    for name in names:
        if name not in CELLS:
            raise LabError(f"unknown cell {name!r}; known: {', '.join(CELLS)}")
    return names


def cells_for(tier: str, names: Optional[Sequence[str]] = None) -> List[Cell]:
    """The cells a run builds, grouped by arch (one build folder each), table order
    inside: the named ones, else the tier's (full: every cell)."""
    if tier not in TIERS:
        raise LabError(f"unknown tier {tier!r}; known: {', '.join(TIERS)}")
    if names:
        chosen = [CELLS[n] for n in parse_cells(",".join(names))]
    else:
        chosen = [c for c in CELLS.values() if tier == "full" or c.tier == tier]
    arches, table = list(ARCHES), list(CELLS)
    return sorted(dict.fromkeys(chosen),
                  key=lambda c: (arches.index(c.arch), table.index(c.name)))
