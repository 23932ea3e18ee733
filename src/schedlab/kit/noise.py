"""What else moves a benchmark's numbers on the machine, on record: the
frequency governor, boost, idle states, SMT, other busy processes; and the
performance governor set for the kit's runs and put back after them.

Every path is relative to a root (the machine's `/` by default) so that the
tests read a tree of their own.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

CPU = Path("sys/devices/system/cpu")
PERFORMANCE = "performance"
# A process that used more than this share of one CPU while busy() looked.
BUSY_SHARE = 0.05


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def _cpus(root: Path) -> List[Path]:
    return sorted((root / CPU).glob("cpu[0-9]*"), key=lambda p: int(p.name[3:]))


def _counted(values: List[str]) -> str:
    """'performance x 8' or 'powersave x 6, performance x 2'; '' for none."""
    return ", ".join(f"{v} x {n}" for v, n in Counter(values).most_common())


def governors(root: Path = Path("/")) -> Dict[str, str]:
    """Each CPU's cpufreq governor, by CPU name; none where there is no cpufreq."""
    out = {}
    for cpu in _cpus(root):
        gov = _read(cpu / "cpufreq" / "scaling_governor")
        if gov:
            out[cpu.name] = gov
    return out


def boost(root: Path = Path("/")) -> str:
    """Turbo or boost as the kernel shows it, where it does."""
    cpu = root / CPU
    parts = []
    for rel, what in (("cpufreq/boost", "boost"), ("intel_pstate/no_turbo", "no_turbo"),
                      ("amd_pstate/status", "amd_pstate")):
        value = _read(cpu / rel)
        if value:
            parts.append(f"{what} {value}")
    return ", ".join(parts)


def idle_states(root: Path = Path("/")) -> str:
    """The cpuidle driver and cpu0's states, the disabled ones marked."""
    driver = _read(root / CPU / "cpuidle" / "current_driver")
    states = []
    for st in sorted((root / CPU / "cpu0" / "cpuidle").glob("state[0-9]*"),
                     key=lambda p: int(p.name[5:])):
        name = _read(st / "name")
        states.append(name + (" (disabled)" if _read(st / "disable") == "1" else ""))
    if not driver and not states:
        return ""
    return f"{driver or 'no driver'}: " + (", ".join(states) or "no states")


def smt(root: Path = Path("/")) -> str:
    """SMT control and whether it is active (sysfs)."""
    control = _read(root / CPU / "smt" / "control")
    active = _read(root / CPU / "smt" / "active")
    return f"control {control}, active {active}" if control or active else ""


def _ticks(root: Path) -> Dict[int, Tuple[str, int]]:
    """Each process's name and CPU time so far in clock ticks (utime + stime)."""
    out = {}
    for stat in (root / "proc").glob("[0-9]*/stat"):
        text = _read(stat)
        head, sep, rest = text.rpartition(")")
        if not sep:
            continue
        fields = rest.split()
        try:
            out[int(stat.parent.name)] = (head.partition("(")[2],
                                          int(fields[11]) + int(fields[12]))
        except (IndexError, ValueError):
            continue
    return out


def busy(root: Path = Path("/"), seconds: float = 1.0,
         skip: Optional[set] = None) -> List[str]:
    """Processes that used more than BUSY_SHARE of a CPU over SECONDS, the
    busiest first ('name (pid) 37%'); SKIP: pids left out (the kit's own)."""
    hz = os.sysconf("SC_CLK_TCK")
    before = _ticks(root)
    time.sleep(seconds)
    after = _ticks(root)
    skip = skip or set()
    used = [(after[pid][1] - before[pid][1], pid, after[pid][0]) for pid in after
            if pid in before and pid not in skip]
    share = [(t / hz / seconds, pid, name) for t, pid, name in used]
    return [f"{name} ({pid}) {s * 100:.0f}%"
            for s, pid, name in sorted(share, reverse=True) if s > BUSY_SHARE]


def record(root: Path = Path("/"), seconds: float = 1.0) -> Dict[str, object]:
    """What the report shows of the machine's noise, each '' where unknown."""
    govs = governors(root)
    return {"governor": _counted(list(govs.values())) or "no cpufreq",
            "boost": boost(root), "idle states": idle_states(root), "smt": smt(root),
            # on, they cost every run of every pass: a probe pass killed
            # before its cleanup leaves them so
            "schedstats": _read(root / "proc/sys/kernel/sched_schedstats"),
            "busy processes": busy(root, seconds, {os.getpid(), os.getppid()})}


@contextmanager
def pinned(pin: bool, root: Path = Path("/")) -> Iterator[str]:
    """With PIN, every CPU's governor set to performance for the block and
    put back after it, also after an error or Ctrl-C; yields what was done."""
    if not pin:
        yield "left as it was (--no-pin)"
        return
    old = governors(root)
    if not old:
        yield "no cpufreq here: nothing to set"
        return
    changed = []
    failed = []
    for cpu, gov in old.items():
        if gov == PERFORMANCE:
            continue
        path = root / CPU / cpu / "cpufreq" / "scaling_governor"
        try:
            path.write_text(PERFORMANCE + "\n")
            changed.append((path, gov))
        except OSError as e:
            failed.append(f"{cpu}: {e.strerror or e}")
    try:
        done = (f"performance set on {len(changed)} CPU(s), put back after"
                if changed else "performance already")
        yield done + (f"; not set on {', '.join(failed)}" if failed else "")
    finally:
        for path, gov in changed:
            try:
                path.write_text(gov + "\n")
            except OSError:
                pass
