"""Kernels for the machine the lab runs on: its own config with what the
kit needs, the release naming the variant and its sources, packaged the
distribution's way.

Detail: docs/modules.md, section core/hostbuild.py.
"""

from __future__ import annotations

import gzip
import os
import platform
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional

from schedlab.core.build import (ARCHES, CONFIG_DIR, Arch, build_dir_for, config_mismatches,
                                 make_args, merge_config, parse_config, run_make)
from schedlab.core.source import Tree
from schedlab.core.util import LabError, fmt_secs, log_dir, run, say, work_dir


def native_arch() -> Arch:
    """The Arch of this machine, compiled natively (no CROSS_COMPILE)."""
    machine = platform.machine()
    if machine not in ARCHES:
        raise LabError(f"host kernels are built for {' and '.join(ARCHES)}; this is {machine}")
    return replace(ARCHES[machine], cross_compile="", configs={})


PROC_CONFIG = Path("/proc/config.gz")
BOOT_DIR = Path("/boot")


def running_config_text() -> str:
    """The running kernel's config: /proc/config.gz, else /boot/config-$(uname -r);
    empty when there is neither."""
    try:
        if PROC_CONFIG.is_file():
            return gzip.decompress(PROC_CONFIG.read_bytes()).decode(errors="replace")
        boot = BOOT_DIR / f"config-{os.uname().release}"
        if boot.is_file():
            return boot.read_text(errors="replace")
    except (OSError, EOFError, gzip.BadGzipFile):
        pass
    return ""


def host_config_source(path: Optional[str]) -> Path:
    """The config to start from: the given file, else the running kernel's
    (written under work/host-config/)."""
    if path and path != "running":
        p = Path(path)
        if not p.is_file():
            raise LabError(f"no config file at {p}")
        return p
    release = os.uname().release
    text = running_config_text()
    if not text:
        raise LabError(f"the running kernel's config is in neither {PROC_CONFIG} nor "
                       f"{BOOT_DIR}/config-{release}: pass --host-config FILE")
    out = work_dir() / "host-config" / f"config-{release}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out


# The length of the sources' hash in a host kernel's release.
SOURCES_ID = 8


def host_config_edits(variant: str, sources: str) -> List[str]:
    """scripts/config arguments applied to the host config (pure): the
    release names the variant and the hash of the sources it was built from
    (Tree.content_id()), so that a kernel rebuilt from a changed series has
    another release."""
    return ["--set-str", "LOCALVERSION", f"-schedlab-{variant}-{sources[:SOURCES_ID]}",
            "--disable", "LOCALVERSION_AUTO",
            # Distribution configs point at key files that are not in a plain tree.
            "--set-str", "SYSTEM_TRUSTED_KEYS", "",
            "--set-str", "SYSTEM_REVOCATION_KEYS", "",
            "--set-str", "BUILD_SALT", ""]


@dataclass
class HostBuild:
    build_dir: Path
    release: str
    files: List[Path]      # the packages made, to install ([] for a plain build)


