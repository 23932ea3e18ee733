"""Out-of-tree kernel builds per tree, variant, config and architecture.

Configs are lists of fragments in the package's configs/, merged with the kernel's own
scripts/kconfig/merge_config.sh on top of the architecture's starting point
(alldefconfig: the kernel's defaults, far smaller than defconfig).
Builds live in work/build/<tree>/<variant>-<config>[-<arch>]/ and are
incremental; ccache is used when present, set up so that another checkout
of the lab in another folder hits the same cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from schedlab.core.source import Tree
from schedlab.core.util import (PACKAGE, LabError, cache_dir, fmt_secs, log_dir, log_says_disk_full,
                                run, run_logged, say, work_dir)

CONFIG_DIR = PACKAGE / "configs"

# Named configs: fragments merged in this order after the arch fragment.
CONFIGS: Dict[str, List[str]] = {
    "lab": ["vng", "lab", "trace"],
    "probe": ["vng", "lab", "trace", "probe"],
    "icount": ["vng", "lab", "trace", "probe", "icount"],
    "debug": ["vng", "lab", "debug"],
    "kcsan": ["vng", "lab", "kcsan"],
}


@dataclass(frozen=True)
class Arch:
    name: str              # the lab's name for it
    karch: str             # ARCH=
    cross_compile: str     # default CROSS_COMPILE= on an x86_64 host
    start: str             # config target the fragments are merged onto
    image: str             # make target and path of the bootable image
    image_path: str
    # Named configs whose fragments differ on this arch (else CONFIGS's).
    configs: Dict[str, List[str]] = field(default_factory=dict)
    # The series check's compile of a cross-compiled arch starts here: a
    # distribution-like config, more of kernel/sched/'s options compiled.
    check_start: str = ""
    # Added to the names of its build folders and logs ('' for the default arch).
    suffix: str = ""


ARCHES: Dict[str, Arch] = {
    "x86_64": Arch("x86_64", "x86_64", "", "alldefconfig", "bzImage",
                   "arch/x86/boot/bzImage"),
    # A pseries guest (configs/ppc64le.config) on the kernel's defaults.
    # Its lab kernel boots a busybox initramfs (pseries.py), not virtme-ng,
    # and runs no BPF tools: without the vng and trace fragments (debug info
    # and BTF above all) a cold build takes about half the time. Its probe
    # kernel is the hardware kit's in the pseries rehearsal (a Debian
    # ppc64el userspace in the initramfs, BPF tools included).
    "ppc64le": Arch("ppc64le", "powerpc", "powerpc64le-linux-gnu-", "alldefconfig",
                    "vmlinux", "vmlinux",
                    configs={"lab": ["lab", "pseries-cpus"],
                             "probe": ["lab", "trace", "probe", "pseries-kit"]},
                    check_start="ppc64le_defconfig", suffix="-ppc64le"),
}


def get_arch(name: Optional[str]) -> Arch:
    name = name or "x86_64"
    if name not in ARCHES:
        raise LabError(f"unknown arch {name!r}; known: {', '.join(ARCHES)}")
    return ARCHES[name]


def config_fragments(config: str, arch: Arch) -> List[Path]:
    if config not in CONFIGS:
        raise LabError(f"unknown config {config!r}; known: {', '.join(CONFIGS)}")
    frags = []
    arch_frag = CONFIG_DIR / f"{arch.name}.config"
    if arch_frag.is_file():
        frags.append(arch_frag)
    frags += [CONFIG_DIR / f"{n}.config" for n in arch.configs.get(config, CONFIGS[config])]
    for f in frags:
        if not f.is_file():
            raise LabError(f"config fragment {f} is missing")
    return frags


_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


def parse_config(text: str) -> Dict[str, str]:
    """CONFIG_X -> value; 'n' for '# CONFIG_X is not set' and X=n."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        m = _SET.match(line)
        if m:
            out[m.group(1)] = m.group(2)
            continue
        m = _UNSET.match(line)
        if m:
            out[m.group(1)] = "n"
    return out


def merge_fragments(texts: List[str]) -> Dict[str, str]:
    """Later fragments override earlier ones, as merge_config.sh does."""
    merged: Dict[str, str] = {}
    for t in texts:
        merged.update(parse_config(t))
    return merged


def config_mismatches(requested: Dict[str, str], final: Dict[str, str]) -> Dict[str, tuple]:
    """Symbols whose final value differs from the requested one."""
    out = {}
    for sym, want in requested.items():
        got = final.get(sym, "n")
        if want.strip('"') != got.strip('"'):
            out[sym] = (want, got)
    return out


def known_symbols(tree: Path, symbols: List[str]) -> set:
    """Which of these symbols some Kconfig file of the tree defines."""
    if not symbols:
        return set()
    names = [s[len("CONFIG_"):] for s in symbols]
    pattern = r"^\s*(menu)?config\s+(" + "|".join(map(re.escape, names)) + r")\s*$"
    proc = run(["git", "-C", str(tree), "grep", "-h", "-E", pattern, "--", "*Kconfig*"],
               capture=True, check=False)
    found = set()
    for line in proc.stdout.splitlines():
        found.add("CONFIG_" + line.split()[-1])
    return found


