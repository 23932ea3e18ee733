"""The kit in the pseries guest: a Debian ppc64el userspace unpacked
without root, the initramfs that carries it with the lab and the kit's
results, the boot, and the results back from the console.

Detail: docs/modules.md, section kit/powerguest.py.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

from schedlab.core import aptmirror, pseries, vm
from schedlab.core import topology as topomod
from schedlab.core.util import LabError, cache_dir, package_file, repo_dir, run, run_in_group, say

# What the kit runs in the guest, as Debian packages (bookworm has each for
# ppc64el; apt adds their dependencies).  bcc's tools are left out: they do
# not compile against a ppc64le kernel's headers from 6.12 on
# (iovisor/bcc#5172), and libbpf-tools' funclatency serves.  apt takes
# Essential packages as installed, so those the kit's scripts call are named.
PACKAGES = (
    # the kit and the shell around it
    "python3", "bash", "dash", "coreutils", "sed", "grep", "mawk", "findutils", "tar",
    "gzip", "procps", "util-linux", "mount", "iproute2", "powerpc-utils",
    # the probes
    "bpftrace", "libbpf-tools", "bpftool", "linux-perf",
    # the benchmarks
    "stress-ng", "rt-tests", "dbench",
)
# What no program reads; left out of the initramfs (a fifth of its size).
PRUNE = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
         "usr/share/lintian", "usr/share/bash-completion", "usr/share/zsh")
INIT_SCRIPT = "guest/pseries-kit-init.sh"
# In the guest: the lab's files, the kit's work folder, the run's script.
LAB, WORK, RUN = "lab", "work", "kit/run.sh"
CONFIG = "kit/config"
BENCH = "kit/schbench"
RESULTS_BEGIN = "@@kit-results-begin@@"
RESULTS_END = "@@kit-results-end@@"
# The guest's memory: the userspace (about 600 MB) is in it twice while the
# kernel unpacks the initramfs.
MEMORY_MIB = 4096


def _apt(log: Path) -> Tuple[Path, List[str]]:
    """The private ppc64el apt configuration (pseries.py's), its lists fetched once."""
    log.parent.mkdir(parents=True, exist_ok=True)
    mirror = aptmirror.machine_mirror()
    apt_root = cache_dir() / f"apt-{pseries.DEBIAN_ARCH}"
    opts = aptmirror.prepare_private_apt(apt_root, mirror, mirror.suites[0],
                                         arch=pseries.DEBIAN_ARCH)
    if not any((apt_root / "lists").glob("*_Packages*")):
        say(f"  fetching the {pseries.DEBIAN_ARCH} package lists ({mirror.suites[0]}) from "
            f"the Debian archive source of {mirror.origin}")
        if run(["apt-get", *opts, "update"], log=log, check=False).returncode != 0:
            raise LabError(f"apt-get update of the private {pseries.DEBIAN_ARCH} list failed "
                           f"(log: {log})")
    return apt_root, opts


def fetch_debs(log: Path) -> List[Path]:
    """PACKAGES and their dependencies for ppc64el, downloaded once (apt's
    cache in the private configuration; nothing is installed)."""
    apt_root, opts = _apt(log)
    proc = run(["apt-get", *opts, "install", "--download-only", "--no-install-recommends",
                "-y", *PACKAGES], log=log, check=False)
    if proc.returncode != 0:
        raise LabError(f"apt could not download the kit's {pseries.DEBIAN_ARCH} packages "
                       f"(log: {log})")
    debs = sorted((apt_root / "cache/archives").glob("*.deb"))
    names = {d.name.split("_")[0] for d in debs}
    absent = [p for p in PACKAGES if p not in names]
    if absent:
        raise LabError(f"no {pseries.DEBIAN_ARCH} package downloaded for {', '.join(absent)} "
                       f"(log: {log})")
    return debs


def fixups(root: Path) -> None:
    """What the packages' maintainer scripts would have made: /bin/sh, awk,
    the loader's directory; and what is pruned."""
    links = {"bin/sh": "dash", "usr/bin/awk": "mawk"}
    for rel, target in links.items():
        p = root / rel
        if not p.is_symlink() and not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.symlink_to(target)
    for rel in PRUNE:
        shutil.rmtree(root / rel, ignore_errors=True)
    for d in ("proc", "sys", "dev", "tmp", "run", "root", "kit", WORK):
        (root / d).mkdir(exist_ok=True)


def userspace(log: Path) -> Path:
    """The kit's ppc64el root, unpacked once per set of packages
    (dpkg-deb -x, no maintainer scripts) and Python's modules compiled."""
    debs = fetch_debs(log)
    key = hashlib.sha256("\n".join(d.name for d in debs).encode()).hexdigest()[:12]
    root = cache_dir() / pseries.DEBIAN_ARCH / f"kit-root-{key}"
    if (root / ".complete").is_file():
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    say(f"  unpacking {len(debs)} {pseries.DEBIAN_ARCH} packages into {root}")
    for d in debs:
        run(["dpkg-deb", "-x", str(d), str(root)], log=log)
    fixups(root)
    lib = sorted(root.glob("usr/lib/python3.*"))
    if lib:     # the guest would compile them on every boot (no postinst ran)
        run([sys.executable, "-m", "compileall", "-q", "-d", "/" + str(lib[-1].relative_to(root)),
             str(lib[-1])], log=log, check=False)
    (root / ".complete").write_text("\n".join(d.name for d in debs) + "\n")
    return root


def tree_entries(top: Path, under: str) -> Iterator[pseries.Entry]:
    """TOP's files as initramfs entries under UNDER (parents first; symlinks kept)."""
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        here = Path(dirpath)
        name = "/".join(p for p in (under, here.relative_to(top).as_posix()) if p not in ("", "."))
        if name:
            yield name, stat.S_IFDIR | 0o755, b"", 0
        for n in sorted(filenames) + [d for d in dirnames if (here / d).is_symlink()]:
            p = here / n
            path = f"{name}/{n}" if name else n
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                yield path, stat.S_IFLNK | 0o777, os.readlink(p).encode(), 0
            elif stat.S_ISREG(st.st_mode):
                yield path, stat.S_IFREG | stat.S_IMODE(st.st_mode), p, 0
        dirnames[:] = [d for d in dirnames if not (here / d).is_symlink()]


def lab_entries() -> Iterator[pseries.Entry]:
    """The lab's files (tracked, and new ones git does not ignore), under LAB."""
    repo = repo_dir()
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=repo, capture_output=True,
                         check=True).stdout.decode()
    files = sorted(f for f in out.split("\0") if f and (repo / f).is_file())
    dirs = sorted({str(p) for f in files for p in Path(f).parents if str(p) != "."})
    yield LAB, stat.S_IFDIR | 0o755, b"", 0
    for d in dirs:
        yield f"{LAB}/{d}", stat.S_IFDIR | 0o755, b"", 0
    for f in files:
        mode = (repo / f).stat().st_mode
        yield f"{LAB}/{f}", stat.S_IFREG | stat.S_IMODE(mode), repo / f, 0


