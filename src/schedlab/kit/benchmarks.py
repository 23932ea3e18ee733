"""The kit's benchmarks: families swept over points picked from the CPU
count, and the benchmarks no distribution packages, built from their
upstream repository at a pinned commit or taken from --bench-dir.

Each point is a workload record (measuring/workloads.py: command, parser,
unit and better direction in its metrics, a run of --seconds); a family
names the points of one sweep.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from schedlab.core.util import LabError, git, log_dir, run, say, work_dir
from schedlab.measuring import workloads as workmod


def doubling(lo: int, hi: int) -> List[int]:
    """LO, 2 LO, 4 LO ... up to the first of them at or above HI."""
    out = [max(1, lo)]
    while out[-1] < hi:
        out.append(out[-1] * 2)
    return out


def hackbench_groups(ncpu: int) -> List[int]:
    """Groups of 40 tasks doubling from one to the first count of at least
    10 tasks per CPU."""
    return doubling(1, max(1, ncpu // 4))


def tbench_clients(ncpu: int) -> List[int]:
    """A quarter of the CPUs, half, all, twice as many."""
    return sorted({max(1, ncpu * k // 4) for k in (1, 2, 4, 8)})


def schbench_workers(ncpu: int) -> List[int]:
    """Workers per message thread (two of them): a quarter of the CPUs in
    all, half, all (schbench's own default; more would measure its locks'
    convoys)."""
    return sorted({max(1, ncpu * k // 8) for k in (1, 2, 4)})


@dataclass(frozen=True)
class Family:
    """A sweep: its name (what --bench takes), what it runs, and its points'
    workload names on a machine of NCPU CPUs."""
    name: str
    what: str
    points: Callable[[int], List[str]]


_MODES = [(m, t) for m in ("process", "thread") for t in ("socket", "pipe")]


def _hackbench(modes: Sequence[Tuple[str, str]]) -> Callable[[int], List[str]]:
    """The points of hackbench in MODES (mode, transport), groups doubling."""
    return lambda n: [f"hackbench-{m}-{t}-g{g}" for m, t in modes for g in hackbench_groups(n)]

FAMILIES: Dict[str, Family] = {f.name: f for f in [
    Family("stress", "stress-ng at 100, 90 and 50% load on every CPU",
           lambda n: ["stress-100", "stress-90", "stress-50"]),
    Family("hackbench", "rt-tests hackbench, processes and threads over sockets and pipes, "
           "groups of 40 tasks doubling from one to at least 10 tasks per CPU",
           _hackbench(_MODES)),
    *[Family(f"hackbench-{m}-{t}", f"rt-tests hackbench, {m}es over {t}s, groups doubling",
             _hackbench([(m, t)])) for m, t in _MODES],
    Family("perf-messaging", "perf bench sched messaging, a group of 40 per 4 CPUs",
           lambda n: [f"perf-messaging-g{max(1, n // 4)}"]),
    Family("perf-pipe", "perf bench sched pipe, two tasks", lambda n: ["perf-pipe-timed"]),
    Family("tbench", "tbench over loopback, a quarter of the CPUs to twice as many clients",
           lambda n: [f"tbench-c{c}" for c in tbench_clients(n)]),
    Family("schbench", "schbench, 2 message threads, a quarter of the CPUs to as many "
           "workers in all: wakeup and request latency percentiles",
           lambda n: [f"schbench-m2-t{w}" for w in schbench_workers(n)]),
]}
# What the throughput pass runs by default; schbench where a binary is found.
THROUGHPUT = ("stress", "hackbench", "perf-messaging", "perf-pipe", "tbench", "schbench")
# What the probe pass runs by default: its numbers are per call, so the
# loads that reach should_we_balance() differently, not every sweep point.
PROBES = ("stress", "perf-messaging")


def expand(names: Sequence[str], ncpu: int) -> List[str]:
    """The workload names of NAMES on NCPU CPUs: a family's points, any
    other name as it is; each once, in order."""
    out: List[str] = []
    for n in names:
        out += FAMILIES[n].points(ncpu) if n in FAMILIES else [n]
    return list(dict.fromkeys(out))


def first_points(points: Sequence[str]) -> List[str]:
    """The first of POINTS of each sweep (a point's name without its count:
    hackbench-process-socket-g1 and -g2 are one sweep, each stress-ng load
    its own): those the kit warms up."""
    seen: Dict[str, str] = {}
    for p in points:
        seen.setdefault(re.sub(r"-[gct]\d+$", "", p), p)
    return list(seen.values())


def _resolved(name: str) -> str:
    """"" where NAME is a family or a workload the lab knows (a sweep point
    of any count), else why not."""
    if name in FAMILIES:
        return ""
    try:
        workmod.workload(name, Path(workmod.SCHBENCH))
    except LabError as e:
        return str(e) or "unknown"
    return ""


def known(name: str) -> bool:
    """A family, or a workload the lab knows (a sweep point of any count)."""
    return not _resolved(name)


def refusal(name: str) -> str:
    """Why the lab refuses NAME as a workload it otherwise knows the form of
    (a count of 0), or "" (a family, a known workload, or not one at all)."""
    why = _resolved(name)
    return "" if "unknown workload" in why else why


def needs_schbench(names: Sequence[str]) -> bool:
    return any(n.startswith(workmod.SCHBENCH) for n in names)


@dataclass(frozen=True)
class Upstream:
    """A benchmark no distribution packages: its repository, the commit the
    kit's numbers are taken with, how to build it and the binary."""
    name: str
    url: str
    commit: str
    build: Tuple[str, ...]
    binary: str


