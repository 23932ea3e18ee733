"""The POWER guest: qemu pseries command lines, the initramfs, the console split."""

import stat
from pathlib import Path

import pytest

from schedlab.core import pseries as ps
from schedlab.core import targets
from schedlab.core import topology as t
from schedlab.core.util import PACKAGE
from schedlab.series import kunit as k
from schedlab.series import kunit_tool as kt


def read_newc(blob: bytes):
    """Parse a newc archive back: [(name, mode, data, rdevmajor, rdevminor)]."""
    out, pos = [], 0
    while True:
        assert blob[pos:pos + 6] == b"070701"
        f = [int(blob[pos + 6 + 8 * i:pos + 14 + 8 * i], 16) for i in range(13)]
        namesize, filesize = f[11], f[6]
        pos += 110
        name = blob[pos:pos + namesize - 1].decode()
        assert blob[pos + namesize - 1] == 0
        pos += namesize
        pos += -pos % 4
        data = blob[pos:pos + filesize]
        pos += filesize
        pos += -pos % 4
        if name == "TRAILER!!!":
            assert pos == len(blob)
            return out
        out.append((name, f[1], data, f[9], f[10]))


def test_qemu_command_pseries_smt8():
    args = ps.TARGET.qemu_command(Path("/b/vmlinux"), t.PRESETS["smt8"], ["kunit.enable=1"])
    assert args[:7] == ["qemu-system-ppc64", "-M", "pseries", "-accel", "tcg", "-cpu", "power10"]
    assert args[args.index("-smp") + 1] == "16,sockets=1,cores=2,threads=8"
    append = args[args.index("-append") + 1]
    assert append.split() == ["console=hvc0", "kunit.enable=1"]
    assert "-initrd" not in args and "-no-reboot" in args and "-display" in args
    assert "-numa" not in args


def test_qemu_command_pseries_numa_initrd():
    args = ps.TARGET.qemu_command(Path("/b/vmlinux"), t.PRESETS["smt4-numa"], [],
                                  memory_mib=2048, initrd=Path("/tmp/i.cpio"))
    assert args[args.index("-initrd") + 1] == "/tmp/i.cpio"
    nodes = [args[i + 1] for i, a in enumerate(args) if a == "-numa"]
    assert nodes == ["node,nodeid=0,cpus=0-7,memdev=mem0", "node,nodeid=1,cpus=8-15,memdev=mem1"]


def test_kunit_qemu_command_ppc64le_uses_pseries():
    args = k.qemu_command(Path("/b/vmlinux"), t.parse_topology("2x12x8"), kvm=False, online=2,
                          arch="ppc64le", filter_glob="sched_fair_lb.*")
    assert args[0] == "qemu-system-ppc64"
    append = args[args.index("-append") + 1].split()
    assert append[0] == "console=hvc0"
    assert "console=ttyS0" not in append
    assert {"kunit.enable=1", "kunit_shutdown=poweroff", "maxcpus=2",
            "kunit.filter_glob=sched_fair_lb.*"} <= set(append)
    assert args[args.index("-smp") + 1] == "192,sockets=2,cores=12,threads=8"


def test_kunit_qemu_command_x86_unchanged():
    args = k.qemu_command(Path("/b/bzImage"), t.PRESETS["smt4"], kvm=False, online=None)
    assert args[0] == "qemu-system-x86_64"
    assert args[args.index("-append") + 1].split()[0] == "console=ttyS0"


def test_cpio_newc_round_trip():
    entries = ps.initramfs_entries(b"BB" * 1001, b"#!/bin/sh\n", b"echo probe\n")
    got = read_newc(ps.cpio_newc(entries))
    by_name = {name: (mode, data, ma, mi) for name, mode, data, ma, mi in got}
    assert set(by_name) == {"bin", "dev", "proc", "sys", "tmp", "dev/console", "bin/busybox", "bin/sh",
                            "init", "topology-probe.sh"}
    mode, _data, major, minor = by_name["dev/console"]
    assert stat.S_ISCHR(mode) and (major, minor) == (5, 1)
    mode, data, _, _ = by_name["init"]
    assert stat.S_ISREG(mode) and mode & 0o111 and data == b"#!/bin/sh\n"
    assert by_name["bin/busybox"][1] == b"BB" * 1001
    assert stat.S_ISDIR(by_name["bin"][0])
    # Directories come before what they hold: the kernel creates in order.
    names = [g[0] for g in got]
    assert names.index("dev") < names.index("dev/console")
    assert names.index("bin") < names.index("bin/busybox")


