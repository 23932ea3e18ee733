"""The distributions the kit runs on, as data: how each installs what the kit
needs, where it keeps the tools, how it installs a kernel and boots it once.

Debian, Ubuntu, Fedora and RHEL (and its rebuilds); SLES and arm64 are
left for later and refused with that said.  `./schedlab hw --setup` installs
the kit's packages only (not the VM lab's qemu and cross compilers); after
it the kit runs offline.
"""

from __future__ import annotations

import platform
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from schedlab.core.util import LabError
from schedlab.measuring.plan import BCC_DIR

OS_RELEASE = Path("/etc/os-release")
ARCHES = ("x86_64", "ppc64le")

# What the kit runs and what builds a kernel, by role; each distribution
# names its packages for them.
ROLES = ("bpftrace", "bcc", "libbpf-tools", "perf", "bpftool", "stress-ng", "hackbench",
         "tbench", "kernel build")


@dataclass(frozen=True)
class Distro:
    """One distribution family: the os-release IDs that select it, its
    package manager's install command, its packages by role, where bcc's
    tools are, the make target that packages a kernel, how that package is
    installed, how an entry is booted once, and what to know first."""
    name: str
    ids: Tuple[str, ...]
    install: Tuple[str, ...]
    packages: Dict[str, Tuple[str, ...]]
    bcc_dir: str
    kernel_target: str
    install_kernel: str         # {packages}: the files the build made
    boot_once: str              # {entry}: the boot entry's title or id
    note: str = ""
    # What names and sets the default boot entry: "grub" (grub.cfg, grubenv,
    # grub-set-default) or "grubby" (its --default-kernel, --set-default).
    boot_tool: str = "grub"

    def install_command(self) -> List[str]:
        return [*self.install, *[p for role in ROLES for p in self.packages.get(role, ())]]


_DEB_BUILD = ("build-essential", "bc", "bison", "flex", "libelf-dev", "libssl-dev", "dwarves",
              "cpio", "kmod", "rsync", "zstd", "git", "python3")
_RPM_BUILD = ("gcc", "make", "bc", "bison", "flex", "elfutils-libelf-devel", "openssl-devel",
              "dwarves", "cpio", "kmod", "rsync", "zstd", "git", "python3", "rpm-build")
_APT = ("apt-get", "install", "-y", "--no-install-recommends")
_DNF = ("dnf", "install", "-y")

DISTROS = (
    Distro("Debian", ("debian",), _APT,
           {"bpftrace": ("bpftrace",), "bcc": ("bpfcc-tools",),
            "libbpf-tools": ("libbpf-tools",), "perf": ("linux-perf",),
            "bpftool": ("bpftool",), "stress-ng": ("stress-ng",), "hackbench": ("rt-tests",),
            "tbench": ("dbench",), "kernel build": _DEB_BUILD},
           "", "bindeb-pkg", "dpkg -i {packages}", "grub-reboot '{entry}' && reboot"),
    Distro("Ubuntu", ("ubuntu",), _APT,
           {"bpftrace": ("bpftrace",), "bcc": ("bpfcc-tools",),
            # perf and bpftool: /usr/bin/perf is a wrapper that runs the
            # linux-tools package of the running kernel, which a kernel of
            # your own has not: the check finds it and names the fix.
            "perf": ("linux-tools-common",), "bpftool": ("linux-tools-common",),
            "stress-ng": ("stress-ng",), "hackbench": ("rt-tests",), "tbench": ("dbench",),
            "kernel build": _DEB_BUILD},
           "", "bindeb-pkg", "dpkg -i {packages}", "grub-reboot '{entry}' && reboot",
           "perf: Ubuntu's /usr/bin/perf runs only with linux-tools of the running kernel; "
           "on a kernel of your own build the tree's: make -C TREE/tools/perf"),
    Distro("Fedora", ("fedora",), _DNF,
           {"bpftrace": ("bpftrace",), "bcc": ("bcc-tools",), "libbpf-tools": ("libbpf-tools",),
            "perf": ("perf",), "bpftool": ("bpftool",), "stress-ng": ("stress-ng",),
            "hackbench": ("rt-tests",), "tbench": ("dbench",), "kernel build": _RPM_BUILD},
           BCC_DIR, "binrpm-pkg", "rpm -ivh {packages}", "grub2-reboot '{entry}' && reboot",
           boot_tool="grubby"),
    Distro("RHEL", ("rhel", "centos", "rocky", "almalinux"), _DNF,
           {"bpftrace": ("bpftrace",), "bcc": ("bcc-tools",), "perf": ("perf",),
            "bpftool": ("bpftool",), "stress-ng": ("stress-ng",), "hackbench": ("rt-tests",),
            "tbench": ("dbench",), "kernel build": _RPM_BUILD},
           BCC_DIR, "binrpm-pkg", "rpm -ivh {packages}", "grub2-reboot '{entry}' && reboot",
           "dbench comes from EPEL (dnf install epel-release first); rt-tests from the "
           "RT or AppStream repository", boot_tool="grubby"),
)
LATER = {"sles": "SLES", "opensuse-leap": "openSUSE", "opensuse-tumbleweed": "openSUSE",
         "suse": "SLES"}
