"""Instructions per execution of parts of inlined code: the insns probe.

Detail: docs/modules.md, section measuring/insncount.py.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from schedlab.core.util import LabError, package_file, run, work_dir

# The out-of-line functions whose code is counted (clones such as
# NAME.constprop.0 included), and the functions they call directly.
FUNCTIONS = ("update_sd_lb_stats", "update_sd_lb_stats_reuse", "sched_balance_find_src_group")
OUT = "insns.txt"          # per boot, beside the run folders
PLUGIN_SRC = "qemu/insncount.c"
MAX_RANGES = 64            # the plugin's limit
KERNEL_ARGS = ("nokaslr",)


@dataclass(frozen=True)
class Part:
    """Instructions whose inline chain holds FRAME (one of its names), at a
    line inside the block that opens at the line matching BLOCK when given;
    its executions are those of its most executed instruction at a line
    matching PER (of FRAME), or of the part's most executed instruction.
    OWN: an instruction that ran more often than the part did is not the
    part's (code the compiler hoisted out of it, or shares with other
    code); for a part without a loop of its own.  WITHIN: only the
    instructions of that function's symbol (an instance of inlined code)."""
    name: str
    frames: Tuple[str, ...]
    block: str = ""
    per: str = ""
    own: bool = False
    within: str = ""


PARTS = (
    Part("domain statistics", ("update_sd_lb_stats", "__update_sd_lb_stats"),
         per=r"env->dst_core_idle = "),
    Part("group statistics", ("update_sg_lb_stats",), per=r"local_group = group == sds->local;"),
    Part("per-CPU read", ("update_sg_lb_stats",),
         block=r"for_each_cpu_and\(i, sched_group_span\(group\), env->cpus\)",
         per=r"struct rq \*rq = cpu_rq\(i\);"),
    # The same in the instance of update_sd_lb_stats() with the reuse
    # (the lbstats patch), which only busy balances of levels with sums run.
    Part("group statistics, reuse instance", ("update_sg_lb_stats",),
         per=r"local_group = group == sds->local;", within="update_sd_lb_stats_reuse"),
    Part("per-CPU read, reuse instance", ("update_sg_lb_stats",),
         block=r"for_each_cpu_and\(i, sched_group_span\(group\), env->cpus\)",
         per=r"struct rq \*rq = cpu_rq\(i\);", within="update_sd_lb_stats_reuse"),
    # The reader's first line: raw_read_seqcount() or raw_seqcount_try_begin(),
    # whichever the lbstats patch uses.
    Part("cache lookup", ("sg_lb_cache_read",),
         per=r"seq = raw_read_seqcount\(|raw_seqcount_try_begin\(", own=True),
    # gcc hoists the load of the cache's address to every group the reuse
    # instance reads, and shares the unlock's code: "group statistics"
    # counts those, "own" keeps them out of the write.
    Part("cache write", ("sg_lb_cache_write",), per=r"write_seqcount_begin\(", own=True),
)


# ------------------------------------------------------------------ the plugin


