"""Run the series' KUnit suites on the lab's one build, on a chosen topology.

kunit.py's own 'run' hard-codes '-accel kvm' first (which hangs here) and
one CPU, so the lab boots its own qemu: no root filesystem, the KUnit suites
built in run during boot with kunit.enable=1, the machine powers off after
them (kunit_shutdown=poweroff), and the console is parsed with the tree's own
'tools/testing/kunit/kunit.py parse'.

The fixtures need as many possible CPUs as they have (cpumask iteration
stops at nr_cpu_ids): the default topology gives 192 possible CPUs with two
online (qemu -smp 192,... plus the kernel's maxcpus=2), which boots in
seconds under TCG.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from . import topology as topomod
from . import vm
from .util import LabError, log_dir, run_in_group, say

# 2 x 12 x 8 = 192 possible CPUs, the largest fixture; 2 online.
DEFAULT_TOPOLOGY = "2x12x8"
DEFAULT_ONLINE = 2

PROBE_LINE = re.compile(r"swb-probes: (.*)$")
CALLS_LINE = re.compile(r"swb-calls: (.*)$")


def qemu_command(image: Path, topo: topomod.Topology, *, kvm: bool, online: Optional[int],
                 memory_mib: int = 2048, filter_glob: Optional[str] = None,
                 kernel_args: Sequence[str] = ()) -> List[str]:
    """The qemu command line of a KUnit boot (pure: tested without booting)."""
    append = ["console=ttyS0", "kunit.enable=1", "kunit_shutdown=poweroff", "panic=-1"]
    append += topomod.kernel_cpu_args(topo, online)
    if filter_glob:
        append.append(f"kunit.filter_glob={filter_glob}")
    append += list(kernel_args)
    # TCG's "max" CPU has 5-level paging; with it a KASAN kernel reports a
    # wild-memory-access from an interrupt during identify_cpu() in early
    # boot, and that taint switches lock debugging off for the whole run.
    args = ["qemu-system-x86_64", "-accel", "kvm" if kvm else "tcg", "-cpu",
            "host" if kvm else "max,la57=off", "-m", f"{memory_mib}M",
            "-smp", topomod.smp_arg(topo)]
    for node, spec in enumerate(topomod.numa_node_specs(topo, memory_mib)):
        size, cpus = spec.split(",cpus=")
        args += ["-object", f"memory-backend-ram,id=mem{node},size={size}",
                 "-numa", f"node,nodeid={node},cpus={cpus},memdev=mem{node}"]
    args += ["-kernel", str(image), "-append", " ".join(append), "-nographic",
             "-no-reboot", "-serial", "stdio", "-monitor", "none"]
    return args


@dataclass
class ProbeRow:
    fixture: str
    busy: int
    fields: Dict[str, str] = field(default_factory=dict)


def parse_probe_lines(console: str) -> List[ProbeRow]:
    """The suite's 'swb-probes: key=value ...' lines, in order."""
    rows = []
    for line in console.splitlines():
        m = PROBE_LINE.search(line)
        if not m:
            continue
        kv = dict(item.split("=", 1) for item in m.group(1).split() if "=" in item)
        if "fixture" in kv and "busy" in kv:
            rows.append(ProbeRow(kv.pop("fixture"), int(kv.pop("busy")), kv))
    return rows


def parse_call_lines(console: str) -> List[Dict[str, str]]:
    """The suite's 'swb-calls: key=value ...' lines (per-call totals of the
    comparison with upstream), in order."""
    out = []
    for line in console.splitlines():
        m = CALLS_LINE.search(line)
        if m:
            out.append(dict(item.split("=", 1) for item in m.group(1).split() if "=" in item))
    return out


