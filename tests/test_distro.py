"""The distributions the kit knows: each one's setup plan from os-release,
its tool paths, and the checks that name what is missing."""

import subprocess
import sys
from pathlib import Path

import pytest

from schedlab.core import hostbuild
from schedlab.core.util import LabError
from schedlab.kit import distro, machine

OS_RELEASE = {
    "debian": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'
              'VERSION_ID="12"\nID=debian\n',
    "ubuntu": 'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\n'
              'ID=ubuntu\nID_LIKE=debian\n',
    "fedora": 'NAME="Fedora Linux"\nVERSION="41 (Server Edition)"\nID=fedora\n'
              'VERSION_ID=41\nPRETTY_NAME="Fedora Linux 41 (Server Edition)"\n',
    "rhel": 'NAME="Red Hat Enterprise Linux"\nVERSION="9.4 (Plow)"\nID="rhel"\n'
            'ID_LIKE="fedora"\nVERSION_ID="9.4"\n',
    "rocky": 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\n'
             'VERSION_ID="9.4"\n',
    "sles": 'NAME="SLES"\nVERSION="15-SP6"\nID="sles"\nID_LIKE="suse"\n',
    # Known by its ID_LIKE only.
    "mint": 'NAME="Linux Mint"\nID=linuxmint\nID_LIKE="ubuntu debian"\n',
}


@pytest.mark.parametrize("name, family, manager, perf, bcc", [
    ("debian", "Debian", "apt-get", "linux-perf", "bpfcc-tools"),
    ("ubuntu", "Ubuntu", "apt-get", "linux-tools-common", "bpfcc-tools"),
    ("fedora", "Fedora", "dnf", "perf", "bcc-tools"),
    ("rhel", "RHEL", "dnf", "perf", "bcc-tools"),
    ("rocky", "RHEL", "dnf", "perf", "bcc-tools"),
    ("mint", "Ubuntu", "apt-get", "linux-tools-common", "bpfcc-tools")])
def test_each_distribution_has_its_plan(name, family, manager, perf, bcc):
    d = distro.detect(OS_RELEASE[name], "x86_64")
    assert d.name == family
    cmd = d.install_command()
    assert cmd[0] == manager and perf in cmd and bcc in cmd
    for package in ("bpftrace", "stress-ng", "rt-tests", "dbench", "dwarves"):
        assert package in cmd           # dwarves: pahole, for the kernel's BTF
    for role in ("bpftrace", "bcc", "perf", "bpftool", "stress-ng", "hackbench", "tbench",
                 "kernel build"):
        assert d.packages[role], role
    # Only the kit's packages: nothing of the VM lab.
    assert not any(p.startswith(("qemu", "gcc-powerpc")) for p in cmd)
    text = distro.setup_text(d, "x86_64")
    assert " ".join(cmd) in text
    rpm = manager == "dnf"
    assert ("make binrpm-pkg" if rpm else "make bindeb-pkg") in text
    assert ("rpm -ivh FILES" if rpm else "dpkg -i FILES") in text
    assert ("grub2-reboot 'ENTRY'" if rpm else "grub-reboot 'ENTRY'") in text
    assert d.bcc_dir == ("/usr/share/bcc/tools" if rpm else "")
    assert "petitboot" in distro.setup_text(d, "ppc64le") and "petitboot" not in text


def test_sles_and_arm64_are_left_for_later_and_others_named():
    with pytest.raises(LabError, match="SLES is left for later"):
        distro.detect(OS_RELEASE["sles"], "x86_64")
    with pytest.raises(LabError, match="aarch64 is left for later"):
        distro.detect(OS_RELEASE["debian"], "aarch64")
    with pytest.raises(LabError, match="Arch Linux is not one the kit knows"):
        distro.detect('NAME="Arch Linux"\nID=arch\nPRETTY_NAME="Arch Linux"\n', "x86_64")


@pytest.mark.parametrize("name,install", [("debian", "apt-get install -y --no-install-recommends"),
                                          ("fedora", "dnf install -y")])