# Booting an entry once on POWER: petitboot's menu at the console, or the
# distribution's grub where the LPAR boots grub.
POWER_BOOT = "on POWER: pick the entry in petitboot's menu at the console (or as above)"


def parse_os_release(text: str) -> Dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = " ".join(shlex.split(value)) if value.strip() else ""
    return out


def detect(os_release: str, arch: str) -> Distro:
    """The Distro of an os-release text on ARCH; refused, with what is
    supported, for any other."""
    fields = parse_os_release(os_release)
    ids = [fields.get("ID", "")] + fields.get("ID_LIKE", "").split()
    if arch not in ARCHES:
        raise LabError(f"hw: {arch} is left for later: the kit runs on "
                       f"{' and '.join(ARCHES)} (README, 'Measuring on real SMT hardware')")
    later = [LATER[i] for i in ids if i in LATER]
    if later:
        raise LabError(f"hw: {later[0]} is left for later: the kit knows "
                       + ", ".join(d.name for d in DISTROS))
    for i in ids:
        for d in DISTROS:
            if i in d.ids:
                return d
    name = fields.get("PRETTY_NAME") or fields.get("ID") or "this distribution"
    raise LabError(f"hw: {name} is not one the kit knows ("
                   + ", ".join(d.name for d in DISTROS) + "): install by hand what "
                   "'./schedlab hw --check' names")


def here() -> Distro:
    try:
        text = OS_RELEASE.read_text()
    except OSError:
        text = ""
    return detect(text, platform.machine())


def tool_fix(d: Distro, roles: Sequence[str]) -> str:
    """How to add a tool of ROLES on D: `hw --setup`, or its packages
    alone."""
    pkgs = list(dict.fromkeys(p for r in roles for p in d.packages.get(r, ())))
    return "./schedlab hw --setup" + (f", or {shlex.join([*d.install, *pkgs])} ({d.name})"
                                      if pkgs else "")


def setup_text(d: Distro, arch: str) -> str:
    """What `hw --setup` does and what comes after, for D on ARCH."""
    lines = [f"hw --setup on {d.name} ({arch}): the kit's tools and what builds a kernel",
             "  " + shlex.join(d.install_command())]
    if d.note:
        lines.append(f"  note: {d.note}")
    lines.append("  and schbench, not packaged: cloned and built at the kit's pinned commit "
                 "into work/bench/ (without the network: hw --bench-dir DIR)")
    lines += ["then, from your tree (the commands print the files they make):",
              "  ./schedlab build --host-config --kernel TREE                 "
              f"# make {d.kernel_target}",
              "  ./schedlab build --host-config --kernel TREE --variant base  # the stock kernel",
              f"  {d.install_kernel.format(packages='FILES')}   # each, as root",
              "  (or add --install to each build command: installed, the default entry "
              "kept unless --make-default)",
              "the default boot entry stays as it is: boot a kernel once with",
              f"  {d.boot_once.format(entry='ENTRY')}"]
    if arch == "ppc64le":
        lines.append(f"  {POWER_BOOT}")
    return "\n".join(lines)