@dataclass(frozen=True)
class Boot:
    """One boot of the kit's guest: what it runs and what it starts from."""
    image: Path
    config: Path                # the kernel's .config (the kit's identity)
    script: str                 # RUN: the commands, as sh reads them
    work: Optional[Path] = None     # the kit's work folder of the boot before
    bench: Optional[Path] = None    # schbench built for ppc64le


def write_initramfs(dest: Path, root: Path, boot: Boot) -> Path:
    """The userspace, the lab, the kit's script, config and earlier results."""
    init = package_file(INIT_SCRIPT)
    extra: List[pseries.Entry] = [
        ("dev/console", stat.S_IFCHR | 0o600, b"", 5 << 8 | 1),
        ("init", stat.S_IFREG | 0o755, init, 0),
        ("bin/busybox", stat.S_IFREG | 0o755, pseries.busybox_binary(), 0),
        (RUN, stat.S_IFREG | 0o755, boot.script.encode(), 0),
        (CONFIG, stat.S_IFREG | 0o644, boot.config, 0)]
    if boot.bench is not None:
        extra.append((BENCH, stat.S_IFREG | 0o755, boot.bench, 0))
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "wb") as f:
        entries = list(tree_entries(root, "")) + list(lab_entries()) + extra
        if boot.work is not None and boot.work.is_dir():
            entries += [e for e in tree_entries(boot.work, WORK) if e[0] != WORK]
        pseries.write_cpio(f, entries)
    return dest


def results_from(console: str) -> Optional[bytes]:
    """The tar.gz of the kit's work folder the guest printed between the
    marks, in base64 (lines the kernel printed among them are skipped)."""
    text = console.replace("\r", "")
    _, sep, rest = text.partition(RESULTS_BEGIN + "\n")
    if not sep:
        return None
    body, sep, _ = rest.partition(RESULTS_END)
    if not sep:
        return None
    lines = [ln for ln in body.splitlines() if re.fullmatch(r"[A-Za-z0-9+/=]+", ln)]
    try:
        return base64.b64decode("".join(lines), validate=True)
    except ValueError:
        return None


def unpack_results(data: bytes, dest: Path) -> None:
    """The guest's work folder into DEST, replaced once the archive is read whole."""
    new = dest.with_name(dest.name + ".new")
    shutil.rmtree(new, ignore_errors=True)
    new.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(new, filter="data")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        shutil.rmtree(new, ignore_errors=True)
        raise LabError(f"the guest's results do not unpack ({e}); {dest} is as it was") \
            from None
    shutil.rmtree(dest, ignore_errors=True)
    new.rename(dest)


def run_boot(boot: Boot, root: Path, topo: topomod.Topology, log: Path, out: Path,
             timeout: float, memory_mib: int = MEMORY_MIB) -> vm.VmResult:
    """Boot BOOT with the userspace ROOT (userspace()) on TOPO under
    single-thread TCG (the kit's probes and switches patch kernel text);
    the console in LOG; the guest's work folder in OUT."""
    if not boot.image.is_file():
        raise LabError(f"no kernel image at {boot.image}")
    initrd = write_initramfs(log.with_suffix(".cpio"), root, boot)
    say(f"  initramfs {initrd} ({initrd.stat().st_size >> 20} MiB)")
    args = pseries.TARGET.qemu_command(
        boot.image, topo, ["loglevel=4"], memory_mib=memory_mib, initrd=initrd,
        qemu=pseries.qemu_wrapper(), single_thread=True)
    start = time.monotonic()
    try:
        status = run_in_group(args, log, timeout, "the kit's POWER guest")
    finally:
        initrd.unlink(missing_ok=True)
    took = time.monotonic() - start
    output = log.read_text(errors="replace")
    data = results_from(output)
    if data is None:
        raise LabError(f"the POWER guest printed no results (status {status}; console: {log})")
    unpack_results(data, out)
    return vm.VmResult(status, output, "tcg", took)


def smt_command(mode: int) -> str:
    return f"ppc64_cpu --smt={mode}"


def modes_valid(modes: Sequence[int], threads: int) -> List[str]:
    """What is wrong with an SMT sweep of MODES on cores of THREADS threads."""
    bad = [m for m in modes if m < 2 or m > threads]
    return [f"SMT mode {m}: the kit needs 2 threads a core or more, and the cores have "
            f"{threads}" for m in bad] + (["SMT modes repeat"] if len(set(modes)) < len(modes)
                                           else [])
