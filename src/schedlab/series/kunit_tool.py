"""The series' KUnit suites run the way users run them: the tree's own kunit.py.

Detail: docs/modules.md, section series/kunit_tool.py.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

from schedlab.core import build as buildmod
from schedlab.core import guests
from schedlab.core.targets import get_target
from schedlab.core.util import log_dir, run_in_group, say, work_dir

KUNITCONFIG = "kernel/sched"
# Cases allowed to skip with two of 192 CPUs online (suite.case): the
# live-domain comparison, and the fixtures of 768 and 1920 CPUs of the
# table at scale (its 192-CPU fixture runs).
MAY_SKIP = {"sched_fair_lb.fixture_matches_live_domains",
            "sched_fair_lb.swb_probe_counts_at_scale.multi-llc-2x12x16x2",
            "sched_fair_lb.swb_probe_counts_at_scale.smt8-16x15x8"}


def command(build_dir: Path, json_path: Path, jobs: int,
            cc: Optional[str] = None, arch: Optional[str] = None) -> List[str]:
    """The README's kunit.py command, with a build folder and a JSON report:
    the series' qemu configuration of ARCH's boot target (None: x86_64),
    cross-compiled where the target is (ppc64le on an x86_64 host)."""
    target = get_target(arch)
    cmd = ["./tools/testing/kunit/kunit.py", "run", f"--kunitconfig={KUNITCONFIG}",
           f"--arch={target.kunit_qemu_arch}",
           f"--build_dir={build_dir}", f"--jobs={jobs}", f"--json={json_path}"]
    if target.cross_compile:
        cmd.append(f"--cross_compile={target.cross_compile}")
    if cc:
        cmd.append(f"--make_options=CC={cc}")
    return cmd


def with_kvm_hidden(cmd: List[str]) -> List[str]:
    """The README's TCG fallback: cmd in a private mount namespace in which
    /dev/kvm is /dev/null (as root; a user adds --map-root-user)."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind /dev/null /dev/kvm && exec "$@"', "sh", *cmd]


def leaves(group: dict, path: Tuple[str, ...] = ()) -> Iterator[Tuple[str, str]]:
    """(suite.case[.param], status) of every leaf of kunit.py's JSON report."""
    name = group.get("name", "")
    here = path + ((name,) if path or name != "KUnit Test Group" else ())
    for case in group.get("test_cases", []):
        yield ".".join(here + (case.get("name", ""),)), case.get("status", "")
    for sub in group.get("sub_groups", []):
        yield from leaves(sub, here)


def load_report(path: Path) -> Optional[dict]:
    """kunit.py's JSON report ('--json=FILE'), None if it wrote none."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


@dataclass
class Counts:
    """kunit.py's totals: its 'Testing complete. Ran N tests: ...' line."""
    passed: int = 0
    failed: int = 0
    crashed: int = 0
    skipped: int = 0
    errors: int = 0      # parse errors (no KTAP output, missing results), not tests

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.crashed + self.skipped


def counts(report: dict) -> Counts:
    """The totals of a report: its top group's 'misc', which kunit.py fills
    with the counts it prints (a parameterised case that fails around passing
    parameters counts once more as failed there than its leaves show); a
    report without it is counted from its leaves."""
    misc = report.get("misc")
    if isinstance(misc, dict):
        return Counts(*(int(misc.get(k) or 0)
                        for k in ("passed", "failed", "crashed", "skipped", "errors")))
    statuses = [status for _, status in leaves(report)]
    passed, skipped, crashed = (statuses.count(s) for s in ("PASS", "SKIP", "ERROR"))
    return Counts(passed, len(statuses) - passed - skipped - crashed, crashed, skipped)


