"""Run the series' KUnit suites on the lab's one build, on a chosen topology.

Detail: docs/modules.md, section series/kunit.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from schedlab.core import guests
from schedlab.core import topology as topomod
from schedlab.core.targets import TARGETS, get_target
from schedlab.core.util import LabError, log_dir, run, run_in_group, say
from schedlab.series import kunit_report, kunit_scale, kunit_tool

# The case that compares a fixture with the live sched domains.
LIVE_CASE = "sched_fair_lb.fixture_matches_live_domains"
# 2 x 12 x 8 = 192 possible CPUs, the largest fixture; 2 online.
DEFAULT_TOPOLOGY = "2x12x8"
DEFAULT_ONLINE = 2


def qemu_command(image: Path, topo: topomod.Topology, *, kvm: bool, online: Optional[int],
                 memory_mib: int = 2048, filter_glob: Optional[str] = None,
                 kernel_args: Sequence[str] = (), arch: Optional[str] = None,
                 qemu: Optional[str] = None, present: Optional[int] = None) -> List[str]:
    """The qemu command line of a KUnit boot (pure: tested without booting):
    the boot target of ARCH (None: x86_64), qemu: its binary; present: only
    that many CPUs at boot, the topology's CPUs the possible ones."""
    append = ["kunit.enable=1", "kunit_shutdown=poweroff", "panic=-1"]
    append += topomod.kernel_cpu_args(topo, online)
    if filter_glob:
        append.append(f"kunit.filter_glob={filter_glob}")
    append += list(kernel_args)
    return get_target(arch).qemu_command(image, topo, append, kvm=kvm, memory_mib=memory_mib,
                                         qemu=qemu, present=present)


@dataclass
class KunitResult:
    """A lab KUnit boot, counted by kunit.py. failed: every test that neither
    passed nor skipped (crashed ones included); crashed: how many of them
    crashed; results: (suite.case[.param], status) of every test."""
    ok: bool
    passed: int
    failed: int
    skipped: int
    summary: str
    rows: List[kunit_report.ProbeRow]
    calls: List[Dict[str, str]]
    log: Path
    seconds: float
    accel: str
    crashed: int = 0
    results: List[Tuple[str, str]] = field(default_factory=list)
    reads: List[Dict[str, str]] = field(default_factory=list)


@dataclass
class ParsedConsole:
    """What the tree's 'kunit.py parse --json' made of a console."""
    returncode: int
    output: str                 # its printed results, as it prints them
    report: Optional[dict]      # its JSON report (None if it wrote none)


def parse_console(tree_path: Path, console: Path, json_path: Path) -> ParsedConsole:
    """Run the tree's 'kunit.py parse --json=json_path' on a console log."""
    parser = tree_path / "tools/testing/kunit/kunit.py"
    # kunit.py changes into the kernel tree: absolute paths only.
    console, json_path = console.resolve(), json_path.resolve()
    json_path.unlink(missing_ok=True)
    proc = run(["python3", str(parser), "parse", f"--json={json_path}", str(console)],
               capture=True, check=False)
    stored = f"Test results stored in {json_path}"
    out = "".join(ln for ln in proc.stdout.splitlines(keepends=True) if stored not in ln)
    return ParsedConsole(proc.returncode, out + proc.stderr, kunit_tool.load_report(json_path))


