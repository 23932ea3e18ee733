"""Instruction counts under qemu -icount: the calibration of the cost probes.

Detail: docs/modules.md, section measuring/icount.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from schedlab.core.util import LabError, run
from schedlab.measuring import parsers

FUNCTION = "idle_cpu"
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*(\S+)\s*(.*)$")


def disassemble(vmlinux: Path, function: str = FUNCTION) -> List[Tuple[int, str, str]]:
    """(address, mnemonic, operands) of FUNCTION's instructions (objdump)."""
    nm = run(["nm", str(vmlinux)], capture=True)
    addr = next((ln.split()[0] for ln in nm.stdout.splitlines()
                 if ln.split()[-1:] == [function] and ln.split()[1] in "tT"), None)
    if addr is None:
        return []
    start = int(addr, 16)
    out = run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={start}",
               f"--stop-address={start + 512}", str(vmlinux)], capture=True).stdout
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


def path_lengths(insns: List[Tuple[int, str, str]], rethunk: bool = False) -> List[int]:
    """The instruction count of every path the trampoline runs: from after the
    `call __fentry__` (the trampoline enters there) to the return.  A jmp to
    the return thunk is patched into a ret when the CPU needs no return thunk
    (RETHUNK), else it runs the thunk's ret too.  Conditional jumps fork; a
    function with a loop gives no answer ([])."""
    skip = 0
    while skip < len(insns) and (insns[skip][1] == "endbr64" or "__fentry__" in insns[skip][2]):
        skip += 1
    insns = insns[skip:]
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
                    lengths.append(n + 1 if rethunk else n)
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
    modes: List[int]          # the lowest frequent duration returning 0 and 1 (ns)
    calls: int
    overhead: Optional[float]
    check: str                # how close "one ns = one instruction" is

    def to_json(self) -> dict:
        return asdict(self)


def peaks(buckets: List[tuple], share: float = 0.05) -> List[int]:
    """The durations that hold at least SHARE of the calls, in order."""
    n = sum(c for _, _, c in buckets)
    return sorted(lo for lo, hi, c in buckets if hi is not None and n and c >= share * n)


def calibrate(probe_out: str, paths: List[int], prefix: str = "cal") -> Optional[Calibration]:
    """The probe's overhead from the calibration run: idle_cpu()'s durations
    keyed by its return value.  It returns 1 only on its longest path and 0
    on its shortest when another task runs (and on the longest when a task
    is queued on an idle CPU).  The probe's own instructions vary by one or
    two with the calling context, so each key shows a cluster of peaks: the
    lowest peak returning 0, less its path, is the overhead.  "One ns = one
    instruction" holds when a peak returning 1 lies the paths' difference
    above a peak returning 0: the lowest of each, as in nearly every run, or
    another pair, when the contexts that return 1 are not those that return
    0 at the lowest (seen once in 235 runs: 0 at [621, 623, 624], 1 at [623,
    624])."""
    hists = parsers.bpftrace_value_counts(probe_out, f"{prefix}_d")
    p0, p1 = peaks(hists.get("0", [])), peaks(hists.get("1", []))
    if not p0:
        return None
    calls = sum(c for key in ("0", "1") for _, _, c in hists.get(key, []))
    modes = [p0[0]] + ([p1[0]] if p1 else [])
    overhead = float(p0[0] - paths[0]) if paths else None
    if p1 and len(paths) >= 2:
        seen, want = p1[0] - p0[0], paths[-1] - paths[0]
        pair = next(((a, b) for a in p0 for b in p1 if b - a == want), None)
        verdict = ("one ns per instruction holds" if seen == want else
                   f"one ns per instruction holds for the peaks at {pair[0]} and {pair[1]}"
                   if pair else "THEY DIFFER")
        check = (f"idle_cpu()'s lowest frequent duration returning 1 is {seen} ns above "
                 f"returning 0, its longest path {want} instructions above its shortest: "
                 f"{verdict} (peaks returning 0: {p0}, returning 1: {p1})")
    else:
        check = "not checked (no call on one of the paths, or the paths unknown)"
    return Calibration(FUNCTION, paths, modes, calls, overhead, check)


def write_insns(vmlinux: Path, folder: Path) -> None:
    """The calibration function's instructions, beside the raw outputs (its
    paths depend on the guest: whether it returns through a thunk)."""
    try:
        insns = disassemble(vmlinux)
    except (OSError, LabError):
        insns = []
    (folder / "calibration-insns.json").write_text(json.dumps(
        {"function": FUNCTION, "vmlinux": str(vmlinux), "insns": insns}) + "\n")


def rethunk(retbleed: str) -> bool:
    """Whether returns go through the return thunk, from the guest's
    /sys/devices/system/cpu/vulnerabilities/retbleed."""
    text = retbleed.strip()
    return bool(text) and not text.startswith(("Not affected", "Vulnerable"))


def read(raw: Path) -> Optional[Calibration]:
    """The calibration of a plan's raw folder (None when it had no cost probe)."""
    out = raw / "calibration.txt"
    if not out.is_file():
        return None
    try:
        insns = [tuple(i) for i in json.loads((raw / "calibration-insns.json").read_text())["insns"]]
    except (OSError, ValueError, KeyError):
        insns = []
    retbleed = raw / "retbleed.txt"
    thunk = rethunk(retbleed.read_text()) if retbleed.is_file() else True
    return calibrate(out.read_text(errors="replace"), path_lengths(insns, thunk))  # type: ignore[arg-type]