def verdict(report: dict) -> Tuple[bool, str]:
    """Whether a kunit.py report is a full pass: tests ran, none failed, and
    only MAY_SKIP skipped (a parameterised case skips as case.param)."""
    results = list(leaves(report))
    failed = [n for n, s in results if s not in ("PASS", "SKIP")]
    skipped = [n for n, s in results if s == "SKIP"]
    unexpected = [n for n in skipped if not any(n == m or n.startswith(m + ".")
                                                for m in MAY_SKIP)]
    passed = sum(1 for _, s in results if s == "PASS")
    line = f"{passed} passed, {len(failed)} failed, {len(skipped)} skipped"
    if skipped:
        line += f" ({', '.join(skipped[:6])}{', ...' if len(skipped) > 6 else ''})"
    problems = []
    if not results:
        problems.append("no test ran")
    if failed:
        problems.append("failed: " + ", ".join(failed[:10]))
    if unexpected:
        problems.append("skipped, and only " + ", ".join(sorted(MAY_SKIP))
                        + " may skip in this run: " + ", ".join(unexpected[:10]))
    return not problems, line + "".join(f"\n  FAIL: {p}" for p in problems)


@dataclass
class ToolResult:
    ok: bool
    line: str
    seconds: float
    log: Path
    hid_kvm: bool


def run(tree_path: Path, build_dir: Path, hide_kvm: bool, env: dict,
        cc: Optional[str] = None, timeout: float = 3600,
        arch: Optional[str] = None) -> ToolResult:
    """Run kunit.py in the tree (it builds, boots and parses by itself)."""
    suffix = get_target(arch).log_suffix
    json_path = log_dir() / f"kunit-tool{suffix}.json"
    log = log_dir() / f"kunit-tool{suffix}.log"
    json_path.unlink(missing_ok=True)
    cmd = command(build_dir, json_path, (os.cpu_count() or 1) + 1, cc, arch)
    if hide_kvm:
        if not os.path.exists("/dev/kvm"):
            hide_kvm = False
        else:
            cmd = with_kvm_hidden(cmd)
    say(f"  $ {shlex.join(cmd)}")
    start = time.monotonic()
    status = run_in_group(cmd, log, timeout, "kunit.py", cwd=tree_path, env=env)
    took = time.monotonic() - start
    out = log.read_text(errors="replace")
    for ln in out.splitlines():
        if "Testing complete" in ln or "Elapsed time" in ln or "[SKIPPED]" in ln:
            say(f"  {ln.strip()}")
    report = load_report(json_path)
    if report is None:
        tail = "\n    ".join(out.strip().splitlines()[-15:])
        return ToolResult(False, f"kunit.py wrote no report (status {status}); "
                          f"last lines:\n    {tail}", took, log, hide_kvm)
    ok, line = verdict(report)
    if status != 0:
        ok = False
        line += f"\n  FAIL: kunit.py exited with status {status}"
    return ToolResult(ok, line, took, log, hide_kvm)


def run_readme_command(tree_path: Path, tree_key: str, image: Path,
                       arch: Optional[str] = None) -> bool:
    """The README's plain kunit.py command for ARCH's boot target (None:
    x86_64), with its TCG fallback where KVM is broken (image: a lab kernel,
    only to find out whether KVM works here; a target without KVM is TCG
    here anyway)."""
    target = get_target(arch)
    kvm, why = guests.accelerator(target, image)
    say(f"  KVM: {'works' if kvm else 'not usable'} ({why})"
        + ("" if kvm else "; /dev/kvm hidden from qemu (docs/kunit.md: TCG fallback)"))
    gcc = target.cross_compile + "gcc"
    env = dict(os.environ, **buildmod.ccache_env())
    # kunit.py runs the target's qemu from PATH: where the lab has one of
    # its own (pseries with SMT under TCG), that one first.
    qemu_dir = os.path.dirname(guests.qemu_binary(target))
    if qemu_dir:
        env["PATH"] = f"{qemu_dir}:{env.get('PATH', '/usr/bin:/bin')}"
        say(f"  {target.qemu} from {qemu_dir} (first in PATH)")
    res = run(tree_path, work_dir() / "build" / tree_key / f"kunit-tool{target.log_suffix}",
              hide_kvm=not kvm, env=env,
              cc=f"ccache {gcc}" if shutil.which("ccache") else None, arch=arch)
    say(f"  kunit.py: {res.line}")
    say(f"  kunit.py: {'ok' if res.ok else 'FAILED'} in {res.seconds:.0f}s, build and boot "
        f"included (log: {res.log})")
    return res.ok
