"""Typed requests: which tree, which build, how to boot.

The command line turns its options into these (cli.py); the stages take
them instead of an argparse namespace, so a stage cannot read an option its
command does not have.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import List, Optional, Tuple

from schedlab.core import source


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


def topologies(given: Optional[List[str]], default: List[str]) -> List[str]:
    return list(given) if given else list(default)
