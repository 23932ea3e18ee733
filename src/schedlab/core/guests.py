"""Each boot target's guest, run: the qemu binary, the accelerator, the
topology boot and its check.

targets.py describes a target; its guest field names its row here:
virtme-ng (vm.py: the host's root filesystem shared, KVM where it works,
any command after the check) or pseries (pseries.py: a busybox initramfs
that runs the topology probe and powers off, TCG).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence, Tuple

from schedlab.core import pseries
from schedlab.core import topology as topomod
from schedlab.core import vm
from schedlab.core.spec import VmOptions
from schedlab.core.targets import BootTarget, get_target
from schedlab.core.util import LabError

# (target, image, topology, options, command) -> status (0: the check passed)
Check = Callable[[BootTarget, Path, topomod.Topology, VmOptions, Sequence[str]], int]


@dataclass(frozen=True)
class Guest:
    qemu: Callable[[BootTarget], str]      # the qemu binary to run
    check: Check                           # boot on a topology and check it


def _virtme_check(target: BootTarget, image: Path, topo: topomod.Topology, opts: VmOptions,
                  command: Sequence[str]) -> int:
    return vm.boot_and_check(image, topo, command, online=opts.online,
                             memory_mib=opts.memory, kernel_args=opts.append,
                             timeout=opts.timeout, verbose=opts.verbose, rwdirs=opts.rwdirs,
                             icount=opts.accel == "icount", no_check=opts.no_check,
                             retry_hung=opts.retry_hung)


def check_request(arch: Optional[str], opts: VmOptions,
                  command: Sequence[str] = ("nproc",)) -> None:
    """Refuse, before any build, what ARCH's guest cannot do: a pseries guest
    boots a busybox initramfs that only checks the topology."""
    target = get_target(arch)
    if target.runs_commands:
        return
    unsupported = [what for what, given in (
        (f"a command ({' '.join(command)})", tuple(command) not in ((), ("nproc",))),
        ("--no-check", opts.no_check), ("--rwdir", bool(opts.rwdirs)),
        (f"--accel {opts.accel}", opts.accel != "auto")) if given]
    if unsupported:
        raise LabError(f"the {target.title} guest ({target.arch}) boots a busybox initramfs "
                       f"that only checks the topology: no {', '.join(unsupported)}")


def _pseries_check(target: BootTarget, image: Path, topo: topomod.Topology, opts: VmOptions,
                   command: Sequence[str]) -> int:
    check_request(target.arch, opts, command)
    return pseries.run_topology_check(image, topo, opts.online, opts.memory, opts.append,
                                      opts.timeout)


GUESTS = {   # by BootTarget.guest (targets.GUEST_KINDS)
    "virtme-ng": Guest(lambda target: target.qemu, _virtme_check),
    "pseries": Guest(lambda target: pseries.qemu_wrapper(), _pseries_check),
}


def qemu_binary(target: BootTarget) -> str:
    """The qemu binary a direct boot of TARGET runs: the system's, or (pseries)
    one whose machine has SMT under TCG."""
    return GUESTS[target.guest].qemu(target)


def accelerator(target: BootTarget, image: Path) -> Tuple[bool, str]:
    """Whether a boot of IMAGE uses KVM here, and why (KVM where the target
    has it and a probe boot shows that it works)."""
    if not target.has_kvm:
        return False, (f"a {target.title} guest: qemu -M {target.machine or 'default'} "
                       f"-cpu {target.cpu}, {'/'.join(target.accels).upper()} only")
    return vm.kvm_works(image)


def check_topology(arch: Optional[str], image: Path, topo: topomod.Topology,
                   opts: VmOptions, command: Sequence[str] = ("nproc",)) -> int:
    """Boot IMAGE (built for ARCH; None: x86_64) on TOPO, check the topology
    the guest reports, run COMMAND where the guest can (virtme-ng: after the
    check, its output printed).  The status: 0 when all passed, 3 when the
    topology check failed, else the command's."""
    target = get_target(arch)
    return GUESTS[target.guest].check(target, image, topo, opts, command)
