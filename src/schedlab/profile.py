"""The profile stage: the sampled call chains of a run turned into shares of
named functions.

The guest records perf samples of every CPU on a cpu-clock timer with kernel
call chains and no probe attached (guest/run-plan.sh, probe "profile"); under
qemu -icount the guest clock counts instructions, so a share of the busy
samples is a share of the instructions the CPUs executed.  This module runs
on the host after the boot: `perf script` reads each run's perf.data,
addr2line turns every address into the chain of functions inlined there
(update_sd_lb_stats() and select_idle_sibling() have no symbol of their own
in a distribution-like build), and profile.txt gets the counts the parser
reads (probe_parsers.profile).  profile.txt is all that reparse needs.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from .util import LabError

# The functions whose share a profile reports (issue 37, item 2).
FUNCTIONS = ("should_we_balance", "update_sd_lb_stats", "sched_balance_rq",
             "sched_balance_newidle", "select_idle_sibling")
# Samples whose leaf is one of these are a CPU waiting, not executing.
IDLE_LEAVES = frozenset({"pv_native_safe_halt", "native_safe_halt", "arch_safe_halt",
                         "default_idle", "cpu_idle_poll", "mwait_idle_with_hints",
                         "acpi_safe_halt", "poll_idle"})
# The lowest kernel address on the 64-bit arches the lab boots.
KERNEL_FLOOR = 0xffff_0000_0000_0000
OUT = "profile.txt"


@dataclass
class Counts:
    """What profile.txt holds for one run."""
    samples: int = 0
    idle: int = 0
    user: int = 0
    own: Counter = field(default_factory=Counter)      # leaf in F's code (inlined included)
    within: Counter = field(default_factory=Counter)   # F anywhere in the chain

    def text(self) -> str:
        lines = [f"samples {self.samples}", f"idle {self.idle}", f"user {self.user}"]
        lines += [f"own {f} {self.own[f]}" for f in FUNCTIONS]
        lines += [f"within {f} {self.within[f]}" for f in FUNCTIONS]
        return "\n".join(lines) + "\n"

    @classmethod
    def parse(cls, text: str) -> Optional["Counts"]:
        c = cls()
        seen = False
        for line in text.splitlines():
            parts = line.split()
            try:
                if len(parts) == 2 and parts[0] in ("samples", "idle", "user"):
                    setattr(c, parts[0], int(parts[1]))
                    seen = seen or parts[0] == "samples"
                elif len(parts) == 3 and parts[0] in ("own", "within"):
                    getattr(c, parts[0])[parts[1]] = int(parts[2])
            except ValueError:
                return None
        return c if seen else None


def chains(script_out: str) -> List[List[int]]:
    """The call chains of `perf script -F cpu,ip` (a '[CPU]' line, then one
    address a line, leaf first), one list per sample."""
    out: List[List[int]] = []
    for line in script_out.splitlines():
        s = line.strip()
        if s.startswith("["):
            out.append([])
        elif s and out:
            try:
                out[-1].append(int(s.split()[0], 16))
            except ValueError:
                continue
    return out


def parse_addr2line(text: str) -> Dict[int, Tuple[str, ...]]:
    """`addr2line -a -f -i` output: address -> functions there, innermost first."""
    found: Dict[int, List[str]] = {}
    cur: Optional[List[str]] = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith("0x"):
            cur = found.setdefault(int(s, 16), [])
            i += 1
            continue
        if cur is not None and s:
            cur.append(s)
            i += 2          # the function, then its file:line
            continue
        i += 1
    return {a: tuple(f) for a, f in found.items()}


def count(samples: Sequence[Sequence[int]], offset: int,
          funcs_at: Dict[int, Tuple[str, ...]]) -> Counts:
    """Counts of SAMPLES (runtime addresses, leaf first); OFFSET is the
    runtime minus the link address; FUNCS_AT maps link addresses (return
    addresses less one) to their inline chains."""
    c = Counts()
    for chain in samples:
        c.samples += 1
        if not chain or chain[0] < KERNEL_FLOOR:
            c.user += 1
            continue
        leaf = funcs_at.get(chain[0] - offset, ())
        if leaf and leaf[0] in IDLE_LEAVES:
            c.idle += 1
            continue
        for f in set(leaf) & set(FUNCTIONS):
            c.own[f] += 1
        within = set(leaf)
        for ret in chain[1:]:
            if ret >= KERNEL_FLOOR:
                within.update(funcs_at.get(ret - 1 - offset, ()))
        for f in within & set(FUNCTIONS):
            c.within[f] += 1
    return c


def link_addresses(samples: Iterable[Sequence[int]], offset: int) -> List[int]:
    """The link addresses to look up: leaves as they are, return addresses less one."""
    want = set()
    for chain in samples:
        for k, a in enumerate(chain):
            if a >= KERNEL_FLOOR:
                want.add(a - offset - (1 if k else 0))
    return sorted(want)


def symbol(system_map: Path, name: str) -> int:
    for line in system_map.read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    raise LabError(f"{system_map}: no symbol {name}")


def runtime_text(raw: Path) -> Optional[int]:
    """_text as the guest's /proc/kallsyms gave it (guest/run-plan.sh)."""
    f = raw / "kernel-text.txt"
    if not f.is_file():
        return None
    for line in f.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == "_text":
            return int(parts[0], 16)
    return None


def _run(cmd: List[str], stdin: str = "") -> str:
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise LabError(f"{cmd[0]}: {exc}") from exc
    if proc.returncode != 0:
        raise LabError(f"{' '.join(cmd[:3])}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def symbolize_run(run_dir: Path, vmlinux: Path, offset: int) -> Counts:
    data = run_dir / "perf.data"
    samples = chains(_run(["perf", "script", "-i", str(data), "-F", "cpu,ip"]))
    addrs = link_addresses(samples, offset)
    funcs_at = parse_addr2line(_run(["addr2line", "-a", "-f", "-i", "-e", str(vmlinux)],
                                    "".join(f"{a:#x}\n" for a in addrs))) if addrs else {}
    c = count(samples, offset, funcs_at)
    (run_dir / OUT).write_text(c.text())
    return c


def symbolize(raw: Path, vmlinux: Path) -> List[str]:
    """profile.txt for every run folder of RAW that has a perf.data; the
    problems met (a run without one keeps none and its parser says so)."""
    problems = []
    rt = runtime_text(raw)
    if rt is None:
        return [f"{raw}: no kernel-text.txt (the guest did not record where the kernel was)"]
    try:
        offset = rt - symbol(vmlinux.parent / "System.map", "_text")
    except (OSError, LabError) as exc:
        return [f"no link address of _text: {exc}"]
    for data in sorted(raw.glob("*/perf.data")):
        try:
            symbolize_run(data.parent, vmlinux, offset)
        except LabError as exc:
            problems.append(f"{data.parent.name}: {exc}")
    return problems
