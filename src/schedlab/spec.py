"""Typed requests: which tree, which build, how to boot.

The command line turns its options into these (cli.py); the stages take
them instead of an argparse namespace, so a stage cannot read an option its
command does not have.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import List, Optional, Tuple

from . import build as buildmod
from . import series, source, topics
from .util import LabError, say


@dataclass(frozen=True)
class TreeSpec:
    """The kernel tree: yours (--kernel, --base) or Debian's linux-source-7.3."""
    kernel: Optional[str] = None
    base: Optional[str] = None

    def resolve(self) -> source.Tree:
        return source.resolve_tree(self.kernel, self.base)


@dataclass(frozen=True)
class BuildSpec:
    """One kernel build: the series variant, config fragment set, architecture."""
    variant: str = "patched"
    config: str = "lab"
    arch: Optional[str] = None
    measure: bool = False       # with the measurement series (patches/measure/)
    no_build: bool = False      # use what is built, without an incremental build
    kit: bool = False           # and the hardware kit's switches (patches/kit/)

    @property
    def name(self) -> str:
        return self.variant + ("+measure" if self.measure or self.kit else "") + \
            ("+kit" if self.kit else "")

    def with_(self, **changes) -> "BuildSpec":
        return replace(self, **changes)


# The build every measurement uses: the probe config with the measurement
# series; under icount the same with JUMP_LABEL on (configs/icount.config),
# static keys patched as distributions have them.
def probe_build(variant: str, no_build: bool = False, arch: Optional[str] = None,
                accel: str = "auto") -> BuildSpec:
    config = "icount" if accel == "icount" else "probe"
    return BuildSpec(variant, config, arch, True, no_build)


@dataclass(frozen=True)
class VmOptions:
    """How to boot the lab VM."""
    online: Optional[int] = None
    memory: int = 2048
    append: Tuple[str, ...] = ()
    timeout: float = 900
    no_check: bool = False
    verbose: bool = False
    rwdirs: Tuple[Path, ...] = field(default_factory=tuple)
    accel: str = "auto"         # or "icount" (vm.py)
    retry_hung: bool = False    # a boot that times out is booted once more (vm.boot)

    def with_(self, **changes) -> "VmOptions":
        return replace(self, **changes)


def built(tree: source.Tree, spec: BuildSpec) -> buildmod.BuildResult:
    """The kernel of SPEC: built (incrementally) or, with no_build, found."""
    if spec.no_build:
        arch = buildmod.get_arch(spec.arch)
        bdir = buildmod.build_dir_for(tree, spec.name, spec.config, arch)
        image = bdir / arch.image_path
        if not image.is_file():
            raise LabError(f"--no-build: nothing built at {image}")
        say(f"  using the kernel already built in {bdir} (--no-build)")
        info = buildmod.build_info(bdir)
        return buildmod.BuildResult(bdir, image, info.get("release", ""), 0.0,
                                    info.get("commit", ""))
    commit = series.ensure_variant(tree, spec.variant, spec.measure,
                                   topics.variant_series(spec.variant), spec.kit)
    return buildmod.build(tree, spec.name, commit, spec.config, spec.arch)


def topologies(given: Optional[List[str]], default: List[str]) -> List[str]:
    return list(given) if given else list(default)