def test_hw_check_names_every_missing_piece_with_the_fix_of_the_distribution(
        tmp_path, monkeypatch, name, install):
    # The whole preflight of a distribution kernel without SMT, tools or
    # the series, from fixtures: every missing piece named, each with its
    # fix, the tools' in the distribution's own packages.
    rel = tmp_path / "os-release"
    rel.write_text(OS_RELEASE[name])
    monkeypatch.setattr(distro, "OS_RELEASE", rel)
    monkeypatch.setattr(distro.platform, "machine", lambda: "x86_64")
    sched = tmp_path / "sched"
    sched.mkdir()
    (sched / "features").write_text("GENTLE_FAIR_SLEEPERS\n")
    monkeypatch.setattr(machine, "DEBUG_SCHED", sched)
    monkeypatch.setattr(machine, "config_text", lambda: "CONFIG_DEBUG_FS=y\n")
    real = machine.check_machine
    monkeypatch.setattr(machine, "check_machine", lambda: real(
        tmp_path / "cpu", tmp_path / "smt-active", euid=1000))
    tools = machine.check_tools
    monkeypatch.setattr(machine, "check_tools", lambda: tools(lambda n: None))
    monkeypatch.setattr(machine, "_run_text", lambda argv: (127, ""))
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path / "work"))
    pf = machine.preflight()
    missing = {c.name: c.fix for c in pf.missing()}
    assert {"root", "SMT", "config CONFIG_SCHEDSTATS", "tool bpftrace", "tool perf",
            "tool funclatency-bpfcc", "tool hackbench", "tool tbench",
            "tool stress-ng"} <= set(missing)
    assert all(missing.values()), [n for n, f in missing.items() if not f]
    assert all(f"series: {n.patch}" in missing for n in machine.KERNEL_NEEDS)
    want = {"debian": {"tool perf": "linux-perf", "tool funclatency-bpfcc": "bpfcc-tools",
                       "tool hackbench": "rt-tests", "tool tbench": "dbench"},
            "fedora": {"tool perf": "perf", "tool funclatency-bpfcc": "bcc-tools",
                       "tool hackbench": "rt-tests", "tool tbench": "dbench"}}[name]
    for tool, pkg in want.items():
        assert f"{install} " in missing[tool] and pkg in missing[tool].split(), missing[tool]
    assert "apt-get" not in " ".join(missing.values()) or name == "debian"
    assert "dnf" not in " ".join(missing.values()) or name == "fedora"


def test_bccs_folder_is_searched_where_fedora_keeps_its_tools():
    fedora = {"/usr/share/bcc/tools/funclatency", "/usr/bin/bpftrace"}
    which = lambda p: p if p in fedora else None       # noqa: E731
    assert machine.find_tool(("funclatency-bpfcc", "funclatency"), which) == \
        "/usr/share/bcc/tools/funclatency"
    checks = {c.name: c for c in machine.check_tools(which, distro.DISTROS[2])}
    assert checks["tool funclatency-bpfcc"].ok and not checks["tool perf"].ok
    assert checks["tool perf"].fix == "./schedlab hw --setup, or dnf install -y perf (Fedora)"


def test_a_perf_that_fails_on_this_kernel_is_found_at_the_check():
    ubuntu = ("WARNING: perf not found for kernel 7.3.4-schedlab-patched-0123abcd\n\n"
              "  You may need to install the following packages for this specific kernel:\n"
              "    linux-tools-7.3.4-schedlab-patched-0123abcd-generic\n")
    bad = machine.check_perf(lambda argv: (2, ubuntu))
    assert not bad.ok and "perf not found for kernel" in bad.detail
    assert "make -C TREE/tools/perf" in bad.fix
    good = machine.check_perf(lambda argv: (0, "  1.2 msec task-clock  # 0.5 CPUs utilized"))
    assert good.ok and not good.fix
    assert machine.check_perf(lambda argv: (127, "")) is None


def test_host_config_options_dropped_by_olddefconfig_are_named(monkeypatch):
    asked = "CONFIG_DEBUG_INFO_BTF=y\nCONFIG_SCHEDSTATS=y\n"
    final = "CONFIG_SCHEDSTATS=y\n# CONFIG_DEBUG_INFO_BTF is not set\n"
    assert hostbuild.host_config_lost(asked, final) == {"CONFIG_DEBUG_INFO_BTF": ("y", "n")}
    assert hostbuild.host_config_lost(asked, asked) == {}
    monkeypatch.setattr(hostbuild.shutil, "which", lambda n: n if n == "rpmbuild" else None)
    assert hostbuild.package_target() == "binrpm-pkg"
    monkeypatch.setattr(hostbuild.shutil, "which", lambda n: n if n == "dpkg-deb" else None)
    assert hostbuild.package_target() == "bindeb-pkg"


def test_hw_setup_prints_the_plan_of_the_distribution_here(tmp_path, monkeypatch, capsys):
    from schedlab import cli_kit
    rel = tmp_path / "os-release"
    rel.write_text(OS_RELEASE["fedora"])
    monkeypatch.setattr(distro, "OS_RELEASE", rel)
    monkeypatch.setattr(distro.platform, "machine", lambda: "x86_64")
    assert cli_kit.kit_setup(install=False) == 0
    assert "dnf install -y bpftrace bcc-tools" in capsys.readouterr().out


def test_the_kit_on_a_machine_runs_without_the_labs_venv(tmp_path):
    repo = Path(__file__).resolve().parent.parent
    env = {"PATH": "/usr/bin:/bin", "SCHEDLAB_WORK": str(tmp_path / "work"), "HOME": str(tmp_path)}
    p = subprocess.run([sys.executable, str(repo / "schedlab"), "hw", "--plan", "--rounds", "3"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "arms, each once a round" in p.stdout
    assert not (tmp_path / "work" / "venv").exists()