def build_host(tree: Tree, variant: str, commit: str, config_src: Path,
               localmodconfig: bool = False, package: Optional[bool] = None,
               configure_only: bool = False, pkg_target: Optional[str] = None) -> HostBuild:
    """An installable kernel for this machine: the host's config, LOCALVERSION
    -schedlab-VARIANT-SOURCES, the measurement series applied by the caller's commit;
    Debian packages (bindeb-pkg) where dpkg exists, RPMs (binrpm-pkg) where
    rpmbuild does, else a plain build; refused when olddefconfig dropped an
    option the kit needs."""
    arch = native_arch()
    bdir = build_dir_for(tree, variant, "host", arch)
    log = log_dir() / f"build-{tree.key}-{variant}-host-{arch.name}.log"
    log.write_text("")
    if package is None:
        package = bool(shutil.which("dpkg-deb") or shutil.which("rpmbuild"))
    with tree.locked(f"build {variant}/host"):
        tree.checkout(commit)
        bdir.mkdir(parents=True, exist_ok=True)
        say(f"  tree {tree.path} at {commit[:12]} ({variant}), host config {config_src}, "
            f"build folder {bdir}\n  full log: {log}")
        merge_dir = bdir / ".schedlab"
        merge_dir.mkdir(exist_ok=True)
        merge_config(tree, merge_dir, [str(config_src), str(CONFIG_DIR / "host.config")],
                     arch, log)
        shutil.copy(merge_dir / ".config", bdir / ".config")
        run([str(tree.path / "scripts/config"), "--file", str(bdir / ".config"),
             *host_config_edits(variant, tree.content_id(commit))], log=log)
        base = make_args(arch, bdir)
        if localmodconfig:
            lsmod = merge_dir / "lsmod.txt"
            lsmod.write_text(run(["lsmod"], capture=True, check=False).stdout)
            run_make(base + [f"LSMOD={lsmod}", "localmodconfig"], tree.path, log,
                     "localmodconfig", quiet=True)
        run_make(base + ["olddefconfig"], tree.path, log, "configure", quiet=True)
        lost = host_config_lost((CONFIG_DIR / "host.config").read_text(),
                                (bdir / ".config").read_text())
        if lost:
            raise LabError("build --host-config: olddefconfig dropped what the kit needs: "
                           + ", ".join(f"{k} ({v[0]} asked, {v[1]} now)"
                                       for k, v in lost.items())
                           + "; CONFIG_DEBUG_INFO_BTF needs pahole (Debian and Fedora: the "
                           f"package dwarves), the others their dependencies (log: {log})")
        release = run_make_output(base + ["-s", "kernelrelease"], tree.path)
        say(f"  configured {release}")
        if configure_only:
            return HostBuild(bdir, release, [])
        target = [pkg_target or package_target()] if package else []
        took = run_make(base + target, tree.path, log, f"build {variant}/host")
    files = packages_made(bdir, release, target == ["bindeb-pkg"]) if package else []
    if package and target == ["bindeb-pkg"]:
        say(f"  built {release} in {fmt_secs(took)}; install the image and headers with: "
            "sudo dpkg -i " + " ".join(str(d) for d in files or
                                       [bdir.parent / f"linux-*-{release}_*.deb"]))
    elif package:
        say(f"  built {release} in {fmt_secs(took)}; install the kernel and headers with: "
            "sudo rpm -ivh " + " ".join(str(r) for r in files or
                                        [bdir / "rpmbuild/RPMS/*" /
                                         f"kernel{{,-devel}}-{release.replace('-', '_')}-*.rpm"]))
    else:
        say(f"  built {release} in {fmt_secs(took)}; install with: sudo make O={bdir} "
            "modules_install install (from the tree)")
    return HostBuild(bdir, release, files)


def packages_made(bdir: Path, release: str, deb: bool) -> List[Path]:
    """The packages of RELEASE the build in BDIR made: bindeb-pkg's image
    and headers beside it (linux-libc-dev, the uapi headers for userspace,
    left out), or binrpm-pkg's RPMs under it (the version is the release
    with '_' for '-'); not those of an earlier release."""
    if deb:     # linux-image-RELEASE_*, linux-headers-RELEASE_*
        found = list(bdir.parent.glob(f"linux-*-{release}_*.deb"))
    else:       # kernel and kernel-devel; kernel-headers, the uapi, is the distribution's
        version = release.replace("-", "_")
        found = [r for r in bdir.glob("rpmbuild/RPMS/*/kernel-*.rpm")
                 if r.name.startswith((f"kernel-{version}-", f"kernel-devel-{version}-"))]
    # A rebuild of the same release makes another revision: only the newest.
    newest: Dict[str, Path] = {}
    for f in sorted(found, key=lambda p: p.stat().st_mtime):
        newest[f.name.split("_")[0] if deb else
               f.name.split(f"-{release.replace('-', '_')}-")[0]] = f
    return sorted(newest.values())


def package_target() -> str:
    """The make target that packages a kernel the distribution's way: Debian
    packages where dpkg is, RPMs where rpmbuild is."""
    return "bindeb-pkg" if shutil.which("dpkg-deb") else "binrpm-pkg"


def host_config_lost(requested: str, final: str) -> Dict[str, tuple]:
    """The options of host.config (REQUESTED) that the final config does not
    have as asked: olddefconfig drops an option whose dependencies are not
    met (BTF without pahole, say), and the kit's probes need each."""
    return config_mismatches(parse_config(requested), parse_config(final))


def run_make_output(cmd: List[str], tree: Path) -> str:
    return run(cmd, cwd=tree, capture=True, check=False).stdout.strip()
