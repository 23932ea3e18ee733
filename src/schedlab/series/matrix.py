"""The config matrix: the series built in the configs a 0-day robot would try.

A cell (a record) is an arch and Kconfig requests on top of tinyconfig,
read back before its vmlinux build; the cells of an arch share one build
folder.  The full tier adds a bisection of the series and a sparse diff.
Steps and costs: docs/matrix.md.
"""

from __future__ import annotations

import collections
import re
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from schedlab.core import build as buildmod
from schedlab.core import procs
from schedlab.core.source import Tree
from schedlab.core.util import LabError, fmt_secs, git, log_dir, log_says_disk_full
from schedlab.core.util import run as run_cmd
from schedlab.core.util import say, work_dir
from schedlab.series import patchset, series_check

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


# ------------------------------------------------------------------ results

@dataclass(frozen=True)
class CellResult:
    cell: str             # the cell's name (or what was checked: "sparse kernel/sched/ (all)")
    commit: str
    outcome: str          # "passed", "failed" or "skipped" (sparse the tree refuses)
    seconds: float
    problem: str = ""     # why it failed: Kconfig's changes, the first error lines
    kind: str = "cell"    # "cell" (at the tip), "bisect" or "sparse"
    subject: str = ""     # the commit's subject (bisection lines)
    log: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    @property
    def failed(self) -> bool:
        return self.outcome == "failed"


def check_config(cell: Cell, final: Dict[str, str], skip: Sequence[str] = ()) -> List[str]:
    """What the final .config (build.parse_config's dict) says against the
    cell: each request Kconfig did not keep and each expectation not met.
    skip: symbols not checked (absent from the tree at that commit)."""
    problems = []
    wanted: Dict[str, str] = {}
    for sym, val in cell.requests:
        wanted[sym] = val                       # a later request wins, as in scripts/config
    for sym, val in wanted.items():
        got = final.get("CONFIG_" + sym, "n")
        if sym not in skip and got != val:
            problems.append(f"CONFIG_{sym}={val} requested, got {got}")
    for sym, val in cell.expect + ARCH_EXPECT[cell.arch] + TEST_EXPECT.get(cell.test, ()):
        got = final.get("CONFIG_" + sym, "n")
        if sym not in skip and got != val:
            problems.append(f"CONFIG_{sym}={val} expected, got {got}")
    return problems


_ERROR = re.compile(r"undefined reference to|\berror:|multiple definition of")