def ccache_env() -> Dict[str, str]:
    """Environment for reproducible, cache-friendly builds."""
    env = {
        "KBUILD_BUILD_TIMESTAMP": "Thu Jan  1 00:00:00 UTC 2026",
        "KBUILD_BUILD_USER": "schedlab",
        "KBUILD_BUILD_HOST": "schedlab",
    }
    if shutil.which("ccache"):
        env.update({
            "CCACHE_DIR": str(cache_dir() / "ccache"),
            # Paths below the lab's work folder are rewritten relative to the
            # build folder, and the build folder is not hashed: a clean clone in
            # another folder hits the cache filled by this one.
            "CCACHE_BASEDIR": str(work_dir().resolve()),
            "CCACHE_NOHASHDIR": "1",
            "CCACHE_SLOPPINESS": "time_macros,include_file_mtime,include_file_ctime",
            "CCACHE_MAXSIZE": os.environ.get("CCACHE_MAXSIZE", "10G"),
        })
    return env


def make_args(arch: Arch, build_dir: Path, cross: Optional[str] = None) -> List[str]:
    cross = arch.cross_compile if cross is None else cross
    args = ["make", f"O={build_dir}", f"ARCH={arch.karch}", f"-j{(os.cpu_count() or 1) + 1}"]
    if cross:
        args.append(f"CROSS_COMPILE={cross}")
    if shutil.which("ccache"):
        args += [f"CC=ccache {cross}gcc", "HOSTCC=ccache gcc"]
    return args


def build_dir_for(tree: Tree, variant: str, config: str, arch: Arch) -> Path:
    return work_dir() / "build" / tree.key / f"{variant}-{config}{arch.suffix}"


def run_make(cmd: List[str], tree: Path, log: Path, what: str, quiet: bool = False) -> float:
    """Run make in the tree, keep the full log, show progress; returns seconds."""
    env = dict(os.environ)
    env.update(ccache_env())
    progress = _Progress(what, quiet)
    done = run_logged(cmd, log, cwd=tree, env=env, append=True, on_line=progress.line)
    if done.returncode != 0:
        if log_says_disk_full(log):
            raise LabError(f"disk full during {what}: free space under {work_dir()} "
                           f"(log: {log})")
        tail = _error_lines(log)
        raise LabError(f"{what} failed (status {done.returncode}); full log: {log}\n{tail}")
    return done.seconds


class _Progress:
    """Counts the objects make compiles; says how far it got every 30 seconds."""

    def __init__(self, what: str, quiet: bool) -> None:
        self.what, self.quiet = what, quiet
        self.start = self.last_report = time.monotonic()
        self.objects = 0
        self.last_obj = ""

    def line(self, line: str) -> None:
        if line.startswith("  CC ") or line.startswith("  AS "):
            self.objects += 1
            self.last_obj = line.split()[-1]
        now = time.monotonic()
        if not self.quiet and now - self.last_report >= 30:
            self.last_report = now
            say(f"  [{self.what}] {fmt_secs(now - self.start)} elapsed, {self.objects} files "
                f"compiled, last {self.last_obj}")


def merge_config(tree: Tree, out_dir: Path, inputs: List[str], arch: Arch, log: Path) -> None:
    """The kernel's merge_config.sh -m: out_dir/.config from the inputs, in order."""
    done = run_logged([str(tree.path / "scripts/kconfig/merge_config.sh"), "-m", "-O",
                       str(out_dir), *inputs], log, cwd=tree.path,
                      env=dict(os.environ, ARCH=arch.karch), append=True)
    if done.returncode != 0:
        raise LabError(f"merge_config.sh failed (log: {log})")


def _error_lines(log: Path, limit: int = 25) -> str:
    lines = log.read_text(errors="replace").splitlines()
    errs = [ln for ln in lines if "error" in ln.lower() or "Error" in ln]
    return "\n".join((errs or lines)[-limit:])


