"""The config matrix: the series built in the configs a 0-day robot would try.

Each cell (matrix_cells.py) is configured, read back and its vmlinux
built; the cells of an arch share one build folder.  The full tier adds a
bisection of the series and a sparse diff.
Steps and costs: docs/matrix.md.
"""

from __future__ import annotations

import collections
import re
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from schedlab.core import build as buildmod
from schedlab.core import procs
from schedlab.core.source import Tree
from schedlab.core.util import LabError, fmt_secs, git, log_dir, log_says_disk_full
from schedlab.core.util import run as run_cmd
from schedlab.core.util import say, work_dir
from schedlab.series import patchset, series_check
from schedlab.series.matrix_cells import (ARCH_EXPECT, ARCHES, BISECT_CELLS, CELLS, SPARSE_CELL,
                                          SPARSE_HINT, SPARSE_TOO_OLD, TEST_EXPECT, Cell, cells_for)

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
    (the base, and the commits before the one that adds the test option)."""
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
        symbols = sorted({"CONFIG_" + s for s, _ in cell.requests + cell.expect
                          + TEST_EXPECT.get(cell.test, ())})
        known = buildmod.known_symbols(tree.path, symbols)
        skip = [s[len("CONFIG_"):] for s in symbols if s not in known]
        if skip:
            say(f"  {cell.name}: not in this tree, not checked: {', '.join(skip)}")
    return check_config(cell, final, skip)


def run_cell(tree: Tree, cell: Cell, commit: str, log: Optional[Path] = None,
             lenient: bool = False) -> CellResult:
    """Check out COMMIT, configure the cell in its arch's folder, build vmlinux.
    The caller holds the tree's lock.  log: appended to (default: the cell's
    own log, started afresh); lenient: as configure()'s."""
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
        problems = configure(tree, cell, bdir, log, lenient)
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
            # A commit before the one that adds the test option builds
            # without it: what its tree does not define is not checked.
            r = (known or {}).get((cell.name, commit)) or \
                run_cell(tree, cell, commit, log, lenient=True)
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