def first_errors(text: str, limit: int = 6) -> str:
    """The first error lines of a make output (linker and compiler errors),
    else make's own '***' lines, else the last lines."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    errors = [ln for ln in lines if _ERROR.search(ln)]
    if not errors:
        errors = [ln for ln in lines if "***" in ln] or [ln for ln in lines if ln][-limit:]
    return "\n".join(errors[:limit])


# ------------------------------------------------------------------ building

def build_dir(tree: Tree, arch: str) -> Path:
    return work_dir() / "build" / tree.key / f"matrix-{arch}"


def cell_log(cell: Cell) -> Path:
    return log_dir() / f"matrix-{cell.name}.log"


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _read_from(path: Path, mark: int) -> str:
    with open(path, errors="replace") as f:
        f.seek(mark)
        return f.read()


def _missing_compiler(arch: buildmod.Arch) -> str:
    if arch.cross_compile and not shutil.which(arch.cross_compile + "gcc"):
        return (f"{arch.cross_compile}gcc not found (Debian package "
                f"gcc-{arch.cross_compile.rstrip('-')})")
    return ""


def configure(tree: Tree, cell: Cell, bdir: Path, log: Path, lenient: bool = False) -> List[str]:
    """tinyconfig, the cell's requests, olddefconfig; returns the config's problems
    (check_config).  lenient: symbols the tree does not define are not checked
    (the base has no test option)."""
    arch = ARCHES[cell.arch]
    make = buildmod.make_args(arch, bdir)
    bdir.mkdir(parents=True, exist_ok=True)
    buildmod.run_make(make + ["tinyconfig"], tree.path, log, f"{cell.name}: tinyconfig",
                      quiet=True)
    if cell.requests:
        run_cmd([str(tree.path / "scripts" / "config"), "--file", str(bdir / ".config"),
                 *cell.config_args()], cwd=tree.path, log=log)
    buildmod.run_make(make + ["olddefconfig"], tree.path, log, f"{cell.name}: olddefconfig",
                      quiet=True)
    final = buildmod.parse_config((bdir / ".config").read_text(errors="replace"))
    skip: List[str] = []
    if lenient:
        symbols = sorted({"CONFIG_" + s for s, _ in cell.requests + cell.expect})
        known = buildmod.known_symbols(tree.path, symbols)
        skip = [s[len("CONFIG_"):] for s in symbols if s not in known]
        if skip:
            say(f"  {cell.name}: not in this tree, not checked: {', '.join(skip)}")
    return check_config(cell, final, skip)


def run_cell(tree: Tree, cell: Cell, commit: str, log: Optional[Path] = None) -> CellResult:
    """Check out COMMIT, configure the cell in its arch's folder, build vmlinux.
    The caller holds the tree's lock.  log: appended to (default: the cell's
    own log, started afresh)."""
    arch = ARCHES[cell.arch]
    if log is None:
        log = cell_log(cell)
        log.write_text("")
    start = time.monotonic()

    def result(outcome: str, problem: str = "") -> CellResult:
        return CellResult(cell.name, commit, outcome, time.monotonic() - start, problem,
                          log=str(log))
    missing = _missing_compiler(arch)
    if missing:
        return result("failed", missing)
    bdir = build_dir(tree, cell.arch)
    say(f"  [{cell.name}] {arch.karch} at {commit[:12]} in {bdir} (log: {log})")
    tree.checkout(commit)
    mark = _size(log)
    try:
        problems = configure(tree, cell, bdir, log)
        if problems:
            return result("failed", "\n".join(problems))
        if not cell.link:
            return result("passed")
        buildmod.run_make(buildmod.make_args(arch, bdir) + ["vmlinux"], tree.path, log,
                          f"{cell.name}: vmlinux")
    except LabError as exc:
        if log_says_disk_full(log):
            raise
        return result("failed", first_errors(_read_from(log, mark)) or str(exc).splitlines()[0])
    return result("passed")


def _run_cells(tree: Tree, cells: Sequence[Cell], commit: str) -> List[CellResult]:
    out = []
    for cell in cells:
        r = run_cell(tree, cell, commit)
        say(f"  [{cell.name}] {r.outcome} in {fmt_secs(r.seconds)}")
        out.append(r)
    return out


# ------------------------------------------------------------------ bisection

def series_commits(tree: Tree, base: str, tip: str) -> List[str]:
    """base..tip, oldest first."""
    return git(tree.path, "rev-list", "--reverse", f"{base}..{tip}").split()


def _bisect(tree: Tree, commits: Sequence[str], cells: Sequence[Cell],
            known: Optional[Dict[Tuple[str, str], CellResult]] = None) -> List[CellResult]:
    subjects = {c: git(tree.path, "log", "-1", "--format=%s", c) for c in commits}
    out = []
    for cell in cells:
        log = log_dir() / f"matrix-bisect-{cell.name}.log"
        log.write_text("")
        for commit in commits:
            r = (known or {}).get((cell.name, commit)) or run_cell(tree, cell, commit, log)
            say(f"  [{cell.name}] {commit[:12]} {subjects[commit]}: {r.outcome}")
            out.append(replace(r, kind="bisect", subject=subjects[commit]))
    return out


def bisect(tree: Tree, commits: Sequence[str], cells: Sequence[Cell],
           known: Optional[Dict[Tuple[str, str], CellResult]] = None) -> List[CellResult]:
    """Build every commit in each cell: cell-major.

    All the bisection's cells are x86_64, so they share one folder.
    Commit-major would switch that folder between a uniprocessor tinyconfig
    and an SMP + KUNIT_ALL_TESTS config at every commit: two rebuilds of
    nearly every object per commit (ccache saves the compiler, not the
    preprocessing, hashing and relinking).  Cell-major changes the config
    once per cell: at the next commit the same steps write the same .config,
    syncconfig touches no symbol, and only what the commit's diff touches
    (kernel/sched/ mostly) is recompiled; going back to the first commit for
    the next cell costs the files the series touches.  known: (cell, commit)
    results already built (the cells at the tip), not built again."""
    with tree.locked("series matrix"):
        return _bisect(tree, commits, cells, known)


# ------------------------------------------------------------------ sparse

_CHECKER = re.compile(r"\b(warning|error):")


def _sparse_diff(tree: Tree, base: str, tip: str) -> CellResult:
    if not shutil.which("sparse"):
        raise LabError(SPARSE_HINT)
    cell = CELLS[SPARSE_CELL]
    arch = ARCHES[cell.arch]
    bdir = build_dir(tree, cell.arch)
    log = log_dir() / "matrix-sparse.log"
    log.write_text("")
    name = f"sparse kernel/sched/ ({cell.name})"
    start = time.monotonic()

    def result(outcome: str, problem: str = "") -> CellResult:
        return CellResult(name, tip, outcome, time.monotonic() - start, problem,
                          kind="sparse", log=str(log))
    # The tree's own test of the checker (7.3 needs __typeof_unqual__,
    # which sparse 0.6.4, Debian's, lacks): without it make C=2 warns and
    # checks nothing, which must not read as "no new warnings".
    checker = tree.path / "scripts" / "checker-valid.sh"
    valid = procs.run([str(checker), "sparse", "-m64"], capture=True).output.strip() \
        if checker.is_file() else "1"
    if valid != "1":
        return result("skipped", SPARSE_TOO_OLD)
    found: Dict[str, collections.Counter] = {}
    for label, commit in (("base", base), ("tip", tip)):
        say(f"  [{name}] at the {label}, {commit[:12]} (log: {log})")
        tree.checkout(commit)
        mark = _size(log)
        try:
            problems = configure(tree, cell, bdir, log, lenient=label == "base")
            if problems:
                return result("failed", f"the {label}'s config: " + "\n".join(problems))
            buildmod.run_make(buildmod.make_args(arch, bdir)
                              + ["C=2", "CHECK=sparse", "kernel/sched/"], tree.path, log,
                              f"sparse kernel/sched/ at the {label}", quiet=True)
        except LabError as exc:
            if log_says_disk_full(log):
                raise
            return result("failed", f"at the {label}:\n"
                          + (first_errors(_read_from(log, mark)) or str(exc).splitlines()[0]))
        text = _read_from(log, mark)
        if "is not available or not up to date" in text:
            return result("skipped", SPARSE_TOO_OLD)
        lines = [ln for ln in text.splitlines() if _CHECKER.search(ln)]
        found[label] = collections.Counter(series_check._normalize_warning(ln) for ln in lines)
    new = sorted((found["tip"] - found["base"]).elements())
    if new:
        return result("failed", f"{len(new)} warning(s) the base does not have:\n"
                      + "\n".join(new))
    return result("passed")


def sparse_diff(tree: Tree, base: str, tip: str) -> CellResult:
    """make C=2 CHECK=sparse kernel/sched/ in the 'all' cell at BASE and at TIP
    (the cell configured at each); fails on warnings the tip has that the base
    has not (lines and columns ignored, each warning counted)."""
    with tree.locked("series matrix"):
        return _sparse_diff(tree, base, tip)


# ------------------------------------------------------------------ the report

def _lines(r: CellResult, label: str, width: int) -> List[str]:
    status = {"passed": "ok", "skipped": "skip"}.get(r.outcome, "FAIL")
    out = [f"  [{status:>4}] {label:<{width}}  {fmt_secs(r.seconds):>7}"]
    if not r.passed:
        problem = r.problem.splitlines()
        out += ["           " + ln.strip() for ln in problem[:8]]
        if len(problem) > 8:
            out.append(f"           ... {len(problem) - 8} more line(s)"
                       + (f" (log: {r.log})" if r.log else ""))
        elif r.log:
            out.append(f"           log: {r.log}")
    return out


def report(results: Sequence[CellResult]) -> Tuple[str, bool]:
    """One line per result with its time, the first error lines of a failure,
    the first failing commit of each bisected cell, the total."""
    lines: List[str] = []
    cells = [r for r in results if r.kind == "cell"]
    if cells:
        commits = sorted({r.commit[:12] for r in cells})
        lines.append(f"config matrix at {', '.join(commits)}:")
        width = max(len(r.cell) for r in cells)
        for r in cells:
            lines += _lines(r, r.cell, width)
    by_cell: Dict[str, List[CellResult]] = {}
    for r in results:
        if r.kind == "bisect":
            by_cell.setdefault(r.cell, []).append(r)
    for cell, rs in by_cell.items():
        first = next((r for r in rs if r.failed), None)
        verdict = (f"first failing commit {first.commit[:12]} ({first.subject})" if first
                   else "every commit builds")
        lines.append(f"bisection in {cell}, {len(rs)} commit(s): {verdict}")
        labels = [f"{r.commit[:12]} {r.subject}"[:72] for r in rs]
        width = max(len(label) for label in labels)
        for r, label in zip(rs, labels):
            lines += _lines(r, label, width)
    for r in results:
        if r.kind == "sparse":
            lines.append("sparse:")
            lines += _lines(r, r.cell, len(r.cell))
    failed = sum(1 for r in results if r.failed)
    skipped = sum(1 for r in results if r.outcome == "skipped")
    total = sum(r.seconds for r in results)
    lines.append(f"matrix: {len(results) - failed - skipped} passed, {failed} failed"
                 + (f", {skipped} skipped" if skipped else "") + f", total {fmt_secs(total)}")
    return "\n".join(lines), failed == 0


# ------------------------------------------------------------------ entry points

def resolve_end(tree: Tree, end: Optional[str]) -> str:
    """The commit to test: END (a commit of the tree), else the series tip."""
    if end is None:
        return patchset.ensure_variant(tree, "posted")
    return patchset.resolve_rev(tree, end)


def run(tree: Tree, tier: str = "default", cells: Optional[Sequence[str]] = None,
        end: Optional[str] = None) -> Tuple[str, bool]:
    """The matrix at END (default the series tip): the tier's cells, or the
    named ones; the full tier adds the bisection of base..END and the sparse
    diff.  Returns report()'s text and verdict."""
    chosen = cells_for(tier, cells)
    if tier == "full" and not shutil.which("sparse"):
        raise LabError(SPARSE_HINT)             # before an hour of builds, not after
    commit = resolve_end(tree, end)             # may apply the series: before the lock
    say(f"  config matrix ({tier} tier): {len(chosen)} cell(s) at {commit[:12]}, build "
        f"folders {work_dir() / 'build' / tree.key}/matrix-<arch>")
    with tree.locked("series matrix"):
        results = _run_cells(tree, chosen, commit)
        if tier == "full":
            known = {(r.cell, r.commit): r for r in results}
            results += _bisect(tree, series_commits(tree, tree.base, commit),
                               [CELLS[n] for n in BISECT_CELLS], known)
            results.append(_sparse_diff(tree, tree.base, commit))
        tree.checkout(commit)
    return report(results)


def stage_body(tier: str) -> Callable[[Dict[str, Any]], bool]:
    """A test stage's body (stages.Stage.run): the matrix on ctx['tree'], the
    report printed; passed when every cell did."""
    if tier not in TIERS:
        raise ValueError(f"tier {tier!r}")

    def body(ctx: Dict[str, Any]) -> bool:
        text, ok = run(ctx["tree"], tier)
        say(text)
        return ok
    return body
