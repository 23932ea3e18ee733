"""The series' KUnit suites run the way users run them: the tree's own kunit.py.

    ./tools/testing/kunit/kunit.py run --kunitconfig=kernel/sched \\
        --qemu_config=kernel/sched/tests/kunit_qemu_x86_64.py

kunit.py builds its own small kernel from kernel/sched/.kunitconfig and boots
it with the series' qemu configuration (192 possible CPUs, 2 online). It
asks qemu for '-accel kvm' first; where /dev/kvm exists but KVM does not
work, as on the lab machines (nested, paravirtual), qemu would hang in KVM.
The README's fallback runs kunit.py in a private mount namespace in which
/dev/kvm is /dev/null: qemu's KVM initialisation then fails at once and qemu
falls back to TCG. The lab uses exactly that command (with_kvm_hidden()).

The verdict: kunit.py succeeds, runs tests, and skips nothing but
fixture_matches_live_domains, which needs every possible CPU online.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

from .util import log_dir, run_in_group, say

QEMU_CONFIG = "kernel/sched/tests/kunit_qemu_x86_64.py"
KUNITCONFIG = "kernel/sched"
# Cases allowed to skip with two of 192 CPUs online (suite.case).
MAY_SKIP = {"sched_fair_lb.fixture_matches_live_domains"}


def command(build_dir: Path, json_path: Path, jobs: int,
            cc: Optional[str] = None) -> List[str]:
    """The README's kunit.py command, with a build folder and a JSON report."""
    cmd = ["./tools/testing/kunit/kunit.py", "run", f"--kunitconfig={KUNITCONFIG}",
           f"--qemu_config={QEMU_CONFIG}", f"--build_dir={build_dir}", f"--jobs={jobs}",
           f"--json={json_path}"]
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
        cc: Optional[str] = None, timeout: float = 3600) -> ToolResult:
    """Run kunit.py in the tree (it builds, boots and parses by itself)."""
    json_path = log_dir() / "kunit-tool.json"
    log = log_dir() / "kunit-tool.log"
    json_path.unlink(missing_ok=True)
    cmd = command(build_dir, json_path, (os.cpu_count() or 1) + 1, cc)
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
    try:
        report = json.loads(json_path.read_text())
    except (OSError, ValueError):
        tail = "\n    ".join(out.strip().splitlines()[-15:])
        return ToolResult(False, f"kunit.py wrote no report (status {status}); "
                          f"last lines:\n    {tail}", took, log, hide_kvm)
    ok, line = verdict(report)
    if status != 0:
        ok = False
        line += f"\n  FAIL: kunit.py exited with status {status}"
    return ToolResult(ok, line, took, log, hide_kvm)
