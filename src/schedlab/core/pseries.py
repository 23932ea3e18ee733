"""POWER guests: the ppc64le lab kernel on qemu's pseries machine.

Detail: docs/modules.md, section core/pseries.py.
"""

from __future__ import annotations

import io
import re
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable, List, Optional, Sequence, Tuple, Union

from schedlab.core import aptmirror, targets
from schedlab.core import topology as topomod
from schedlab.core.util import (LabError, cache_dir, fmt_secs, log_dir, package_file, run,
                                run_in_group, say)

TARGET = targets.get_target("ppc64le")
QEMU = TARGET.qemu
# SMT under TCG came to the pseries machine with the 2023 series "spapr:
# TCG allow up to 8-thread SMT on POWER8 and newer CPUs"; Debian 12's 7.2
# refuses threads > 1 ("TCG cannot support more than 1 thread/core on a
# pseries machine"), 10.0 works. 9.0 is a safe floor.  Where the system's
# qemu is older, qemu_wrapper() unpacks qemu-system-ppc of the mirror's
# <suite>-backports into the cache.
MIN_QEMU = (9, 0)
QEMU_PACKAGES = ("qemu-system-ppc", "qemu-system-data")
BUSYBOX_PACKAGE = "busybox-static"
DEBIAN_ARCH = "ppc64el"
INIT_SCRIPT = "guest/pseries-init.sh"
BEGIN_MARK = "@@schedlab-guest-begin@@"
END_MARK = "@@schedlab-topology-end@@"


# ------------------------------------------------------------------ qemu

