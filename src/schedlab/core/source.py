"""Base tree: Debian's linux-source package, or the user's own kernel git tree.

Detail: docs/modules.md, section core/source.py.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from schedlab.core import aptmirror
from schedlab.core.util import LabError, cache_dir, git, is_disk_full, log_dir, run, say, work_dir

DEBIAN_PACKAGE = "linux-source-7.3"
DEBIAN_SUITE = "trixie-backports"
REF_PREFIX = "refs/worktree/schedlab/"
BASE_DATE = "2026-01-01T00:00:00+0000"


@dataclass
class Tree:
    """A kernel source tree the lab builds from."""

    key: str          # names the tree under work/trees and work/build
    path: Path        # the lab's own work tree
    base: str         # base commit (sha)
    description: str  # what the base is

    def ref(self, variant: str) -> str:
        return REF_PREFIX + variant

    def commit_of(self, variant: str) -> Optional[str]:
        out = git(self.path, "rev-parse", "--verify", "-q", self.ref(variant) + "^{commit}",
                  check=False)
        return out or None

    def content_id(self, commit: str) -> str:
        """The hash of COMMIT's files (its git tree): the same for the same
        sources, whenever and however the patches were applied."""
        return git(self.path, "rev-parse", commit + "^{tree}")

    def set_ref(self, variant: str, commit: str) -> None:
        git(self.path, "update-ref", self.ref(variant), commit)

    @contextmanager
    def locked(self, what: str) -> Iterator[None]:
        """Hold the tree for a checkout and the build that follows it: two lab
        commands never switch the tree under each other's compiler."""
        lock = self.path.with_name(self.path.name + ".lock")
        with open(lock, "w") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                say(f"  waiting for another schedlab command that uses {self.path} ({what})")
                fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def checkout(self, commit: str) -> None:
        """Detached checkout in the lab's own tree (only files that differ change)."""
        if git(self.path, "rev-parse", "HEAD") != commit:
            git(self.path, "checkout", "-q", "--detach", commit)


def trees_dir() -> Path:
    d = work_dir() / "trees"
    d.mkdir(parents=True, exist_ok=True)
    return d


def kernel_release(tree: Path) -> str:
    text = (tree / "Makefile").read_text(errors="replace")
    vals = {}
    for key in ("VERSION", "PATCHLEVEL", "SUBLEVEL", "EXTRAVERSION"):
        m = re.search(rf"^{key}[ \t]*=[ \t]*(\S*)[ \t]*$", text, re.M)
        vals[key] = m.group(1) if m else ""
    rel = f"{vals['VERSION']}.{vals['PATCHLEVEL']}"
    if vals["SUBLEVEL"] not in ("", "0"):
        rel += f".{vals['SUBLEVEL']}"
    return rel + vals["EXTRAVERSION"]


# ---------------------------------------------------------------- Debian base

