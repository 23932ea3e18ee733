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
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import insncount
from .util import LabError

# The functions whose share a profile reports.
FUNCTIONS = ("should_we_balance", "update_sd_lb_stats", "sched_balance_rq",
             "sched_balance_newidle", "select_idle_sibling")
# Samples whose leaf is one of these are a CPU waiting, not executing.
IDLE_LEAVES = frozenset({"pv_native_safe_halt", "native_safe_halt", "arch_safe_halt",
                         "default_idle", "cpu_idle_poll", "mwait_idle_with_hints",
                         "acpi_safe_halt", "poll_idle"})
# The lowest kernel address on x86_64 (the one arch the profile runs on:
# spec.probe_build refuses the others).
KERNEL_FLOOR = 0xffff_0000_0000_0000
# Interrupt and exception entries: a call chain is followed outward no
# further, past them is the code that was interrupted, not a caller.
ENTRY_PREFIXES = ("asm_sysvec_", "asm_common_interrupt", "asm_exc_", "asm_spurious_")
# The profile's sampling period per CPU (cpu-clock, ns; about 4,150 Hz).
# Not a divisor of the tick (4 ms at the lab's HZ=250): under icount the
# guest's clock is exact, and with 250,000 ns every sample of a CPU would
# fall at the same point after its tick, always missing, or always hitting,
# the balancing that the tick's softirq runs.  4 ms / 240,703 ns = 16.618:
# the samples' phase in the tick moves by the golden ratio's fraction each
# tick, which spreads them most evenly over it.
PERIOD_NS = 240703
OUT = "profile.txt"
# perf.data grows in the guest's /tmp, a tmpfs of half the guest's 2 GiB:
# about this many bytes a sample with its call chain (measured on smt8).
BYTES_PER_SAMPLE = 200
GUEST_TMP_BYTES = 700 * 1024 * 1024


def check_size(cpus: int, seconds: int, period_ns: int = PERIOD_NS, slack: int = 10) -> None:
    """Refuse a run whose perf.data would not fit the guest's /tmp (the
    window, plus SLACK seconds of set-up, at PERIOD_NS per sample per CPU)."""
    size = cpus * (1e9 / period_ns) * (seconds + slack) * BYTES_PER_SAMPLE
    if size > GUEST_TMP_BYTES:
        raise LabError(f"the profile of {cpus} CPUs over {seconds} s would be about "
                       f"{size / 2**20:.0f} MiB of perf.data, more than the guest's /tmp "
                       f"holds ({GUEST_TMP_BYTES // 2**20} MiB): fewer --seconds")


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


def _hex(word: str) -> Optional[int]:
    try:
        return int(word, 16)
    except ValueError:
        return None


def chain_counts(lines: Iterable[str]) -> Counter:
    """The call chains of `perf script -F cpu,ip` (a '[CPU]' line, then one
    address a line, leaf first; the address on the '[CPU]' line itself when
    perf has no chain), as tuples with how many samples had each."""
    out: Counter = Counter()
    cur: Optional[List[int]] = None
    for line in lines:
        s = line.strip()
        if s.startswith("["):
            if cur is not None:
                out[tuple(cur)] += 1
            cur = []
            rest = s[s.index("]") + 1:].split() if "]" in s else []
            a = _hex(rest[0]) if rest else None
            if a is not None:
                cur.append(a)
        elif s and cur is not None:
            a = _hex(s.split()[0])
            if a is not None:
                cur.append(a)
    if cur is not None:
        out[tuple(cur)] += 1
    return out


def chains(script_out: str) -> List[List[int]]:
    """chain_counts() as one list per sample (tests, small outputs)."""
    return [list(c) for c, n in chain_counts(script_out.splitlines()).items()
            for _ in range(n)]


def parse_addr2line(text: str) -> Dict[int, Tuple[str, ...]]:
    """`addr2line -a -f -i` output: address -> functions there, innermost first."""
    return {a: tuple(f[0] for f in frames)
            for a, frames in insncount.parse_addr2line(text).items()}


def _entry(funcs: Tuple[str, ...]) -> bool:
    return any(f.startswith(ENTRY_PREFIXES) for f in funcs)