def parse_qemu_version(text: str) -> Tuple[int, int]:
    """(major, minor) of 'QEMU emulator version 10.0.2 (Debian ...)'; (0, 0) if none."""
    m = re.search(r"version (\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _version_of(binary: str) -> Tuple[int, int]:
    proc = run([binary, "--version"], capture=True, check=False)
    return parse_qemu_version(proc.stdout) if proc.returncode == 0 else (0, 0)


def wrapper_script(binary: Path, data: Path) -> str:
    """The cached qemu's wrapper: its own firmware and data (-L), and neither
    a display nor audio, whose modules the system's older qemu would supply
    (and a newer binary refuses to load)."""
    return (f"#!/bin/sh\n# qemu-system-ppc64 unpacked by schedlab (pseries.py)\n"
            f"exec {binary} -L {data} -display none -audio none \"$@\"\n")


def qemu_wrapper() -> str:
    """A qemu-system-ppc64 whose pseries machine has SMT under TCG: the
    system's when it is recent enough, else the one unpacked from the
    machine's Debian mirror (<suite>-backports), run through a wrapper."""
    system = shutil.which(QEMU)
    if system and _version_of(system) >= MIN_QEMU:
        return system
    wrapper = cache_dir() / "qemu-ppc" / "bin" / QEMU
    if wrapper.is_file() and _version_of(str(wrapper)) >= MIN_QEMU:
        return str(wrapper)
    mirror = aptmirror.machine_mirror()
    suite = mirror.suites[0].split("-")[0] + "-backports"
    root = cache_dir() / "qemu-ppc"
    apt_root = cache_dir() / "apt-qemu-ppc"
    opts = aptmirror.prepare_private_apt(apt_root, mirror, suite)
    log = log_dir() / "fetch-qemu-ppc.log"
    have = _version_of(system) if system else (0, 0)
    say(f"  {QEMU} {'%d.%d' % have if system else 'missing'}: pseries SMT under TCG needs "
        f"qemu {'%d.%d' % MIN_QEMU} or later; unpacking {', '.join(QEMU_PACKAGES)} of {suite} "
        f"(the Debian archive source of {mirror.origin}) into {root}")
    if run(["apt-get", *opts, "update"], log=log, check=False).returncode != 0:
        raise LabError(f"apt-get update of the private {suite} list failed (log: {log})")
    with tempfile.TemporaryDirectory(prefix="schedlab-qemu-") as tmp:
        if run(["apt-get", *opts, "download", *QEMU_PACKAGES], cwd=Path(tmp), log=log,
               check=False).returncode != 0:
            raise LabError(f"apt could not download {' '.join(QEMU_PACKAGES)} from {suite} "
                           f"(log: {log}); install qemu-system-ppc {'%d.%d' % MIN_QEMU} or "
                           "later instead")
        shutil.rmtree(root / "root", ignore_errors=True)
        (root / "root").mkdir(parents=True)
        for deb in sorted(Path(tmp).glob("*.deb")):
            run(["dpkg-deb", "-x", str(deb), str(root / "root")], log=log)
    binary = root / "root/usr/bin" / QEMU
    missing = [ln.split()[0] for ln in run(["ldd", str(binary)], capture=True,
                                           check=False).stdout.splitlines()
               if "not found" in ln]
    if missing:
        raise LabError(f"the unpacked {binary} needs libraries this machine lacks: "
                       f"{', '.join(missing)} (apt-get install qemu-system-ppc brings most)")
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(wrapper_script(binary, root / "root/usr/share/qemu"))
    wrapper.chmod(0o755)
    got = _version_of(str(wrapper))
    if got < MIN_QEMU:
        raise LabError(f"the unpacked {QEMU} reports version {got}, not {MIN_QEMU} or later")
    say(f"  {wrapper}: qemu {'%d.%d' % got}")
    return str(wrapper)


# ------------------------------------------------------------------ initramfs

# An entry's data: bytes, or a file read when it is written.
Data = Union[bytes, Path]
Entry = Tuple[str, int, Data, int]


def write_cpio(out: BinaryIO, entries: Iterable[Entry]) -> None:
    """A cpio archive in the kernel's initramfs format ("newc", 070701) on OUT.

    entries: (path, mode, data, rdev) with mode including the file type
    (stat.S_IFDIR, S_IFREG, S_IFCHR, S_IFLNK) and rdev the (major << 8 |
    minor) of a device node; a symlink's data is its target.  Owned by
    root, mtime 0, one link each.
    """
    at = 0

    def put(chunk: bytes) -> None:
        nonlocal at
        out.write(chunk)
        at += len(chunk)
        if at % 4:
            out.write(b"\0" * (-at % 4))
            at += -at % 4

    ino = 0
    for path, mode, data, rdev in list(entries) + [("TRAILER!!!", 0, b"", 0)]:
        ino += 1
        body = data.read_bytes() if isinstance(data, Path) else data
        name = path.lstrip("/").encode() + b"\0"
        fields = [ino if path != "TRAILER!!!" else 0, mode, 0, 0, 1, 0, len(body), 0, 0,
                  rdev >> 8, rdev & 0xff, len(name), 0]
        put(b"070701" + b"".join(b"%08X" % f for f in fields) + name)
        put(body)


def cpio_newc(entries: Sequence[Entry]) -> bytes:
    """write_cpio()'s archive as bytes."""
    buf = io.BytesIO()
    write_cpio(buf, entries)
    return buf.getvalue()


def initramfs_entries(busybox: bytes, init: bytes, probe: bytes) -> List[Entry]:
    """The topology boot's files: busybox, /init, the probe and /dev/console
    (the kernel opens it for init before anything mounts devtmpfs), and
    /bin/sh for /init's interpreter (a symlink's data is its target)."""
    d, f, c = stat.S_IFDIR | 0o755, stat.S_IFREG, stat.S_IFCHR | 0o600
    return [("bin", d, b"", 0), ("dev", d, b"", 0), ("proc", d, b"", 0), ("sys", d, b"", 0),
            ("tmp", d, b"", 0), ("dev/console", c, b"", 5 << 8 | 1),
            ("bin/busybox", f | 0o755, busybox, 0),
            ("bin/sh", stat.S_IFLNK | 0o777, b"busybox", 0),
            ("init", f | 0o755, init, 0),
            ("topology-probe.sh", f | 0o644, probe, 0)]


def busybox_binary() -> Path:
    """A static ppc64el busybox, fetched once with a private apt configuration
    for the ppc64el architecture from the Debian mirror this machine uses."""
    dest = cache_dir() / DEBIAN_ARCH / "busybox"
    if dest.is_file():
        return dest
    mirror = aptmirror.machine_mirror()
    suite = mirror.suites[0]
    apt_root = cache_dir() / f"apt-{DEBIAN_ARCH}"
    opts = aptmirror.prepare_private_apt(apt_root, mirror, suite, arch=DEBIAN_ARCH)
    log = log_dir() / "fetch-busybox.log"
    say(f"  fetching {BUSYBOX_PACKAGE}:{DEBIAN_ARCH} ({suite}) from the Debian archive "
        f"source of {mirror.origin}")
    if run(["apt-get", *opts, "update"], log=log, check=False).returncode != 0:
        raise LabError(f"apt-get update of the private {DEBIAN_ARCH} list failed (log: {log})")
    with tempfile.TemporaryDirectory(prefix="schedlab-busybox-") as tmp:
        proc = run(["apt-get", *opts, "download", f"{BUSYBOX_PACKAGE}:{DEBIAN_ARCH}"],
                   cwd=Path(tmp), log=log, check=False)
        debs = sorted(Path(tmp).glob(f"{BUSYBOX_PACKAGE}_*_{DEBIAN_ARCH}.deb"))
        if proc.returncode != 0 or not debs:
            raise LabError(f"apt could not download {BUSYBOX_PACKAGE}:{DEBIAN_ARCH} "
                           f"(log: {log})")
        unpacked = Path(tmp) / "root"
        run(["dpkg-deb", "-x", str(debs[-1]), str(unpacked)], log=log)
        binary = unpacked / "bin/busybox"
        if not binary.is_file():
            raise LabError(f"{debs[-1].name} has no bin/busybox")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(binary, dest)
        say(f"  {debs[-1].name}: bin/busybox kept as {dest}")
    return dest


def write_initramfs(dest: Path) -> Path:
    entries = initramfs_entries(busybox_binary().read_bytes(),
                                package_file(INIT_SCRIPT).read_bytes(),
                                topomod.guest_probe().read_bytes())
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(cpio_newc(entries))
    return dest


# ------------------------------------------------------------- topology boot

@dataclass
class TopologyBoot:
    returncode: int
    report: str          # the probe's lines
    after: str           # cpu0's domains with their flags, the kernel release
    seconds: float
    log: Path


def split_console(console: str) -> Tuple[str, str]:
    """The probe's report (between the marks) and what the guest printed after."""
    text = console.replace("\r", "")
    _, sep, rest = text.partition(BEGIN_MARK + "\n")
    if not sep:
        return "", ""
    report, sep, after = rest.partition(END_MARK + "\n")
    if not sep:
        return report, ""
    return report, after


def topology_boot(image: Path, topo: topomod.Topology, *, online: Optional[int] = None,
                  memory_mib: int = 2048, kernel_args: Sequence[str] = (),
                  timeout: float = 900) -> TopologyBoot:
    """Boot the POWER guest with the busybox initramfs; the probe's report."""
    if not image.is_file():
        raise LabError(f"no kernel image at {image}: build it first "
                       "(./schedlab build --arch ppc64le)")
    qemu = qemu_wrapper()
    initrd = write_initramfs(log_dir() / "pseries-initramfs.cpio")
    append = [*topomod.kernel_cpu_args(topo, online), *kernel_args]
    # The guest powers the machine off (RTAS) when the probe is done.
    args = TARGET.qemu_command(image, topo, append, memory_mib=memory_mib, initrd=initrd,
                               qemu=qemu)
    log = log_dir() / f"pseries-{topo.spec().replace(':', '-')}.log"
    say(f"  {QEMU} -M {TARGET.machine} -cpu {TARGET.cpu} (TCG), topology "
        f"{topo.name or topo.spec()}: {topo.describe()}")
    start = time.monotonic()
    status = run_in_group(args, log, timeout, "the POWER guest")
    took = time.monotonic() - start
    report, after = split_console(log.read_text(errors="replace"))
    return TopologyBoot(status, report, after, took, log)


DOMAIN_LINE = re.compile(r"^cpu0 domain\d+: ")


def run_topology_check(image: Path, topo: topomod.Topology, online: Optional[int] = None,
                       memory_mib: int = 2048, kernel_args: Sequence[str] = (),
                       timeout: float = 900) -> int:
    """'./schedlab run --arch ppc64le': boot, report, check against the
    topology (POWER's levels); 0 when they agree."""
    boot = topology_boot(image, topo, online=online, memory_mib=memory_mib,
                         kernel_args=kernel_args, timeout=timeout)
    view = topomod.parse_guest_report(boot.report)
    if view.nproc == 0:
        tail = "\n    ".join(boot.after.strip().splitlines()[-30:] or
                             Path(boot.log).read_text(errors="replace").splitlines()[-30:])
        raise LabError(f"the POWER guest did not report its topology (status "
                       f"{boot.returncode}); last output:\n    {tail}\n  full log: {boot.log}")
    say(f"  boot took {fmt_secs(boot.seconds)} under TCG (console: {boot.log})")
    say(topomod.format_view(topo, view, TARGET.mc_level))
    for line in boot.after.splitlines():
        if DOMAIN_LINE.match(line) or line.startswith("uname: "):
            say(f"  {line}")
    problems = topomod.check_view(topo, view, online, TARGET.mc_level)
    if problems:
        say("  topology check FAILED:\n    " + "\n    ".join(problems))
        return 3
    say(f"  topology check passed ({topo.name or topo.spec()}, POWER levels)")
    return 0
