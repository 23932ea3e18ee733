"""The series' kselftest (tools/testing/selftests/sched/) in the lab VM."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import List, Optional, Tuple

from schedlab.core import source
from schedlab.core import topology as topomod
from schedlab.core import vm
from schedlab.core.spec import VmOptions
from schedlab.core.util import LabError, run, say, work_dir

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


# How the harness says a test ended or could not run: "# <test>: Test
# terminated by timeout", "# <test>: unable to open pidfd", "# ERROR
# SPAWNING TEST CHILD", ...
_HARNESS_NOTE = re.compile(r"# (\w+: (Test |unable |Failed )|ERROR )")


def report_lines(tap: str, program: str) -> List[str]:
    """The TAP lines worth printing: results, the tests' own lines (TH_LOG,
    a failed expectation: "# <program>.c:<line>:<test>:...") and the
    harness's word on how a test ended ("# <test>: Test terminated by
    timeout")."""
    return [line for line in tap.splitlines()
            if line.startswith(("ok ", "not ok ", "#      ", f"# {program}.c:"))
            or _HARNESS_NOTE.match(line)]


def run_selftest(tree: source.Tree, image: Path, opts: VmOptions, boots: int = 1) -> bool:
    """The series' kselftest in the lab VM, in BOOTS boots one after the
    other; the TAP output of each is kept in work/ (run/, or run/bootN/).
    Single-threaded where TCG is the accelerator, as a precaution: a write
    that turns the factor on or off flips a static key, which patches
    kernel text, and one boot of about 45 under multi-threaded TCG hung."""
    topology, program = SELFTEST
    binary = build_selftest(tree, program)
    if binary is None:
        say(f"  the tree has no tools/testing/selftests/sched/{program}.c: skipped")
        return True
    shutil.rmtree(binary.parent / "run", ignore_errors=True)
    passed = 0
    for i in range(1, boots + 1):
        out = binary.parent / "run" / (f"boot{i}" if boots > 1 else "")
        out.mkdir(parents=True, exist_ok=True)
        if boots > 1:
            say(f"  boot {i} of {boots}")
        cmd = f"{shlex.quote(str(binary))} > {out}/tap.txt 2>&1; echo $? > {out}/status.txt"
        try:
            vm.boot(image, topomod.parse_topology(topology), cmd, online=opts.online,
                    memory_mib=opts.memory, kernel_args=opts.append, timeout=opts.timeout,
                    rwdirs=[out], quiet=i > 1, tcg_single=True)
        except LabError as e:
            # A VM that did not finish: what the test printed is still worth seeing.
            say(f"  {e}")
        tap = (out / "tap.txt").read_text(errors="replace") if (out / "tap.txt").is_file() else ""
        status = (out / "status.txt").read_text().strip() if (out / "status.txt").is_file() else ""
        for line in report_lines(tap, program):
            say(f"  {line}")
        ok, text = verdict(tap, status)
        say(f"  {program}: {text} (TAP: {out / 'tap.txt'})")
        passed += ok
    if boots > 1:
        say(f"  {program}: passed in {passed} of {boots} boots")
    return passed == boots
