"""The series' kselftest (tools/testing/selftests/sched/) in the lab VM."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Optional, Tuple

from . import source, vm
from . import topology as topomod
from .spec import VmOptions
from .util import LabError, run, say, work_dir

# The kselftest of the series the test command runs, and where: (topology, program).
SELFTEST = ("smt4", "newidle_gate_test")


def build_selftest(tree: source.Tree, program: str) -> Optional[Path]:
    """tools/testing/selftests/sched/PROGRAM of the tree, built into work/
    (None when the tree has no such test)."""
    src = tree.path / "tools/testing/selftests/sched"
    if not (src / f"{program}.c").is_file():
        return None
    out = work_dir() / "selftests" / "sched"
    out.mkdir(parents=True, exist_ok=True)
    proc = run(["make", "-C", str(src), f"OUTPUT={out}", str(out / program)], capture=True,
               check=False)
    if proc.returncode != 0:
        raise LabError(f"building the kselftest {program} failed:\n"
                       + proc.stdout[-2000:] + proc.stderr[-2000:])
    return out / program


_TAP_TOTALS = re.compile(r"# Totals: pass:(\d+) fail:(\d+) xfail:(\d+) xpass:(\d+) "
                         r"skip:(\d+) error:(\d+)")


def verdict(tap: str, status: str) -> Tuple[bool, str]:
    """ok when the program exited 0 and every test passed: a skip is a
    failure here, since the lab kernel has what the test needs."""
    m = _TAP_TOTALS.search(tap)
    if not m:
        return False, f"no kselftest totals in the output (exit status {status or '?'})"
    passed, failed, _, _, skipped, errors = map(int, m.groups())
    text = f"{passed} passed, {failed} failed, {skipped} skipped, {errors} errors"
    ok = status == "0" and passed > 0 and not (failed or skipped or errors)
    return ok, text + (f", exit status {status or '?'}" if status != "0" else "")


def run_selftest(tree: source.Tree, image: Path, opts: VmOptions) -> bool:
    """The series' kselftest in the lab VM; its TAP output is kept in work/."""
    topology, program = SELFTEST
    binary = build_selftest(tree, program)
    if binary is None:
        say(f"  the tree has no tools/testing/selftests/sched/{program}.c: skipped")
        return True
    out = binary.parent / "run"
    out.mkdir(exist_ok=True)
    for f in ("tap.txt", "status.txt"):
        (out / f).unlink(missing_ok=True)
    cmd = f"{shlex.quote(str(binary))} > {out}/tap.txt 2>&1; echo $? > {out}/status.txt"
    vm.boot(image, topomod.parse_topology(topology), cmd, online=opts.online,
            memory_mib=opts.memory, kernel_args=opts.append, timeout=opts.timeout,
            rwdirs=[out])
    tap = (out / "tap.txt").read_text(errors="replace") if (out / "tap.txt").is_file() else ""
    status = (out / "status.txt").read_text().strip() if (out / "status.txt").is_file() else ""
    for line in tap.splitlines():
        if line.startswith(("ok ", "not ok ", "#      ", "# newly")) or "newly idle" in line:
            say(f"  {line}")
    ok, text = verdict(tap, status)
    say(f"  {program}: {text} (TAP: {out / 'tap.txt'})")
    return ok
