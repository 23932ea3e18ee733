"""Setup: the Debian packages and the project venv (PyPI) the lab needs.

The first run installs what is missing and says what it installs; without
root it stops with the list of packages to install.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Dict, List

from .util import LabError, REPO, log_dir, run, say, work_dir

# Debian package -> what the lab uses it for.
DEBIAN_PACKAGES: Dict[str, str] = {
    "git": "trees and the series",
    "build-essential": "kernel builds",
    "bc": "kernel builds",
    "bison": "kernel builds",
    "flex": "kernel builds",
    "libelf-dev": "kernel builds (objtool)",
    "libssl-dev": "kernel builds",
    "dwarves": "pahole, for BTF in the probe config",
    "cpio": "kernel builds (IKHEADERS)",
    "kmod": "kernel builds",
    "rsync": "kernel builds",
    "xz-utils": "unpacking linux-source",
    "zstd": "kernel builds",
    "ccache": "faster rebuilds",
    "perl": "checkpatch.pl",
    "python3-venv": "the project venv",
    "qemu-system-x86": "booting the lab kernel",
    "gcc-powerpc64le-linux-gnu": "the ppc64le compile check of kernel/sched/",
    "udev": "virtme-ng's guest init names the virtio console ports with it",
    "procps": "guest tools",
    "iproute2": "guest tools",
    "rt-tests": "hackbench",
    "stress-ng": "stress-ng workloads",
    "dbench": "dbench and tbench",
    "bpftrace": "bpftrace probes",
    "libbpf-tools": "libbpf-tools funclatency",
    "bpfcc-tools": "bcc funclatency",
    "linux-perf": "perf bench sched",
    "python3-matplotlib": "the PNG plots of compare and ab",
}

# PyPI packages installed into the project venv (work/venv).
PYPI_PACKAGES: List[str] = [
    "virtme-ng==1.42",
    "pytest>=7",
    # checkpatch.pl runs scripts/spdxcheck.py, which needs these.
    "ply",
    "GitPython",
]


def venv_dir() -> Path:
    return work_dir() / "venv"


def venv_bin(name: str) -> Path:
    return venv_dir() / "bin" / name


def missing_debian(packages: List[str]) -> List[str]:
    missing = []
    for pkg in packages:
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg],
                              capture_output=True, text=True)
        if proc.returncode != 0 or "install ok installed" not in proc.stdout:
            missing.append(pkg)
    return missing


def _apt_install(pkgs: List[str], log: Path) -> bool:
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "--no-install-recommends"]
    return run(cmd + pkgs, env=env, log=log, check=False).returncode == 0


def ensure_debian(packages: List[str] | None = None) -> None:
    packages = packages or list(DEBIAN_PACKAGES)
    missing = missing_debian(packages)
    if not missing:
        say("  Debian packages: all present")
        return
    listing = "\n".join(f"  {p:<28} {DEBIAN_PACKAGES.get(p, '')}" for p in missing)
    if os.geteuid() != 0:
        raise LabError("these Debian packages are missing and installing them needs root:\n"
                       f"{listing}\nas root: apt-get install {' '.join(missing)}")
    log = log_dir() / "setup.log"
    say(f"  installing Debian packages (log: {log}):\n{listing}")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "update"], env=env, log=log, check=False)
    if _apt_install(missing, log):
        return
    # A half-configured earlier install blocks everything: repair once, retry.
    run(["apt-get", "-f", "install", "-y"], env=env, log=log, check=False)
    if _apt_install(missing, log):
        return
    failed = [p for p in missing if not _apt_install([p], log)]
    raise LabError(f"apt could not install: {' '.join(failed) or ' '.join(missing)} "
                   f"(log: {log})")


def _requirements_key() -> str:
    return hashlib.sha256("\n".join(PYPI_PACKAGES + [sys.version]).encode()).hexdigest()[:16]


def ensure_venv() -> Path:
    vdir = venv_dir()
    marker = vdir / ".schedlab-requirements"
    if marker.is_file() and marker.read_text().strip() == _requirements_key() \
            and venv_bin("vng").exists():
        return vdir
    log = log_dir() / "setup.log"
    say(f"  creating the project venv {vdir} with: {' '.join(PYPI_PACKAGES)}")
    if not venv_bin("python").exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(vdir)
    pip = [str(venv_bin("python")), "-m", "pip", "install", "-q",
           "--disable-pip-version-check"]
    if run(pip + PYPI_PACKAGES, log=log, check=False).returncode != 0:
        failed = [p for p in PYPI_PACKAGES if run(pip + [p], log=log, check=False).returncode]
        raise LabError(f"pip could not install: {' '.join(failed or PYPI_PACKAGES)} "
                       f"(log: {log})")
    marker.write_text(_requirements_key() + "\n")
    return vdir


def setup() -> None:
    ensure_debian()
    ensure_venv()


def venv_env() -> dict:
    """Environment whose python3 is the venv's (for the tree's own scripts)."""
    env = dict(os.environ)
    env["PATH"] = f"{venv_bin('python').parent}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


def pytest_cmd() -> List[str]:
    return [str(venv_bin("python")), "-m", "pytest", "-q", str(REPO / "tests")]