def call_table(lines: List[Dict[str, str]]) -> str:
    """Mean and max idle-state probes per call, upstream vs this kernel (Markdown)."""
    out = ["| fixture | patterns | calls | upstream probes/call | probes/call | fewer by | "
           "max/call (upstream) | stale env->idle probes/call (max) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for f in lines:
        try:
            calls = int(f["calls"])
            ours, up, stale = (int(f["probes"]) / calls, int(f["upstream_probes"]) / calls,
                               int(f["stale_probes"]) / calls)
        except (KeyError, ValueError, ZeroDivisionError):
            continue
        out.append(f"| {f.get('fixture', '?')} | {f.get('patterns', '')} | {calls} | "
                   f"{up:.2f} | {ours:.2f} | {_fmt_ratio(up / ours if ours else None)} | "
                   f"{f.get('max_call_probes', '')} ({f.get('upstream_max_call_probes', '')}) | "
                   f"{stale:.2f} ({f.get('stale_max_call_probes', '')}) |")
    return "\n".join(out) if len(out) > 2 else ""


# The targets: fewer probes per balance pass than upstream, by at least
# this factor (fixture, busy %) -> factor.
PROBE_TARGETS = {
    ("smt8-2x12x8", 100): 6.0,
    ("smt8-2x12x8", 90): 3.5,
    ("smt8-2x12x8", 50): 1.5,
    ("smt4-2x12x4", 100): 4.0,
    ("smt2-x86-2x16x2", 100): 4.0,
}


def _num(fields: Dict[str, str], key: str) -> Optional[int]:
    try:
        return int(fields[key])
    except (KeyError, ValueError):
        return None


def probe_ratio(row: ProbeRow) -> Optional[float]:
    """Upstream probes per pass / this kernel's (None without both)."""
    ours, up = _num(row.fields, "pass_probes"), _num(row.fields, "upstream_pass_probes")
    if ours is None or up is None:
        return None
    if ours == 0:
        return float("inf") if up else 1.0
    return up / ours


def _fmt_ratio(x: Optional[float]) -> str:
    if x is None:
        return ""
    return "inf" if x == float("inf") else f"{x:.2f}x"


def probe_table(rows: List[ProbeRow]) -> str:
    """Per-pass probe table, upstream vs this kernel, one row per fixture and busy level."""
    if not rows:
        return ""
    out = ["| fixture | busy % | upstream probes/pass | probes/pass | fewer by | calls/pass | "
           "max probes/call (upstream) | per level (upstream) |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        f = r.fields
        up_max = f.get("upstream_max_call_probes")
        levels = f.get("levels", "").replace(",", " ")
        if f.get("upstream_levels"):
            levels += f" ({f['upstream_levels'].replace(',', ' ')})"
        out.append(f"| {r.fixture} | {r.busy} | {f.get('upstream_pass_probes', '')} | "
                   f"{f.get('pass_probes', '')} | {_fmt_ratio(probe_ratio(r))} | "
                   f"{f.get('pass_calls', '')} | {f.get('max_call_probes', '')}"
                   f"{f' ({up_max})' if up_max else ''} | {levels} |")
    return "\n".join(out)


def check_targets(rows: List[ProbeRow]) -> List[str]:
    """One line per target and per row costlier than upstream; 'MISSED' marks a miss."""
    out = []
    by_key = {(r.fixture, r.busy): r for r in rows}
    for (fixture, busy), want in PROBE_TARGETS.items():
        r = by_key.get((fixture, busy))
        got = probe_ratio(r) if r else None
        if got is None:
            out.append(f"{fixture} {busy}% busy: no upstream comparison in the output (MISSED)")
            continue
        verdict = "met" if got >= want else "MISSED"
        out.append(f"{fixture} {busy}% busy: {_fmt_ratio(got)} fewer probes per pass, "
                   f"target >= {want:g}x: {verdict}")
    for r in rows:
        ours, up = _num(r.fields, "pass_probes"), _num(r.fields, "upstream_pass_probes")
        if ours is not None and up is not None and ours > up:
            out.append(f"{r.fixture} {r.busy}% busy: {ours} probes per pass, more than "
                       f"upstream's {up} (MISSED)")
    return out


@dataclass
class KunitResult:
    ok: bool
    passed: int
    failed: int
    skipped: int
    summary: str
    rows: List[ProbeRow]
    calls: List[Dict[str, str]]
    log: Path
    seconds: float
    accel: str


_TOTALS = re.compile(r"# Totals: pass:(\d+) fail:(\d+) skip:(\d+) total:(\d+)")


def totals(console: str) -> tuple[int, int, int, int]:
    """Sum of the '# Totals:' lines KUnit prints at the end of a run."""
    p = f = s = t = 0
    for m in _TOTALS.finditer(console):
        p, f, s, t = (p + int(m.group(1)), f + int(m.group(2)), s + int(m.group(3)),
                      t + int(m.group(4)))
    return p, f, s, t


_COMPLETE = re.compile(r"Testing complete\. Ran (\d+) tests?:(.*)$", re.M)


def parsed_counts(summary: str) -> tuple[int, int, int, int]:
    """Counts from kunit.py parse's 'Testing complete. Ran N tests: passed: X,
    failed: Y, skipped: Z' line (crashed and errors count as failed)."""
    m = _COMPLETE.search(re.sub(r"\x1b\[[0-9;]*m", "", summary))
    if not m:
        return 0, 0, 0, 0
    kv = {k.strip(): int(v) for k, v in re.findall(r"(\w+): (\d+)", m.group(2))}
    failed = kv.get("failed", 0) + kv.get("crashed", 0) + kv.get("errors", 0)
    return kv.get("passed", 0), failed, kv.get("skipped", 0), int(m.group(1))


def run_kunit(tree_path: Path, image: Path, topo: topomod.Topology, online: Optional[int],
              filter_glob: Optional[str] = None, timeout: float = 900,
              memory_mib: int = 2048, kernel_args: Sequence[str] = ()) -> KunitResult:
    if not image.is_file():
        raise LabError(f"no kernel image at {image}: build it first (./schedlab build)")
    kvm, why = vm.kvm_works(image)
    accel = "kvm" if kvm else "tcg"
    say(f"  accelerator: {accel} ({why})")
    say(f"  topology {topo.name or topo.spec()}: {topo.describe()}"
        + (f", {online} online (maxcpus)" if online and online < topo.cpus else ""))
    args = qemu_command(image, topo, kvm=kvm, online=online, memory_mib=memory_mib,
                        filter_glob=filter_glob, kernel_args=kernel_args)
    log = log_dir() / f"kunit-{topo.spec().replace(':', '-')}.log"
    start = time.monotonic()
    run_in_group(args, log, timeout, "the KUnit boot")
    took = time.monotonic() - start
    console = log.read_text(errors="replace")
    parser = tree_path / "tools/testing/kunit/kunit.py"
    parsed = subprocess.run(["python3", str(parser), "parse", str(log)],
                            capture_output=True, text=True)
    passed, failed, skipped, total = totals(console)
    if total == 0:
        # KUnit prints no '# Totals:' line when kunit.filter_glob is set.
        passed, failed, skipped, total = parsed_counts(parsed.stdout)
    ok = parsed.returncode == 0 and total > 0 and failed == 0
    if total == 0:
        hint = "no KUnit test ran"
        if "kunit: disabled" in console:
            hint += " (kunit.enable was not honoured)"
        elif "Kernel panic" in console:
            hint += " (the kernel panicked)"
        say(f"  {hint}; console: {log}")
    return KunitResult(ok, passed, failed, skipped, parsed.stdout + parsed.stderr,
                       parse_probe_lines(console), parse_call_lines(console), log, took,
                       accel)