def _apt_show(opts: list[str], package: str) -> dict:
    proc = run(["apt-cache", *opts, "show", "--no-all-versions", package], capture=True,
               check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise LabError(f"apt has no package {package} in {DEBIAN_SUITE} "
                       f"(apt-cache said: {proc.stderr.strip()[-500:]})")
    fields: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        if ":" in line and not line.startswith(" "):
            k, v = line.split(":", 1)
            fields.setdefault(k.strip(), v.strip())
    return fields


def download_debian_source() -> tuple[Path, str]:
    """Download linux-source into the cache; returns (deb path, package version)."""
    debs = cache_dir() / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    mirror = aptmirror.machine_mirror()
    apt_root = cache_dir() / "apt"
    opts = aptmirror.prepare_private_apt(apt_root, mirror, DEBIAN_SUITE)
    log = log_dir() / "fetch.log"
    say(f"  mirror: the Debian archive source of {mirror.origin}, suite {DEBIAN_SUITE}")
    proc = run(["apt-get", *opts, "update"], log=log, check=False)
    if proc.returncode != 0:
        cached = sorted(debs.glob(f"{DEBIAN_PACKAGE}_*_all.deb"))
        if cached:
            say(f"  apt-get update failed (see {log}); using the cached {cached[-1].name}")
            return cached[-1], cached[-1].name.split("_")[1]
        raise LabError(f"apt-get update of the private {DEBIAN_SUITE} list failed; "
                       f"package {DEBIAN_PACKAGE} could not be fetched (log: {log})")
    info = _apt_show(opts, DEBIAN_PACKAGE)
    version = info["Version"]
    deb = debs / os.path.basename(info["Filename"])
    size = int(info.get("Size", "0"))
    if deb.is_file() and (size == 0 or deb.stat().st_size == size):
        say(f"  {deb.name} already in {debs}")
        return deb, version
    say(f"  downloading {DEBIAN_PACKAGE} {version} ({size // (1 << 20)} MiB) into {debs}")
    proc = run(["apt-get", *opts, "download", f"{DEBIAN_PACKAGE}={version}"], cwd=debs,
               log=log, check=False)
    if proc.returncode != 0 or not deb.is_file():
        raise LabError(f"apt could not download package {DEBIAN_PACKAGE}={version} "
                       f"from {mirror.uris[0]} {DEBIAN_SUITE} (log: {log})")
    return deb, version


UNPACK_PIPELINE = ('set -o pipefail; dpkg-deb --fsys-tarfile "$1" | tar -xO "$2" '
                   '| tar -xJ --strip-components=1 -C "$3"')


def unpack_debian_source(deb: Path, version: str, dest: Path) -> None:
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    say(f"  unpacking {deb.name} into {dest}")
    member = f"./usr/src/{DEBIAN_PACKAGE}.tar.xz"
    try:
        # One pipeline, failing when any part fails: the package's data, its
        # inner tarball, unpacked.
        untar = run(["bash", "-c", UNPACK_PIPELINE, "bash", str(deb), member, str(partial)],
                    capture=True, check=False)
        if untar.returncode != 0:
            err = untar.stderr.strip()[-1000:]
            if "No space left" in err:
                raise LabError(f"disk full while unpacking into {partial}: free space "
                               f"on {partial.parent} and run again")
            raise LabError(f"unpacking {deb} failed: {err}")
        release = kernel_release(partial)
        msg = (f"v{release} as in Debian {DEBIAN_PACKAGE} {version}\n\n"
               f"Unpacked from {deb.name} ({DEBIAN_SUITE}) by schedlab. Debian's\n"
               f"patches are applied; the series must not depend on them.\n")
        log = log_dir() / "fetch.log"
        run(["git", "init", "-q", str(partial)], log=log)
        # Debian's top-level .gitignore ignores everything ("/*"): force.
        git(partial, "add", "-A", "-f")
        # A fixed identity and date make the base commit the same on every
        # machine, so a series' base-commit: names it everywhere.
        env = {"GIT_AUTHOR_NAME": "schedlab", "GIT_AUTHOR_EMAIL": "schedlab@localhost",
               "GIT_COMMITTER_NAME": "schedlab", "GIT_COMMITTER_EMAIL": "schedlab@localhost",
               "GIT_AUTHOR_DATE": BASE_DATE, "GIT_COMMITTER_DATE": BASE_DATE}
        run(["git", "-C", str(partial), "commit", "-q", "--no-verify", "-m", msg], env=env,
            log=log)
        run(["git", "-C", str(partial), "tag", "-a", "-m", msg.splitlines()[0], "base"],
            env=env, log=log)
        partial.rename(dest)
    except OSError as exc:
        if is_disk_full(exc):
            raise LabError(f"disk full while unpacking into {partial}: free space "
                           f"on {partial.parent} and run again") from exc
        raise


def debian_tree() -> Tree:
    dest = trees_dir() / "debian-7.3"
    if not (dest / ".git").is_dir() or not git(dest, "rev-parse", "-q", "--verify",
                                                "base^{commit}", check=False):
        shutil.rmtree(dest, ignore_errors=True)
        deb, version = download_debian_source()
        unpack_debian_source(deb, version, dest)
    base = git(dest, "rev-parse", "base^{commit}")
    desc = git(dest, "log", "-1", "--format=%s", base)
    tree = Tree(key="debian-7.3", path=dest, base=base, description=desc)
    if tree.commit_of("base") != base:
        tree.set_ref("base", base)
    return tree


# ------------------------------------------------------------ the user's tree

def _check_kernel_repo(src: Path) -> Path:
    if not src.is_dir():
        raise LabError(f"--kernel {src}: no such directory")
    top = git(src, "rev-parse", "--show-toplevel", check=False)
    if not top:
        raise LabError(f"--kernel {src}: not a git work tree (a kernel git tree such as a "
                       "tip/sched/core checkout is needed)")
    top_path = Path(top)
    if not (top_path / "kernel/sched/fair.c").is_file() or not (top_path / "Makefile").is_file():
        raise LabError(f"--kernel {src}: {top} is a git tree but not a Linux kernel tree "
                       "(no kernel/sched/fair.c)")
    return top_path


def user_tree(src_dir: str, rev: Optional[str] = None) -> Tree:
    src = _check_kernel_repo(Path(src_dir).resolve())
    rev = rev or "HEAD"
    base = git(src, "rev-parse", "--verify", "-q", rev + "^{commit}", check=False)
    if not base:
        raise LabError(f"--kernel {src}: no commit {rev!r} in that tree")
    common = Path(git(src, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    digest = hashlib.sha1(str(common).encode()).hexdigest()[:8]
    key = f"{src.name}-{digest}"
    dest = trees_dir() / key
    if not (dest / ".git").exists():
        say(f"  adding a detached worktree of {src} at {dest}")
        run(["git", "-C", str(src), "worktree", "add", "--detach", "-q", str(dest), base],
            log=log_dir() / "fetch.log")
    else:
        mine = Path(git(dest, "rev-parse", "--path-format=absolute", "--git-common-dir"))
        if mine != common:
            raise LabError(f"{dest} belongs to another repository ({mine}); remove it")
    desc = git(src, "log", "-1", "--format=%h (\"%s\")", base)
    tree = Tree(key=key, path=dest, base=base, description=f"{src} at {desc}")
    tree.set_ref("base", base)
    return tree


def resolve_tree(kernel: Optional[str] = None, base_rev: Optional[str] = None) -> Tree:
    """--kernel DIR, else $KERNEL_SRC, else Debian's linux-source."""
    kernel = kernel or os.environ.get("KERNEL_SRC")
    if kernel:
        return user_tree(kernel, base_rev)
    return debian_tree()