def configure(tree: Tree, build_dir: Path, config: str, arch: Arch, log: Path,
              cross: Optional[str] = None) -> Dict[str, tuple]:
    """Write build_dir/.config from the fragments; returns the mismatches left."""
    build_dir.mkdir(parents=True, exist_ok=True)
    frags = config_fragments(config, arch)
    base = make_args(arch, build_dir, cross)
    merge_dir = build_dir / ".schedlab"
    merge_dir.mkdir(exist_ok=True)
    inputs = [str(f) for f in frags]
    if arch.start != "alldefconfig":
        run_make(base + [arch.start], tree.path, log, f"make {arch.start}", quiet=True)
        start_cfg = merge_dir / "start.config"
        shutil.copy(build_dir / ".config", start_cfg)
        inputs = [str(start_cfg)] + inputs
    merge_config(tree, merge_dir, inputs, arch, log)
    merged = merge_dir / ".config"
    run_make(base + [f"KCONFIG_ALLCONFIG={merged}", "alldefconfig"], tree.path, log,
             "configure", quiet=True)
    requested = merge_fragments([Path(p).read_text() for p in inputs[-len(frags):]])
    final = parse_config((build_dir / ".config").read_text())
    bad = config_mismatches(requested, final)
    known = known_symbols(tree.path, list(bad))
    for sym, (want, got) in sorted(bad.items()):
        if sym in known:
            say(f"  config: {sym}={want} requested, got {got} (dependencies)")
    absent = sorted(s for s in bad if s not in known)
    if absent:
        say(f"  config: not in this tree: {', '.join(absent)}")
    return {s: v for s, v in bad.items() if s in known}


@dataclass
class BuildResult:
    build_dir: Path
    image: Path
    release: str
    seconds: float
    commit: str


def build(tree: Tree, variant: str, commit: str, config: str = "lab",
          arch_name: Optional[str] = None, cross: Optional[str] = None) -> BuildResult:
    """Build one variant's commit in its own build folder (incrementally)."""
    arch = get_arch(arch_name)
    bdir = build_dir_for(tree, variant, config, arch)
    done = _up_to_date(bdir, commit, config, arch)
    if done:
        say(f"  {bdir} is up to date ({done.release} from {commit[:12]}, same config "
            "fragments): not rebuilt")
        return done
    log = log_dir() / f"build-{tree.key}-{variant}-{config}-{arch.name}.log"
    with tree.locked(f"build {variant}/{config}"):
        # Cleared once the tree is ours: a build waiting for the lock must
        # not empty the log of the one that holds it.
        log.write_text("")
        tree.checkout(commit)
        say(f"  tree {tree.path} at {commit[:12]} ({variant}), build folder {bdir}")
        say(f"  full log: {log}")
        configure(tree, bdir, config, arch, log, cross)
        took = run_make(make_args(arch, bdir, cross) + [arch.image], tree.path, log,
                        f"build {variant}/{config}")
    release = (bdir / "include/config/kernel.release").read_text().strip()
    info = {"variant": variant, "commit": commit, "config": config, "arch": arch.name,
            "release": release, "fragments": [str(p.relative_to(PACKAGE))
                                              for p in config_fragments(config, arch)],
            "tree": str(tree.path), "base": tree.base,
            "fragments_sha": _fragments_sha(config, arch)}
    (bdir / ".schedlab" / "build.json").write_text(json.dumps(info, indent=1) + "\n")
    image = bdir / arch.image_path
    say(f"  built {release} in {fmt_secs(took)}: {image}")
    return BuildResult(bdir, image, release, took, commit)


def _fragments_sha(config: str, arch: Arch) -> str:
    h = hashlib.sha256()
    for p in config_fragments(config, arch):
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def build_info(bdir: Path) -> dict:
    """What the lab recorded of the build in BDIR (commit, release, config), or {}."""
    try:
        info = json.loads((bdir / ".schedlab" / "build.json").read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _up_to_date(bdir: Path, commit: str, config: str, arch: Arch) -> Optional[BuildResult]:
    """The build already there, when it was made from this commit and these fragments.

    Saves the checkout and make that would otherwise relink (and regenerate
    BTF for) a kernel whose sources did not change, when base and patched
    builds take turns in one tree.
    """
    info = build_info(bdir)
    image = bdir / arch.image_path
    if (info.get("commit") != commit or info.get("config") != config
            or info.get("arch") != arch.name or not image.is_file()
            or info.get("fragments_sha") != _fragments_sha(config, arch)):
        return None
    return BuildResult(bdir, image, info["release"], 0.0, commit)


def compile_objects(tree: Tree, build_dir: Path, objects: List[str], arch: Arch,
                    log: Path, w1: bool = True, cross: Optional[str] = None,
                    extra: Sequence[str] = ()) -> List[str]:
    """Compile only these objects (or folders ending in /, or .i targets);
    returns warning lines. @extra: more make arguments (KCFLAGS=...)."""
    if not objects:
        return []
    args = make_args(arch, build_dir, cross) + list(extra)
    if w1:
        args.append("W=1")
    mark = log.stat().st_size if log.exists() else 0
    run_make(args + objects, tree.path, log, "compile " + " ".join(objects), quiet=True)
    with open(log, errors="replace") as f:
        f.seek(mark)
        out = f.read()
    return [ln for ln in out.splitlines() if "warning:" in ln]


def prepare(tree: Tree, build_dir: Path, config: str, arch: Arch, log: Path,
            cross: Optional[str] = None) -> None:
    """Configure and run 'make prepare' so single objects can be compiled."""
    configure(tree, build_dir, config, arch, log, cross)
    run_make(make_args(arch, build_dir, cross) + ["prepare"], tree.path, log,
             f"prepare {arch.name}")
