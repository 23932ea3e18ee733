"""Setup: the Debian packages and the project venv the lab needs.

The first run installs what is missing and says what it installs; without
root it stops with the list of packages to install.  The venv's packages
are the [project] dependencies of pyproject.toml.  Only the standard library
is used here: the ./schedlab wrapper runs this with the system python to
make the venv it then runs in.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import venv
from pathlib import Path
from typing import Dict, List, Tuple

from schedlab.core.util import PACKAGE, LabError, log_dir, repo_dir, run, say, work_dir

# The binaries guest plans run -> the Debian package that has each (for the
# "missing tool" messages of measure, and the packages setup installs).
GUEST_TOOLS: Dict[str, str] = {
    "bpftrace": "bpftrace",
    "stress-ng": "stress-ng",
    "hackbench": "rt-tests",
    "perf": "linux-perf",
    "dbench": "dbench",
    "tbench": "dbench",
    "tbench_srv": "dbench",
    "funclatency-bpfcc": "bpfcc-tools",
    "funclatency": "libbpf-tools",
}


def _guest_tool_packages() -> Dict[str, str]:
    out: Dict[str, List[str]] = {}
    for binary, pkg in GUEST_TOOLS.items():
        out.setdefault(pkg, []).append(binary)
    return {pkg: "guest tools: " + ", ".join(bins) for pkg, bins in out.items()}


# Debian package -> what the lab uses it for.
DEBIAN_PACKAGES: Dict[str, str] = {
    "git": "trees and the series",
    "build-essential": "kernel builds",
    "bc": "kernel builds",
    "bison": "kernel builds",
    "flex": "kernel builds",
    "libelf-dev": "kernel builds (objtool)",
    "libssl-dev": "kernel builds",
    "dwarves": "pahole, for BTF in the lab and probe configs",
    "cpio": "kernel builds (IKHEADERS)",
    "kmod": "kernel builds",
    "rsync": "kernel builds",
    "xz-utils": "unpacking linux-source",
    "zstd": "kernel builds",
    "ccache": "faster rebuilds",
    "perl": "checkpatch.pl",
    "python3-venv": "the project venv",
    "qemu-system-x86": "booting the lab kernel",
    "qemu-system-ppc": "booting the ppc64le lab kernel (qemu's pseries machine)",
    "gcc-powerpc64le-linux-gnu": "the ppc64le compile check of kernel/sched/",
    "udev": "virtme-ng's guest init names the virtio console ports with it",
    "procps": "guest tools",
    "iproute2": "guest tools",
    **_guest_tool_packages(),
    "python3-matplotlib": "the PNG plots of compare and ab",
    "shellcheck": "lint of the guest scripts",
    "sparse": "sparse C=2 over kernel/sched/ in the config matrix",
}


# The optional dependencies the project venv installs beside the runtime
# ones: the plots of compare and ab, and what ./schedlab test runs.
LAB_EXTRAS = ("plots", "dev")


def venv_requirements() -> List[str]:
    """The venv's packages: the [project] dependencies and LAB_EXTRAS of this
    source's pyproject.toml, or of the installed distribution's metadata when
    there is no source."""
    pyproject = PACKAGE.parents[1] / "pyproject.toml"
    if pyproject.is_file():
        return _pyproject_dependencies(pyproject.read_text(), LAB_EXTRAS)
    from importlib import metadata
    out = []
    for req in metadata.requires("schedlab") or []:
        name, _, marker = req.partition(";")
        extra = re.search(r"extra\s*==\s*[\"']([^\"']+)[\"']", marker)
        if not extra or extra.group(1) in LAB_EXTRAS:
            out.append(name.strip())
    return out


def _pyproject_dependencies(text: str, extras: Tuple[str, ...] = ()) -> List[str]:
    """[project] dependencies, then those of each named optional group."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11: the few arrays this needs
        return _array(text, "project", "dependencies") + \
            [r for e in extras for r in _array(text, "project.optional-dependencies", e)]
    project = tomllib.loads(text).get("project", {})
    optional = project.get("optional-dependencies", {})
    return list(project.get("dependencies", [])) + [r for e in extras for r in optional.get(e, [])]


def _array(text: str, table: str, key: str) -> List[str]:
    """The strings of one array of strings, KEY in [TABLE] (without tomllib)."""
    section = re.search(rf"^\[{re.escape(table)}\]$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    # The array ends at a ']' that ends its line ("a[b]" is a string's).
    m = section and re.search(rf"^{re.escape(key)}\s*=\s*\[(.*?)\]\s*$", section.group(1),
                              re.M | re.S)
    body = re.sub(r"#.*", "", m.group(1)) if m else ""
    return re.findall(r"[\"']([^\"']+)[\"']", body)


def venv_dir() -> Path:
    return work_dir() / "venv"


def venv_bin(name: str) -> Path:
    return venv_dir() / "bin" / name


def missing_debian(packages: List[str]) -> List[str]:
    missing = []
    for pkg in packages:
        proc = run(["dpkg-query", "-W", "-f=${Status}", pkg], capture=True, check=False)
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


def _requirements_key(reqs: List[str]) -> str:
    return hashlib.sha256("\n".join(reqs + [sys.version]).encode()).hexdigest()[:16]


def ensure_venv() -> Path:
    """work/venv with the pyproject dependencies; a no-op when up to date."""
    vdir = venv_dir()
    reqs = venv_requirements()
    marker = vdir / ".schedlab-requirements"
    if marker.is_file() and marker.read_text().strip() == _requirements_key(reqs) \
            and venv_bin("vng").exists():
        return vdir
    log = log_dir() / "setup.log"
    say(f"  setting up the project venv {vdir} with: {' '.join(reqs)} (log: {log})")
    if not venv_bin("python").exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(vdir)
    pip = [str(venv_bin("python")), "-m", "pip", "install", "-q",
           "--disable-pip-version-check"]
    if run(pip + reqs, log=log, check=False).returncode != 0:
        failed = [p for p in reqs if run(pip + [p], log=log, check=False).returncode]
        raise LabError(f"pip could not install: {' '.join(failed or reqs)} "
                       f"(log: {log})")
    marker.write_text(_requirements_key(reqs) + "\n")
    return vdir


def setup() -> None:
    ensure_debian()
    ensure_venv()


def venv_env() -> dict:
    """Environment whose python3 is the venv's (for the tree's own scripts)."""
    env = dict(os.environ)
    env["PATH"] = f"{venv_bin('python').parent}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


def mypy_cmd() -> List[str]:
    """mypy over the package, with pyproject's [tool.mypy] settings when there is a source."""
    cmd = [str(venv_bin("python")), "-m", "mypy", "--ignore-missing-imports"]
    pyproject = PACKAGE.parents[1] / "pyproject.toml"
    if pyproject.is_file():
        cmd += ["--config-file", str(pyproject)]
    return cmd + [str(PACKAGE)]


def pytest_cmd(marks: str = "not tree") -> List[str]:
    """The lab's tests that MARKS selects: by default those that need no
    kernel tree (tests/conftest.py)."""
    return [str(venv_bin("python")), "-m", "pytest", "-q", "-m", marks,
            str(repo_dir() / "tests")]
