"""Paths, command running, output and errors shared by every module."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

from schedlab.core import procs
# Re-exported: the lab's error, and the one process runner's (procs.py).
from schedlab.core.errors import LabError  # noqa: F401
from schedlab.core.procs import Finished, fmt_secs, run_logged  # noqa: F401

PACKAGE = Path(__file__).resolve().parent.parent    # the schedlab package

_repo: Optional[Path] = None


def package_file(rel: str) -> Path:
    """A file shipped in the package (guest scripts, bpftrace programs, configs)."""
    p = PACKAGE / rel
    if not p.exists():
        raise LabError(f"the schedlab package has no {rel} (broken install?)")
    return p


def set_repo(path: Optional[Path]) -> None:
    """The project checkout given on the command line (--repo DIR)."""
    global _repo
    _repo = Path(path) if path is not None else None


def _is_checkout(d: Path) -> bool:
    return (d / "patches" / "series").is_file()


def repo_dir() -> Path:
    """The project checkout (patches/series, results/, work/): --repo DIR, else
    $SCHEDLAB_REPO, else the current folder or the nearest parent holding
    patches/series."""
    env = os.environ.get("SCHEDLAB_REPO")
    given, what = (_repo, "--repo") if _repo is not None else (
        Path(env) if env else None, "SCHEDLAB_REPO")
    if given is not None:
        d = given.expanduser().resolve()
        if not _is_checkout(d):
            raise LabError(f"{what} {given}: not a schedlab checkout (no patches/series)")
        return d
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if _is_checkout(d):
            return d
    raise LabError(f"no schedlab checkout (a folder with patches/series) at or above "
                   f"{here}: run it in a schedlab checkout or pass --repo DIR")


def work_dir() -> Path:
    """The ignored folder that holds trees, builds and logs of this checkout."""
    env = os.environ.get("SCHEDLAB_WORK")
    return Path(env) if env else repo_dir() / "work"


def cache_dir() -> Path:
    """Per-user cache shared by every checkout: downloads, ccache."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "schedlab"


def log_dir() -> Path:
    d = work_dir() / "logs"
    d.mkdir(parents=True, exist_ok=True)
    return d


def say(msg: str) -> None:
    print(msg, flush=True)


def run(cmd: Sequence[str], *, cwd: Optional[Path] = None,
        env: Optional[Mapping[str, str]] = None, check: bool = True, capture: bool = False,
        log: Optional[Path] = None, input: Optional[str] = None,
        timeout: Optional[float] = None) -> Finished:
    """procs.run() with env added to this process's environment; with log= the
    output goes to that file (appended).  check: a failure is a LabError."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return procs.run(cmd, cwd=cwd, env=full_env, check=check, capture=capture, log=log,
                     append=True, input=input, timeout=timeout)


def git(tree: Path, *args: str, check: bool = True) -> str:
    return run(["git", "-C", str(tree), *args], capture=True, check=check).stdout.strip()


def run_in_group(cmd: List[str], log: Path, timeout: float, what: str,
                 cwd: Optional[Path] = None, env: Optional[dict] = None) -> int:
    """procs.run() with its output in log (the command line first); returns
    the exit status; a timeout is a LabError naming what and the log."""
    return procs.run(cmd, log=log, timeout=timeout, cwd=cwd, env=env, timeout_error=True,
                     what=what).returncode


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC


def log_says_disk_full(log: Path) -> bool:
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 65536))
            return b"No space left on device" in f.read()
    except OSError:
        return False


def eprint(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def render_table(head: List[str], body: List[List[str]], markdown: bool) -> List[str]:
    """Rows as Markdown or aligned text; the first two columns are labels."""
    if markdown:
        lines = ["| " + " | ".join(head) + " |",
                 "|" + "|".join(["---", "---"] + ["---:"] * (len(head) - 2)) + "|"]
        return lines + ["| " + " | ".join(row) + " |" for row in body]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    fmt_ = "  ".join(f"{{:<{w}}}" if i < 2 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return [fmt_.format(*head)] + [fmt_.format(*row) for row in body]