def run_kunit(tree_path: Path, image: Path, topo: topomod.Topology, online: Optional[int],
              filter_glob: Optional[str] = None, timeout: float = 900,
              memory_mib: int = 2048, kernel_args: Sequence[str] = (),
              arch: Optional[str] = None, log_tag: str = "",
              present: Optional[int] = None) -> KunitResult:
    if not image.is_file():
        raise LabError(f"no kernel image at {image}: build it first (./schedlab build)")
    target = get_target(arch)
    qemu = guests.qemu_binary(target)
    kvm, why = guests.accelerator(target, image)
    accel = "kvm" if kvm else "tcg"
    say(f"  accelerator: {accel} ({why})")
    say(f"  topology {topo.name or topo.spec()}: {topo.describe()}"
        + (f", {online} online (maxcpus)" if online and online < topo.cpus else "")
        + (f", {present} present (the rest possible)" if present else ""))
    args = qemu_command(image, topo, kvm=kvm, online=online, memory_mib=memory_mib,
                        filter_glob=filter_glob, kernel_args=kernel_args, arch=arch,
                        qemu=qemu, present=present)
    log = log_dir() / f"kunit{target.log_suffix}-{topo.spec().replace(':', '-')}{log_tag}.log"
    start = time.monotonic()
    run_in_group(args, log, timeout, "the KUnit boot")
    took = time.monotonic() - start
    console = log.read_text(errors="replace")
    parsed = parse_console(tree_path, log, log.with_suffix(".json"))
    report = parsed.report or {}
    n = kunit_tool.counts(report)
    failed = n.failed + n.crashed
    ok = parsed.returncode == 0 and n.total > 0 and failed == 0
    if n.total == 0:
        hint = "no KUnit test ran"
        if "kunit: disabled" in console:
            hint += " (kunit.enable was not honoured)"
        elif "Kernel panic" in console:
            hint += " (the kernel panicked)"
        say(f"  {hint}; console: {log}")
    return KunitResult(ok, n.passed, failed, n.skipped, parsed.output,
                       kunit_report.parse_probe_lines(console),
                       kunit_report.parse_call_lines(console), log, took, accel,
                       crashed=n.crashed, results=list(kunit_tool.leaves(report)),
                       reads=kunit_report.parse_read_lines(console))


# What the reference boot runs: the cases that print the probe counts.
REFERENCE_FILTER = "sched_fair_lb.swb_*"


def run_on(tree_path: Path, image: Path, topology: str, online: Optional[int],
           filter_glob: Optional[str], timeout: float, arch: Optional[str] = None,
           require_live: bool = False, reference: Optional[Path] = None) -> bool:
    """'./schedlab kunit' on one topology: boot, kunit.py's results, the
    series' tables and targets, a one-line total. True if every test passed
    or skipped and no should_we_balance() target was missed (require_live:
    and the live-domain comparison ran and passed).  reference: the image of
    the KUnit series alone, booted first on the same topology for v7.3's
    probe counts (the targets are checked only with it)."""
    topo = topomod.parse_topology(topology)
    target = get_target(arch)
    ref = None
    if reference is not None:
        say(f"  reference: the KUnit series alone ({REFERENCE_FILTER})")
        ref = run_kunit(tree_path, reference, topo, online, filter_glob=REFERENCE_FILTER,
                        timeout=timeout, arch=arch, log_tag="-reference")
        if not ref.ok or not ref.rows:
            say(f"  the reference boot did not give the probe counts: {ref.passed} passed, "
                f"{ref.failed} failed (console: {ref.log})")
            return False
    res = run_kunit(tree_path, image, topo, online, filter_glob=filter_glob, timeout=timeout,
                    arch=arch)
    say(res.summary.rstrip())
    rows, calls = res.rows, res.calls
    if ref is not None:
        rows, calls = kunit_report.merge_reference(rows, calls, ref.rows, ref.calls)
    missed = 0
    for text in kunit_report.report_lines(rows, calls):
        say(text)
        missed += "(MISSED)" in text
    for text in kunit_report.reads_report_lines(res.reads):
        say(text)
    where = f"{topology} ({target.arch})" if target.log_suffix else topology
    say(f"  KUnit on {where}: {res.passed} passed, {res.failed} failed, "
        f"{res.skipped} skipped in {res.seconds:.1f}s under {res.accel} "
        f"(console: {res.log})")
    if missed:
        say(f"  {missed} should_we_balance() target(s) missed")
        return False
    if require_live:
        live = dict(res.results).get(LIVE_CASE)
        say(f"  {LIVE_CASE}: {live or 'did not run'}")
        if live != "PASS":
            return False
    return res.ok


# The scale boot: the fixtures of 192, 768 and 1920 CPUs need nr_cpu_ids of
# 1920. A pseries guest has them as possible CPUs (qemu's maxcpus) with one
# SMT8 core present (pseries adds CPUs a core at a time); its lab config has
# NR_CPUS=2048 (configs/pseries-cpus.config). Percpu areas are set up for
# every possible CPU: 4 GiB.
SCALE_TOPOLOGY = topomod.Topology(16, 15, 8, name="16x15x8")
SCALE_PRESENT = 8
SCALE_MEMORY_MIB = 4096
# The case that prints the counts at scale, and the boot's filter.
SCALE_CASE = "sched_fair_lb.swb_probe_counts_at_scale"