SCHBENCH = Upstream("schbench", "https://github.com/masoncl/schbench.git",
                    "24e32b8ef67cbafb0761aed68747d90a291767ae", ("make",), "schbench")


@dataclass(frozen=True)
class Built:
    """A benchmark ready to run: its binary, where its sources came from,
    their commit ("" where not a git checkout) and whether that is the
    pinned one."""
    binary: Path
    source: str
    commit: str
    pinned: bool

    def line(self) -> str:
        at = f" at {self.commit[:12]}" if self.commit else " (not a git checkout)"
        return f"{self.binary} from {self.source}{at}" + (
            "" if self.pinned else ", not the kit's pinned commit")


def bench_root() -> Path:
    return work_dir() / "bench"


def _build(up: Upstream, tree: Path, log: Path) -> Path:
    if run(list(up.build), cwd=tree, log=log, check=False).returncode != 0:
        raise LabError(f"{up.name}: the build failed in {tree} (log: {log})")
    binary = tree / up.binary
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise LabError(f"{up.name}: the build made no {up.binary} in {tree} (log: {log})")
    return binary


def pinned_binary(up: Upstream, root: Optional[Path] = None) -> Path:
    """Where UP's binary at its pinned commit is built: ROOT/NAME-COMMIT/."""
    return (root or bench_root()) / f"{up.name}-{up.commit[:12]}" / up.binary


def fetch_and_build(up: Upstream, root: Optional[Path] = None) -> Built:
    """UP cloned at its pinned commit into ROOT/NAME-COMMIT and built there;
    a tree built before is taken as it is."""
    dest = pinned_binary(up, root).parent
    if (dest / up.binary).is_file():
        return Built(dest / up.binary, up.url, up.commit, True)
    part = dest.with_name(dest.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    part.parent.mkdir(parents=True, exist_ok=True)
    log = log_dir() / f"bench-{up.name}.log"
    say(f"{up.name}: cloning {up.url} at {up.commit[:12]} (log: {log})")
    if run(["git", "clone", "--quiet", "--no-checkout", up.url, str(part)], log=log,
           check=False).returncode != 0:
        raise LabError(f"{up.name}: cannot clone {up.url} (no network? --bench-dir takes a "
                       f"local copy; log: {log})")
    if run(["git", "-C", str(part), "checkout", "--quiet", "--detach", up.commit], log=log,
           check=False).returncode != 0 or git(part, "rev-parse", "HEAD") != up.commit:
        raise LabError(f"{up.name}: {up.url} has no commit {up.commit} (log: {log})")
    _build(up, part, log)
    part.rename(dest)
    return Built(dest / up.binary, up.url, up.commit, True)


def _built_in_place(up: Upstream, tree: Path) -> bool:
    """TREE's binary is there and newer than every source of it."""
    binary = tree / up.binary
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        return False
    sources = [tree / "Makefile", *tree.glob("*.[ch]")]
    return all(binary.stat().st_mtime >= p.stat().st_mtime for p in sources)


def from_dir(up: Upstream, folder: Path, root: Optional[Path] = None,
             build: bool = True) -> Built:
    """UP from --bench-dir FOLDER: its built binary (FOLDER itself, or
    FOLDER/BINARY), or its sources (FOLDER, or FOLDER/NAME, with a
    Makefile): the binary built there and newer than them, else built in a
    copy under ROOT (FOLDER is left as it is; without BUILD, where it would
    be).  A git checkout's commit is recorded, and whether it is the pinned
    one without changes."""
    if folder.is_file() and os.access(folder, os.X_OK):
        return Built(folder, str(folder), "", False)
    for tree in (folder, folder / up.name):
        binary = tree / up.binary
        if not (tree / "Makefile").is_file():
            if tree == folder and binary.is_file() and os.access(binary, os.X_OK):
                return Built(binary, str(folder), "", False)
            continue
        commit = git(tree, "rev-parse", "HEAD", check=False) if (tree / ".git").exists() else ""
        dirty = bool(commit and git(tree, "status", "--porcelain", "--untracked-files=no",
                                    check=False))
        commit = "" if dirty else commit
        if not _built_in_place(up, tree):
            key = commit or hashlib.sha256(b"".join(
                p.read_bytes() for p in sorted(tree.glob("*.[ch]")))).hexdigest()
            dest = (root or bench_root()) / f"{up.name}-local-{key[:12]}"
            if build and not _built_in_place(up, dest):
                shutil.rmtree(dest, ignore_errors=True)
                shutil.copytree(tree, dest, ignore=shutil.ignore_patterns(up.binary, "*.o"))
                _build(up, dest, log_dir() / f"bench-{up.name}.log")
            binary = dest / up.binary
        return Built(binary, str(tree), commit, commit == up.commit)
    raise LabError(f"--bench-dir {folder}: neither a built {up.binary} nor its sources "
                   f"(a Makefile) in it or in {folder / up.name}")


def find(up: Upstream, bench_dir: Optional[Path], fetch: bool,
         root: Optional[Path] = None, build: bool = True) -> Optional[Built]:
    """UP's binary: from BENCH_DIR if given (without BUILD: where it would
    be built); else built before at its pin; else, with FETCH, fetched and
    built now; else on PATH; else None."""
    if bench_dir is not None:
        return from_dir(up, bench_dir, root, build)
    dest = pinned_binary(up, root)
    if dest.is_file():
        return Built(dest, up.url, up.commit, True)
    if fetch:
        return fetch_and_build(up, root)
    on_path = shutil.which(up.binary)
    return Built(Path(on_path), "PATH", "", False) if on_path else None