def test_init_script_marks_match_the_parser():
    text = (PACKAGE / ps.INIT_SCRIPT).read_text()
    assert ps.BEGIN_MARK in text and ps.END_MARK in text
    assert "poweroff -f" in text


def test_split_console():
    console = ("SLOF ...\r\nLinux version 7.3.4\r\n" + ps.BEGIN_MARK + "\r\nnproc 16\r\n"
               "domain 0 SMT\r\n" + ps.END_MARK + "\r\ncpu0 domain0: SMT flags: SD_X\r\n")
    report, after = ps.split_console(console)
    assert report == "nproc 16\ndomain 0 SMT\n"
    assert after == "cpu0 domain0: SMT flags: SD_X\n"
    assert ps.split_console("no marks") == ("", "")


@pytest.mark.parametrize("name, x86, power", [
    ("smt8", ["SMT", "MC"], ["SMT", "PKG"]),
    ("smt4", ["SMT", "MC"], ["SMT", "PKG"]),
    ("smt4-numa", ["SMT", "MC", "NUMA"], ["SMT", "PKG", "NUMA"]),
    ("1x4x1", ["MC"], ["PKG"]),
])
def test_expected_domains_power(name, x86, power):
    topo = t.parse_topology(name)
    assert topo.expected_domains() == x86
    assert topo.expected_domains(targets.get_target("x86_64").mc_level) == x86
    assert topo.expected_domains(ps.TARGET.mc_level) == power


def test_check_view_uses_the_arch_levels():
    topo = t.PRESETS["smt8"]
    lines = ["nproc 16", "possible 0-15", "online 0-15"]
    lines += [f"cpu {c} {c - c % 8}-{c - c % 8 + 7} {c - c % 8} 0" for c in range(16)]
    lines += ["node 0 0-15", "domain 0 SMT", "domain 1 PKG"]
    view = t.parse_guest_report("\n".join(lines))
    assert t.check_view(topo, view, mc_level=ps.TARGET.mc_level) == []
    assert any("sched domains" in p for p in t.check_view(topo, view))


def test_kunit_tool_command_powerpc():
    cmd = kt.command(Path("/b"), Path("/j.json"), 3, "ccache powerpc64le-linux-gnu-gcc",
                     arch="ppc64le")
    assert "--arch=powerpc-smt8" in cmd
    assert "--cross_compile=powerpc64le-linux-gnu-" in cmd
    assert "--make_options=CC=ccache powerpc64le-linux-gnu-gcc" in cmd
    x86 = kt.command(Path("/b"), Path("/j.json"), 3)
    assert "--arch=x86_64-smt8" in x86
    assert not any(a.startswith("--cross_compile") for a in x86)


def test_initramfs_has_sh_for_init():
    got = {g[0]: g for g in read_newc(ps.cpio_newc(ps.initramfs_entries(b"B", b"I", b"P")))}
    mode, data = got["bin/sh"][1], got["bin/sh"][2]
    assert stat.S_ISLNK(mode) and data == b"busybox"
    assert (PACKAGE / ps.INIT_SCRIPT).read_text().startswith("#!/bin/sh\n")


@pytest.mark.parametrize("text, want", [
    ("QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)", (10, 0)),
    ("QEMU emulator version 7.2.19 (Debian 1:7.2+dfsg-7+deb12u18)", (7, 2)),
    ("garbage", (0, 0)),
])
def test_parse_qemu_version(text, want):
    assert ps.parse_qemu_version(text) == want
    assert (want >= ps.MIN_QEMU) == (want[0] >= 9)


def test_wrapper_script_uses_its_own_data():
    text = ps.wrapper_script(Path("/c/root/usr/bin/qemu-system-ppc64"), Path("/c/root/usr/share/qemu"))
    assert text.startswith("#!/bin/sh\n")
    assert 'exec /c/root/usr/bin/qemu-system-ppc64 -L /c/root/usr/share/qemu -display none ' \
           '-audio none "$@"' in text