def plugin(dest: Optional[Path] = None) -> Path:
    """The plugin, compiled into work/tools/ when its source is newer."""
    src = package_file(PLUGIN_SRC)
    out = dest or work_dir() / "tools" / "insncount.so"
    if out.is_file() and out.stat().st_mtime >= src.stat().st_mtime:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["gcc", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror", "-fPIC",
           "-shared", "-fvisibility=hidden", "-o", str(out), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise LabError(f"compiling the insncount plugin failed: {proc.stderr.strip()[-400:]}")
    return out


def qemu_opts(plugin_so: Path, ranges: Sequence[Tuple[int, int]], out: Path) -> str:
    if not ranges or len(ranges) > MAX_RANGES:
        raise LabError(f"insncount: {len(ranges)} address ranges (1 to {MAX_RANGES})")
    spec = ",".join(f"range={lo:x}:{hi:x}" for lo, hi in ranges)
    return f"-plugin {plugin_so},{spec},out={out}"


# ------------------------------------------------------------------ where to count


def _run(cmd: List[str], stdin: str = "") -> str:
    return run(cmd, capture=True, input=stdin or None).stdout


def parse_nm(text: str) -> Dict[str, Tuple[int, int]]:
    """`nm -S` text symbols: name -> (address, end)."""
    syms: Dict[str, Tuple[int, int]] = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in "tT":
            a = int(p[0], 16)
            syms.setdefault(p[3], (a, a + int(p[1], 16)))
    return syms


def _base(name: str) -> str:
    return name.split(".", 1)[0]


_CALL = re.compile(r"^\s*([0-9a-f]+):\s+call\s+[0-9a-f]+ <([^>+]+)>")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")


def parse_calls(objdump: str) -> List[Tuple[int, str]]:
    """(address, target) of each direct call in `objdump -d --no-show-raw-insn` text."""
    return [(int(m.group(1), 16), m.group(2)) for m in map(_CALL.match, objdump.splitlines())
            if m]


def plan_ranges(syms: Dict[str, Tuple[int, int]], objdump_of) -> List[Tuple[int, int]]:
    """The ranges of FUNCTIONS' symbols (clones too) and of their direct callees;
    objdump_of(lo, hi) gives the disassembly of a range."""
    roots = sorted({r for n, r in syms.items() if _base(n) in FUNCTIONS})
    if not roots:
        raise LabError("insncount: none of " + ", ".join(FUNCTIONS) + " is out of line "
                       "in this vmlinux")
    ranges = set(roots)
    for lo, hi in roots:
        for _, target in parse_calls(objdump_of(lo, hi)):
            if target in syms:
                ranges.add(syms[target])
    if len(ranges) > MAX_RANGES:
        raise LabError(f"insncount: {len(ranges)} ranges, more than the plugin's {MAX_RANGES}")
    return sorted(ranges)


def ranges_for(vmlinux: Path) -> List[Tuple[int, int]]:
    syms = parse_nm(_run(["nm", "-S", str(vmlinux)]))
    return plan_ranges(syms, lambda lo, hi: _run(
        ["objdump", "-d", "--no-show-raw-insn", f"--start-address={lo:#x}",
         f"--stop-address={hi:#x}", str(vmlinux)]))


# ------------------------------------------------------------------ attribution


Frame = Tuple[str, str, int]        # function, file, line


def parse_addr2line(text: str) -> Dict[int, Tuple[Frame, ...]]:
    """`addr2line -a -f -i` output: address -> (function, file, line) frames,
    innermost first; each frame's line is where the next one out is."""
    found: Dict[int, List[Frame]] = {}
    cur: Optional[List[Frame]] = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith("0x"):
            cur = found.setdefault(int(s, 16), [])
            i += 1
            continue
        if cur is not None and s and i + 1 < len(lines):
            where = lines[i + 1].strip().split(" ", 1)[0]
            path, _, num = where.rpartition(":")
            cur.append((s, path, int(num) if num.isdigit() else 0))
            i += 2
            continue
        i += 1
    return {a: tuple(f) for a, f in found.items()}


def parse_counts(text: str) -> Dict[int, int]:
    out: Dict[int, int] = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) == 2:
            out[int(p[0], 16)] = int(p[1])
    return out


def block_lines(source: Sequence[str], function: str, opener: str) -> Optional[range]:
    """The line numbers (1-based) of the first block of FUNCTION whose first
    line matches OPENER, to its closing brace."""
    pat = re.compile(opener)
    start = next((n for n, t in enumerate(source, 1)
                  if re.match(rf"^(static |inline |__always_inline |void |bool |int |"
                              rf"unsigned long |struct \w+ \*)*{function}\(", t)), None)
    if start is None:
        return None
    for n, text in enumerate(source[start - 1:], start):
        if pat.search(text):
            depth = 0
            for m, t in enumerate(source[n - 1:], n):
                depth += t.count("{") - t.count("}")
                if depth <= 0 and m > n:
                    return range(n, m + 1)
            return None
    return None


@dataclass
class PartCost:
    name: str
    execs: int = 0
    insns: int = 0              # in line, in the counted ranges
    call_insns: float = 0.0     # calls made from the part, at the callees' mean

    def per_exec(self) -> float:
        return (self.insns + self.call_insns) / self.execs if self.execs else 0.0