def scale_refusal(arch: Optional[str]) -> Optional[str]:
    """Why ARCH's guest cannot run the scale boot (None: it can)."""
    target = get_target(arch)
    if target.kunit_scale:
        return None
    able = ", ".join(t.arch for t in TARGETS.values() if t.kunit_scale)
    return (f"--scale needs {SCALE_TOPOLOGY.cpus} possible CPUs, which the {target.arch} guest "
            f"here cannot have (the host's qemu 7.2 gives x86 at most 255, and its lab "
            f"config has NR_CPUS=256): use --arch {able} (qemu's pseries machine)")


def _scale_boot(tree_path: Path, image: Path, arch: str, timeout: float,
                tag: str) -> Tuple[KunitResult, List[kunit_report.ProbeRow], List[str]]:
    """One scale boot: its result, its 'swb-scale:' rows and what is wrong
    with them (a fixture skipped or not printed, a failure)."""
    res = run_kunit(tree_path, image, SCALE_TOPOLOGY, None, filter_glob=SCALE_CASE,
                    timeout=timeout, memory_mib=SCALE_MEMORY_MIB, arch=arch, log_tag=tag,
                    present=SCALE_PRESENT)
    rows = kunit_scale.parse_scale_lines(res.log.read_text(errors="replace"))
    problems = []
    if not res.ok:
        problems.append(f"{res.passed} passed, {res.failed} failed")
    skipped = [name for name, status in res.results
               if name.startswith(SCALE_CASE) and status == "SKIP"]
    if skipped:
        problems.append("skipped (nr_cpu_ids below the fixture's CPUs: is NR_CPUS 2048?): "
                        + ", ".join(skipped))
    gone = kunit_scale.missing(rows)
    if gone:
        problems.append("no probe counts for " + ", ".join(gone))
    if problems:
        problems.append(f"console: {res.log}")
    return res, rows, problems


def _boot_line(what: str, res: KunitResult) -> str:
    return (f"  {what}: {res.passed} passed, {res.failed} failed, {res.skipped} skipped in "
            f"{res.seconds:.1f}s under {res.accel} (console: {res.log})")


def run_scale(tree_path: Path, image: Path, timeout: float, arch: str,
              reference: Optional[Path] = None) -> bool:
    """'./schedlab kunit --scale': the probe table on 192, 768 and 1920 CPUs
    and its growth exponents (upstream's with reference: the KUnit series
    alone, booted first). True if every fixture of each boot printed."""
    why = scale_refusal(arch)
    if why:
        raise LabError(why)
    say(f"  the guest gives nr_cpu_ids {SCALE_TOPOLOGY.cpus} with {SCALE_PRESENT} CPUs present; "
        "the fixtures are simulated in memory")
    ref_rows: List[kunit_report.ProbeRow] = []
    if reference is not None:
        say(f"  reference: the KUnit series alone, v7.3's code ({SCALE_CASE})")
        ref, ref_rows, problems = _scale_boot(tree_path, reference, arch, timeout,
                                              "-scale-reference")
        if problems:
            say("  the reference boot did not give the counts at scale: " + "; ".join(problems))
            return False
        say(_boot_line("reference", ref))
    say(f"  this kernel ({SCALE_CASE})")
    res, rows, problems = _scale_boot(tree_path, image, arch, timeout, "-scale")
    say(res.summary.rstrip())
    merged = kunit_scale.merge(rows, ref_rows)
    for text in kunit_scale.report_lines(merged):
        say(text)
    more = kunit_scale.more_than_upstream(merged)
    for text in more:
        say(f"    {text} (MORE than v7.3)")
    say(_boot_line(f"KUnit at scale ({get_target(arch).arch}, {SCALE_TOPOLOGY.cpus} possible, "
                   f"{SCALE_PRESENT} present)", res))
    if problems:
        say("  " + "; ".join(problems))
    return not problems and not more