def count(samples: Union[Counter, Sequence[Sequence[int]]], offset: int,
          funcs_at: Dict[int, Tuple[str, ...]]) -> Counts:
    """Counts of SAMPLES (runtime addresses, leaf first; a Counter of chains
    or a list of them); OFFSET is the runtime minus the link address;
    FUNCS_AT maps link addresses (return addresses less one) to their
    inline chains.  A chain is followed outward up to the first interrupt
    entry."""
    c = Counts()
    items = samples.items() if isinstance(samples, Counter) else ((s, 1) for s in samples)
    wanted = set(FUNCTIONS)
    for chain, n in items:
        c.samples += n
        if not chain or chain[0] < KERNEL_FLOOR:
            c.user += n
            continue
        leaf = funcs_at.get(chain[0] - offset, ())
        if leaf and leaf[0] in IDLE_LEAVES:
            c.idle += n
            continue
        for f in set(leaf) & wanted:
            c.own[f] += n
        within = set(leaf)
        if not _entry(leaf):
            for ret in chain[1:]:
                if ret < KERNEL_FLOOR:
                    break
                funcs = funcs_at.get(ret - 1 - offset, ())
                if _entry(funcs):
                    break
                within.update(funcs)
        for f in within & wanted:
            c.within[f] += n
    return c


def link_addresses(samples: Iterable[Sequence[int]], offset: int,
                   text: Tuple[int, int] = (KERNEL_FLOOR, 1 << 64)) -> List[int]:
    """The link addresses to look up: leaves as they are, return addresses
    less one; only those in the kernel's text (TEXT: its runtime start and
    end; modules and BPF programs are loaded elsewhere)."""
    want = set()
    for chain in samples:
        for k, a in enumerate(chain):
            if text[0] <= a < text[1]:
                want.add(a - offset - (1 if k else 0))
    return sorted(want)


def symbol(system_map: Path, name: str) -> int:
    for line in system_map.read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    raise LabError(f"{system_map}: no symbol {name}")


def runtime_text(raw: Path) -> Optional[Tuple[int, int]]:
    """_text and _etext as the guest's /proc/kallsyms gave them (guest/run-plan.sh)."""
    f = raw / "kernel-text.txt"
    if not f.is_file():
        return None
    found = {}
    for line in f.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in ("_text", "_etext"):
            found[parts[2]] = int(parts[0], 16)
    if "_text" not in found:
        return None
    return found["_text"], found.get("_etext", 1 << 64)


def _run(cmd: List[str], stdin: str = "") -> str:
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise LabError(f"{cmd[0]}: {exc}") from exc
    if proc.returncode != 0:
        raise LabError(f"{' '.join(cmd[:3])}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def _script(data: Path) -> Counter:
    """perf script's chains, read as they come (a long run's text is gigabytes)."""
    cmd = ["perf", "script", "-f", "-i", str(data), "-F", "cpu,ip"]
    try:
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) as proc:
            assert proc.stdout is not None
            out = chain_counts(proc.stdout)
            err = proc.stderr.read() if proc.stderr else ""
    except OSError as exc:
        raise LabError(f"perf: {exc}") from exc
    if proc.returncode != 0:
        raise LabError(f"perf script: exit {proc.returncode}: {err.strip()[-300:]}")
    return out


def symbolize_run(run_dir: Path, vmlinux: Path, offset: int,
                  text: Tuple[int, int] = (KERNEL_FLOOR, 1 << 64)) -> Counts:
    """profile.txt of one run folder; its perf.data is then removed (hundreds of
    megabytes on 64 CPUs; profile.txt is what reparse reads)."""
    data = run_dir / "perf.data"
    samples = _script(data)
    addrs = link_addresses(samples, offset, text)
    funcs_at = parse_addr2line(_run(["addr2line", "-a", "-f", "-i", "-e", str(vmlinux)],
                                    "".join(f"{a:#x}\n" for a in addrs))) if addrs else {}
    c = count(samples, offset, funcs_at)
    (run_dir / OUT).write_text(c.text())
    data.unlink()
    return c


def symbolize(raw: Path, vmlinux: Path) -> List[str]:
    """profile.txt for every run folder of RAW that has a perf.data; the
    problems met (a run without one keeps none and its parser says so)."""
    problems = []
    text = runtime_text(raw)
    if text is None:
        return [f"{raw}: no kernel-text.txt (the guest did not record where the kernel was)"]
    try:
        offset = text[0] - symbol(vmlinux.parent / "System.map", "_text")
    except (OSError, LabError) as exc:
        return [f"no link address of _text: {exc}"]
    for data in sorted(raw.glob("*/perf.data")):
        try:
            symbolize_run(data.parent, vmlinux, offset, text)
        except (OSError, LabError) as exc:
            problems.append(f"{data.parent.name}: {exc}")
    return problems