def attribute(counts: Dict[int, int], frames: Dict[int, Tuple[Frame, ...]],
              calls: Dict[int, str], syms: Dict[str, Tuple[int, int]],
              source_of, parts: Sequence[Part] = PARTS) -> List[PartCost]:
    """Each part's executions and instructions.  calls: address -> callee of
    the direct calls in the ranges; source_of(path) gives a file's lines."""
    entry_runs: Dict[str, float] = {}
    for name, (lo, hi) in syms.items():
        n = counts.get(lo, 0)
        if n:
            entry_runs[name] = sum(c for a, c in counts.items() if lo <= a < hi) / n
    out = []
    for part in parts:
        cost = PartCost(part.name)
        per = re.compile(part.per) if part.per else None
        most = 0
        bodies: Dict[Tuple[str, str], Optional[range]] = {}
        mine: List[Tuple[int, int]] = []
        span = next((r for name, r in syms.items() if _base(name) == part.within),
                    (0, 0)) if part.within else None
        for a, n in counts.items():
            if span is not None and not span[0] <= a < span[1]:
                continue
            frame = next((f for f in frames.get(a, ()) if f[0] in part.frames), None)
            if frame is None:
                continue
            src = source_of(frame[1])
            if part.block:
                key = (frame[1], frame[0])
                if key not in bodies:
                    bodies[key] = block_lines(src, frame[0], part.block)
                body = bodies[key]
                if body is None or frame[2] not in body:
                    continue
            line = src[frame[2] - 1] if 0 < frame[2] <= len(src) else ""
            mine.append((a, n))
            if per is None or per.search(line):
                most = max(most, n)
        for a, n in mine:
            if part.own and n > most:
                continue
            cost.insns += n
            if a in calls:
                cost.call_insns += n * entry_runs.get(calls[a], 0.0)
        cost.execs = most
        out.append(cost)
    return out


def format_costs(costs: Iterable[PartCost]) -> str:
    """insns.txt: one line a part."""
    return "".join(f"insns part={c.name.replace(' ', '_')} execs={c.execs} insns={c.insns} "
                   f"call_insns={c.call_insns:.0f} per_exec={c.per_exec():.1f}\n"
                   for c in costs)


def parse_costs(text: str) -> Dict[str, Tuple[int, float]]:
    """insns.txt: part name -> (executions, instructions per execution)."""
    out = {}
    for m in re.finditer(r"^insns part=(\S+) execs=(\d+) .*per_exec=([0-9.]+)$", text, re.M):
        out[m.group(1).replace("_", " ")] = (int(m.group(2)), float(m.group(3)))
    return out


def summarize(raw: Path, vmlinux: Path, counts_file: Path, commit: str) -> str:
    """insns.txt of one boot, from the plugin's counts, into RAW and each of
    its run folders.  Source lines are read from the kernel tree at COMMIT,
    the build's: the tree's checkout may have moved on since."""
    counts = parse_counts(counts_file.read_text())
    if not counts:
        raise LabError(f"{counts_file}: the plugin counted nothing")
    syms = parse_nm(_run(["nm", "-S", str(vmlinux)]))
    frames = parse_addr2line(_run(["addr2line", "-a", "-f", "-i", "-e", str(vmlinux)],
                                  "".join(f"{a:#x}\n" for a in sorted(counts))))
    calls: Dict[int, str] = {}
    for lo, hi in sorted({r for r in syms.values() if any(r[0] <= a < r[1] for a in counts)}):
        calls.update(parse_calls(_run(["objdump", "-d", "--no-show-raw-insn",
                                       f"--start-address={lo:#x}", f"--stop-address={hi:#x}",
                                       str(vmlinux)])))
    cache: Dict[str, List[str]] = {}

    def source_of(path: str) -> List[str]:
        if path not in cache:
            p = Path(path).resolve()
            try:
                top = Path(_run(["git", "-C", str(p.parent), "rev-parse",
                                 "--show-toplevel"]).strip())
                cache[path] = _run(["git", "-C", str(top), "show",
                                    f"{commit}:{p.relative_to(top)}"]).splitlines()
            except (ValueError, LabError):
                cache[path] = []
        return cache[path]

    text = format_costs(attribute(counts, frames, calls, syms, source_of))
    (raw / OUT).write_text(text)
    for status in raw.glob("*/status.txt"):
        (status.parent / OUT).write_text(text)
    return text
