"""Boot targets: one complete record per arch; the guests that run them."""

import dataclasses
from pathlib import Path

import pytest

from schedlab.core import build as buildmod
from schedlab.core import guests, targets
from schedlab.core import topology as t
from schedlab.core import vm
from schedlab.core.spec import VmOptions
from schedlab.core.util import LabError
from schedlab.series import patchset


@pytest.mark.parametrize("arch", sorted(targets.TARGETS))
def test_every_target_record_is_complete(arch):
    target = targets.TARGETS[arch]
    assert target.arch == arch and target.build is buildmod.ARCHES[arch]
    for f in dataclasses.fields(target):
        value = getattr(target, f.name)
        if f.name not in ("machine", "cpu_kvm", "mc_level", "kunit_scale"):
            assert value, f"{arch}: {f.name} is empty"
    assert set(target.accels) <= {"kvm", "tcg"} and "tcg" in target.accels
    assert bool(target.cpu_kvm) == target.has_kvm
    assert target.guest in targets.GUEST_KINDS and target.guest in guests.GUESTS
    assert target.console and target.qemu.startswith("qemu-system-")
    # The qemu config kunit.py's --arch names is one the KUnit series adds.
    added = "".join(p.read_text() for p in patchset.read_series())
    assert f"create mode 100644 tools/testing/kunit/qemu_configs/{target.kunit_qemu_arch}.py" \
        in added
    # Only the default target's files go without a suffix.
    assert (target.log_suffix == "") == (arch == targets.DEFAULT_TARGET)


def test_every_build_arch_has_a_target_and_guests_cover_the_kinds():
    assert set(targets.TARGETS) == set(buildmod.ARCHES)
    assert set(guests.GUESTS) == set(targets.GUEST_KINDS)


def test_get_target_default_and_unknown():
    assert targets.get_target(None) is targets.TARGETS["x86_64"]
    assert targets.get_target("ppc64le").kunit_arch == "powerpc"
    with pytest.raises(LabError, match="unknown arch 'arm64'; known: x86_64, ppc64le"):
        targets.get_target("arm64")


def test_x86_qemu_command_kvm_and_tcg():
    x86 = targets.get_target("x86_64")
    args = x86.qemu_command(Path("/b/bzImage"), t.PRESETS["smt4"], ["quiet"])
    assert args == ["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max,la57=off", "-m", "2048M",
                    "-smp", "8,sockets=1,cores=2,threads=4", "-kernel", "/b/bzImage",
                    "-append", "console=ttyS0 quiet", "-nographic", "-no-reboot", "-serial",
                    "stdio", "-monitor", "none"]
    kvm = x86.qemu_command(Path("/b/bzImage"), t.PRESETS["smt4"], [], kvm=True)
    assert kvm[1:5] == ["-accel", "kvm", "-cpu", "host"]


def test_a_target_without_kvm_refuses_it_and_never_probes(monkeypatch):
    ppc = targets.get_target("ppc64le")
    with pytest.raises(LabError, match="cannot use kvm"):
        ppc.qemu_command(Path("/b/vmlinux"), t.PRESETS["smt4"], [], kvm=True)
    monkeypatch.setattr(vm, "kvm_works", lambda image: pytest.fail("probed KVM"))
    kvm, why = guests.accelerator(ppc, Path("/b/vmlinux"))
    assert not kvm and "-M pseries -cpu power10" in why and "TCG only" in why


def test_the_pseries_guest_refuses_what_it_cannot_do(monkeypatch):
    monkeypatch.setattr(guests.pseries, "run_topology_check",
                        lambda *a: pytest.fail("booted"))
    topo = t.PRESETS["smt4"]
    for opts, command in ((VmOptions(), ["uname", "-r"]), (VmOptions(no_check=True), ()),
                          (VmOptions(accel="icount"), ("nproc",))):
        with pytest.raises(LabError, match="only checks the topology"):
            guests.check_topology("ppc64le", Path("/b/vmlinux"), topo, opts, command)


def test_check_topology_dispatches_by_the_targets_guest(monkeypatch):
    seen = []
    monkeypatch.setattr(guests.pseries, "run_topology_check",
                        lambda image, topo, online, memory, append, timeout:
                        seen.append(("pseries", online, memory, append, timeout)) or 0)
    monkeypatch.setattr(guests.vm, "boot_and_check",
                        lambda image, topo, command, **kw: seen.append(("vng", tuple(command),
                                                                        kw["online"])) or 3)
    opts = VmOptions(online=2, memory=1024, append=("quiet",), timeout=60)
    topo = t.PRESETS["smt4"]
    assert guests.check_topology("ppc64le", Path("/v"), topo, opts) == 0
    assert guests.check_topology(None, Path("/b"), topo, opts, ["true"]) == 3
    assert seen == [("pseries", 2, 1024, ("quiet",), 60), ("vng", ("true",), 2)]


def test_qemu_binary_of_the_system_target():
    assert guests.qemu_binary(targets.get_target("x86_64")) == "qemu-system-x86_64"
