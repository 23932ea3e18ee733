"""Boot targets: one record per architecture the lab boots, as data.

Detail: docs/modules.md, section core/targets.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from schedlab.core import build as buildmod
from schedlab.core import topology as topomod
from schedlab.core.util import LabError

# guest: how a target's kernel boots userspace and its topology is checked.
GUEST_KINDS = ("virtme-ng", "pseries")


@dataclass(frozen=True)
class BootTarget:
    arch: str                      # the lab's name for it (--arch)
    title: str                     # in messages: "the POWER guest"
    build: buildmod.Arch           # how its kernels are built (build.py)
    qemu: str                      # the qemu binary of the system (guests.qemu_binary)
    machine: str                   # qemu -M ('' for qemu's default)
    accels: Tuple[str, ...]        # accelerators a boot can use here, preferred first
    cpu: str                       # qemu -cpu under TCG
    cpu_kvm: str                   # qemu -cpu under KVM ('' without KVM)
    console: str                   # the kernel's console device (console=)
    display: Tuple[str, ...]       # qemu's options for no display
    kunit_arch: str                # kunit.py's name for it (--arch, qemu_configs/<name>.py)
    mc_level: bool                 # its guests have an MC level (topology.expected_domains)
    guest: str                     # how the lab boots it and checks the topology (guests.py)
    # What its test tier boots: the topologies checked, and the KUnit boots
    # (topology, CPUs online; None: all, with the live-domain comparison).
    test_topologies: Tuple[str, ...] = ()
    kunit_runs: Tuple[Tuple[str, Optional[int]], ...] = ()
    # Whether its KUnit boot can give the suite's largest fixtures their
    # 1920 possible CPUs (kunit --scale): NR_CPUS and qemu's maxcpus.
    kunit_scale: bool = False

    @property
    def log_suffix(self) -> str:
        """Added to the names of its logs and build folders ('' for x86_64)."""
        return self.build.suffix

    @property
    def cross_compile(self) -> str:
        """kunit.py's --cross_compile (and the compiler prefix) on an x86_64 host."""
        return self.build.cross_compile

    @property
    def kunit_qemu_arch(self) -> str:
        """The series' kunit.py qemu configuration for it (--arch, in
        tools/testing/kunit/qemu_configs/): 192 possible CPUs, 2 online."""
        return f"{self.kunit_arch}-smt8"

    @property
    def runs_commands(self) -> bool:
        """Its guest runs a user's command and the measurement plans (virtme-ng)."""
        return self.guest == "virtme-ng"

    @property
    def has_kvm(self) -> bool:
        return "kvm" in self.accels

    def qemu_command(self, image: Path, topo: topomod.Topology, append: Sequence[str], *,
                     kvm: bool = False, memory_mib: int = 2048, initrd: Optional[Path] = None,
                     qemu: Optional[str] = None, single_thread: bool = False,
                     present: Optional[int] = None) -> List[str]:
        """A direct qemu boot of IMAGE on TOPO (pure: tested without booting).

        The console (the target's) is on stdio, the kernel arguments after
        console=; -no-reboot turns a panic's reboot into an exit.  kvm: KVM
        and its CPU model, else TCG.  qemu: the binary (guests.qemu_binary()).
        single_thread: TCG in one thread for every vCPU, where the guest
        patches its own text (BPF probes, static keys).  present: only that
        many of TOPO's CPUs at boot, the others possible (qemu's maxcpus).
        """
        accel = "kvm" if kvm else "tcg"
        if accel not in self.accels:
            raise LabError(f"a {self.arch} guest cannot use {accel} here "
                           f"(accelerators: {', '.join(self.accels)})")
        args = [qemu or self.qemu]
        if self.machine:
            args += ["-M", self.machine]
        args += ["-accel", accel + (",thread=single" if single_thread and not kvm else ""),
                 "-cpu", self.cpu_kvm if kvm else self.cpu,
                 "-m", f"{memory_mib}M", "-smp", topomod.smp_arg(topo, present)]
        args += topomod.qemu_numa_args(topo, memory_mib)
        args += ["-kernel", str(image)]
        if initrd is not None:
            args += ["-initrd", str(initrd)]
        args += ["-append", " ".join([f"console={self.console}", *append]), *self.display,
                 "-no-reboot", "-serial", "stdio", "-monitor", "none"]
        return args


TARGETS: Dict[str, BootTarget] = {
    # virtme-ng boots with the host's root filesystem (vm.py); KVM where a
    # probe boot shows that it works.  TCG's "max" CPU has 5-level paging;
    # with it a KASAN kernel reports a wild-memory-access from an interrupt
    # during identify_cpu() in early boot, and that taint switches lock
    # debugging off for the whole run: la57=off.  QEMU gives an x86 guest
    # one LLC per socket: an MC level.
    "x86_64": BootTarget(
        arch="x86_64", title="x86_64", build=buildmod.ARCHES["x86_64"],
        qemu="qemu-system-x86_64", machine="", accels=("kvm", "tcg"),
        cpu="max,la57=off", cpu_kvm="host", console="ttyS0", display=("-nographic",),
        kunit_arch="x86_64", mc_level=True, guest="virtme-ng",
        test_topologies=("smt4", "smt8", "smt4-numa"),
        kunit_runs=(("2x12x8", 2), ("smt4-numa", None))),
    # qemu's pseries machine (pseries.py): TCG only (no KVM for POWER on an
    # x86 host), POWER10 as the machines the series is for, the hypervisor's
    # virtual terminal as console, a busybox initramfs for the topology
    # probe.  Its LLC is the core: no MC level (pseries.py's docstring).
    "ppc64le": BootTarget(
        arch="ppc64le", title="POWER", build=buildmod.ARCHES["ppc64le"],
        qemu="qemu-system-ppc64", machine="pseries", accels=("tcg",),
        cpu="power10", cpu_kvm="", console="hvc0", display=("-display", "none"),
        kunit_arch="powerpc", mc_level=False, guest="pseries",
        test_topologies=("smt8", "smt4"),
        kunit_runs=(("2x12x8", 2), ("smt8", None), ("smt4", None)), kunit_scale=True),
}
DEFAULT_TARGET = "x86_64"


def get_target(arch: Optional[str]) -> BootTarget:
    """The boot target of ARCH (None: x86_64)."""
    name = arch or DEFAULT_TARGET
    if name not in TARGETS:
        raise LabError(f"unknown arch {name!r}; known: {', '.join(TARGETS)}")
    return TARGETS[name]
