"""Instruction counts under qemu -icount: the calibration of the cost probes.

With `-icount shift=0,sleep=off` (single-thread TCG) the guest clock
advances one ns per instruction of the running vCPU, so a probe's entry and
exit timestamps count the instructions in between: the function's and the
probe's own.  The probe's own are measured on idle_cpu(), whose paths are
short and fixed: before the runs, the cost program is attached to it alone
(guest/run-plan.sh), and its most frequent durations are compared with the
lengths of its paths, counted in the build's vmlinux (objdump).

- overhead = the shortest frequent duration - the shortest path;
- the check of "one ns = one instruction": the distance between the two most
  frequent durations against the distance between the two paths.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from . import parsers

FUNCTION = "idle_cpu"
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*(\S+)\s*(.*)$")


def disassemble(vmlinux: Path, function: str = FUNCTION) -> List[Tuple[int, str, str]]:
    """(address, mnemonic, operands) of FUNCTION's instructions (objdump)."""
    nm = subprocess.run(["nm", str(vmlinux)], capture_output=True, text=True, check=True)
    addr = next((ln.split()[0] for ln in nm.stdout.splitlines()
                 if ln.split()[-1:] == [function] and ln.split()[1] in "tT"), None)
    if addr is None:
        return []
    start = int(addr, 16)
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={start}",
                          f"--stop-address={start + 512}", str(vmlinux)],
                         capture_output=True, text=True, check=True).stdout
    return parse_objdump(out)


def parse_objdump(text: str) -> List[Tuple[int, str, str]]:
    insns = []
    started = False
    for line in text.splitlines():
        if re.match(r"^[0-9a-f]+ <.*>:$", line):
            if started:
                break               # the next symbol
            started = True
            continue
        m = re.match(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if m and started:
            insns.append((int(m.group(1), 16), m.group(2), m.group(3).strip()))
    return insns


def path_lengths(insns: List[Tuple[int, str, str]]) -> List[int]:
    """The instruction count of every path from entry to return, the return
    (ret, or a jmp to the return thunk, which then runs its ret) included.
    Conditional jumps fork; a function with a loop gives no answer ([])."""
    index = {a: i for i, (a, _, _) in enumerate(insns)}
    lengths: List[int] = []

    def walk(i: int, n: int, seen: frozenset) -> None:
        while i < len(insns):
            if i in seen:
                raise ValueError("a loop")
            seen = seen | {i}
            _, op, arg = insns[i]
            n += 1
            target = re.match(r"^([0-9a-f]+)\b", arg)
            if op.startswith("ret"):
                lengths.append(n)
                return
            if op.startswith("jmp"):
                if "return_thunk" in arg:
                    lengths.append(n + 1)
                    return
                if target and int(target.group(1), 16) in index:
                    i = index[int(target.group(1), 16)]
                    continue
                lengths.append(n)        # a tail call: its own instructions not counted
                return
            if op.startswith("j") and target and int(target.group(1), 16) in index:
                walk(index[int(target.group(1), 16)], n, seen)
            i += 1

    try:
        walk(0, 0, frozenset())
    except ValueError:
        return []
    return sorted(set(lengths))


@dataclass
class Calibration:
    function: str
    paths: List[int]          # from the vmlinux
    modes: List[int]          # the most frequent durations returning 0 and 1 (ns)
    calls: int
    overhead: Optional[float]
    check: str                # how close "one ns = one instruction" is

    def to_json(self) -> dict:
        return asdict(self)


def _mode(buckets: List[tuple]) -> Optional[int]:
    best = max(((c, lo) for lo, hi, c in buckets if hi is not None and c), default=None)
    return None if best is None else best[1]


def calibrate(probe_out: str, paths: List[int], prefix: str = "cal") -> Optional[Calibration]:
    """The probe's overhead from the calibration run: idle_cpu()'s durations
    (1 ns buckets) keyed by its return value.  It returns 1 only on its
    longest path and, nearly always, 0 on its shortest (the CPU runs something
    other than its idle task), so the most frequent durations of the two keys
    are the overhead plus those paths."""
    hists = parsers.bpftrace_keyed_hist(probe_out)
    busy, idle = hists.get(f"{prefix}_lh[0]", []), hists.get(f"{prefix}_lh[1]", [])
    m0, m1 = _mode(busy), _mode(idle)
    if m0 is None:
        return None
    calls = sum(c for _, _, c in busy + idle)
    modes = [m0] + ([m1] if m1 is not None else [])
    overhead = float(m0 - paths[0]) if paths else None
    if m1 is not None and len(paths) >= 2:
        seen, want = m1 - m0, paths[-1] - paths[0]
        # Each timestamp is the guest TSC (about 1 GHz) turned into ns: a
        # difference of two of them is exact to +-1 ns.
        check = (f"idle_cpu() returning 1 takes {seen} ns more than returning 0, its "
                 f"longest path {want} instructions more than its shortest: "
                 + ("one ns per instruction holds to the 1 ns the timestamps round to"
                    if abs(seen - want) <= 1 else "they differ"))
    else:
        check = "not checked (no call on one of the paths, or the paths unknown)"
    return Calibration(FUNCTION, paths, modes, calls, overhead, check)


def write_paths(vmlinux: Path, folder: Path) -> None:
    """The calibration function's path lengths, beside the raw outputs."""
    try:
        paths = path_lengths(disassemble(vmlinux))
    except (OSError, subprocess.CalledProcessError):
        paths = []
    (folder / "calibration-paths.json").write_text(json.dumps(
        {"function": FUNCTION, "vmlinux": str(vmlinux), "paths": paths}) + "\n")


def read(raw: Path) -> Optional[Calibration]:
    """The calibration of a plan's raw folder (None when it had no cost probe)."""
    out = raw / "calibration.txt"
    if not out.is_file():
        return None
    try:
        paths = json.loads((raw / "calibration-paths.json").read_text())["paths"]
    except (OSError, ValueError, KeyError):
        paths = []
    return calibrate(out.read_text(errors="replace"), paths)

