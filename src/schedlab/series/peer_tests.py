"""The kernel's own scheduler and cgroup tests on base and on patched.

Detail: docs/modules.md, section series/peer_tests.py.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from schedlab.core import source
from schedlab.core import topology as topomod
from schedlab.core import vm
from schedlab.core.spec import BuildSpec, TreeSpec
from schedlab.core.util import LabError, package_file, repo_dir, run, say, work_dir
from schedlab.series import kunit as kunitmod
from schedlab.series import patchset
from schedlab.series.topics import built

TOPOLOGY = "smt4"
CGROUP_TESTS = ("test_cpu", "test_cpuset")
# A selftest program runs at most 1 + RETRIES_PER_BOOT times on a boot
# (guest/peer-selftests.sh); one with a test that failed in every attempt
# runs again on a fresh boot, up to SELFTEST_BOOTS boots, unless base did
# not pass that test either.  How far test_cpu's share tests land from
# their tolerance under single-thread TCG changes from boot to boot
# (docs/reliability-notes.md).
RETRIES_PER_BOOT = 3
SELFTEST_BOOTS = 2
# A test's status: PASS, FAIL, SKIP, or MISSING (not in this variant's run).
PASS, FAIL, SKIP, MISSING = "PASS", "FAIL", "SKIP", "MISSING"
KSFT_SKIP = 4
_TAP = re.compile(r"^(not ok|ok) \d+ (?:- )?(.*?)(?:\s+#\s*(SKIP|skip).*)?$")


@dataclass
class PeerResult:
    variant: str
    release: str = ""
    kunit: Dict[str, str] = field(default_factory=dict)       # suite.case[.param] -> status
    selftests: Dict[str, str] = field(default_factory=dict)   # program[.case] -> status
    # program[.case] -> its status in each attempt, for the programs that ran
    # again after failing (RETRIES_PER_BOOT on a boot, up to SELFTEST_BOOTS boots)
    attempts: Dict[str, List[str]] = field(default_factory=dict)
    problems: List[str] = field(default_factory=list)
    out: str = ""

    def all(self) -> Dict[str, str]:
        return {**{f"kunit: {k}": v for k, v in self.kunit.items()},
                **{f"kselftest: {k}": v for k, v in self.selftests.items()}}


def kunit_status(status: str) -> str:
    return {"PASS": PASS, "SKIP": SKIP}.get(status, FAIL)


def selftest_results(name: str, output: str, status: str) -> Dict[str, str]:
    """A program's result, and its TAP cases' when it prints TAP: a program
    passes when it exits 0, skips on KSFT_SKIP (4)."""
    out: Dict[str, str] = {}
    for line in output.splitlines():
        m = _TAP.match(line.strip())
        if m:
            out[f"{name}.{m.group(2)}"] = SKIP if m.group(3) else (
                PASS if m.group(1) == "ok" else FAIL)
    out[name] = PASS if status == "0" else SKIP if status == str(KSFT_SKIP) else FAIL
    return out


def merge_attempts(attempts: List[Dict[str, str]]) -> Tuple[Dict[str, str], Dict[str, List[str]]]:
    """One program's results over its attempts: a test passes when it passed
    in one of them, else it keeps its first status; with more than one
    attempt, every test's statuses in order."""
    final: Dict[str, str] = {}
    seen: Dict[str, List[str]] = {}
    for name in sorted({k for a in attempts for k in a}):
        statuses = [a.get(name, MISSING) for a in attempts]
        final[name] = PASS if PASS in statuses else next(
            s for s in statuses if s != MISSING)
        if len(attempts) > 1:
            seen[name] = statuses
    return final, seen


def read_attempts(out: Path, name: str) -> List[Dict[str, str]]:
    """The results of program NAME's attempts in the guest's folder OUT."""
    got = []
    for k in range(0, 10):
        stem = out / (name if k == 0 else f"{name}.retry{k}")
        txt, st = Path(f"{stem}.txt"), Path(f"{stem}.status")
        if k and not st.is_file():
            break
        status = st.read_text().strip() if st.is_file() else ""
        got.append(selftest_results(name, txt.read_text(errors="replace")
                                    if txt.is_file() else "", status))
    return got


def new_failures(results: Dict[str, str], base: Optional[PeerResult]) -> List[str]:
    """The tests of one program's merged RESULTS that failed in every
    attempt and could be an error: base passed them, or there is no base."""
    return sorted(t for t, st in results.items() if st == FAIL
                  and (base is None or base.selftests.get(t) == PASS))


def _has_file(tree: source.Tree, commit: str, path: str) -> bool:
    return run(["git", "-C", str(tree.path), "cat-file", "-e", f"{commit}:{path}"],
               capture=True, check=False).returncode == 0


def build_selftests(tree: source.Tree, commit: str) -> List[Path]:
    """The programs to run: sched's selftests that COMMIT has, and the cgroup
    ones, built from the checked-out tree into work/peer-tests/bin/."""
    out = work_dir() / "peer-tests" / "bin"
    progs: List[Path] = []
    sched = tree.path / "tools/testing/selftests/sched"
    for c in sorted(sched.glob("*.c")):
        if _has_file(tree, commit, f"tools/testing/selftests/sched/{c.name}"):
            progs.append(out / "sched" / c.stem)
    progs += [out / "cgroup" / t for t in CGROUP_TESTS]
    for suite in ("sched", "cgroup"):
        targets = [str(p) for p in progs if p.parent.name == suite]
        (out / suite).mkdir(parents=True, exist_ok=True)
        proc = run(["make", "-C", str(tree.path / "tools/testing/selftests" / suite),
                    f"OUTPUT={out / suite}", *targets], capture=True, check=False)
        if proc.returncode != 0:
            raise LabError(f"building the {suite} selftests failed:\n"
                           + proc.stdout[-2000:] + proc.stderr[-2000:])
    return progs


def run_variant(tree: source.Tree, variant: str, no_build: bool = False,
                timeout: float = 5400) -> PeerResult:
    commit = patchset.ensure_variant(tree, variant, False)
    kernel = built(tree, BuildSpec(variant, "debug", None, False, no_build))
    out = work_dir() / "peer-tests" / f"{variant}-{time.strftime('%Y%m%dT%H%M%S')}"
    out.mkdir(parents=True)
    res = PeerResult(variant, out=str(out))
    topo = topomod.parse_topology(TOPOLOGY)

    say(f"  KUnit: every suite of the debug config ({variant}) on {TOPOLOGY}")
    k = kunitmod.run_kunit(tree.path, kernel.image, topo, None, timeout=timeout,
                           memory_mib=4096)
    res.kunit = {name: kunit_status(s) for name, s in k.results}
    say(f"  KUnit: {k.passed} passed, {k.failed} failed, {k.skipped} skipped in "
        f"{k.seconds:.0f}s (console: {k.log})")
    if not res.kunit:
        res.problems.append(f"KUnit: no test ran (console: {k.log})")

    progs = build_selftests(tree, commit)
    # What did not pass on base is not retried on patched (only a new
    # failure could be an error): guest/peer-selftests.sh.
    base = latest("base") if variant != "base" else None
    if base:
        (out / "known-failures").write_text(
            "".join(f"{t}\n" for t, st in sorted(base.selftests.items()) if st != PASS))
    say(f"  kselftests: {', '.join(p.parent.name + '/' + p.name for p in progs)}")
    todo = progs
    boots: List[Tuple[Path, List[Path]]] = []   # each boot's folder and programs
    for boot in range(1, SELFTEST_BOOTS + 1):
        where = out if boot == 1 else out / f"boot{boot}"
        if boot > 1:
            say(f"  kselftests, boot {boot} (failed in every attempt of the first): "
                + ", ".join(p.parent.name + "/" + p.name for p in todo))
            where.mkdir()
            if base:
                (where / "known-failures").write_text((out / "known-failures").read_text())
        cmd = " ".join([f"RETRIES={RETRIES_PER_BOOT}",
                        f"bash {package_file('guest/peer-selftests.sh')}", str(where),
                        *map(str, todo), f"; uname -r > {out}/release.txt"])
        boots.append((where, todo))
        try:
            vm.boot(kernel.image, topo, cmd, memory_mib=4096, timeout=timeout,
                    rwdirs=[out], tcg_single=True, log=where / "console.txt")
        except LabError as exc:
            res.problems.append(str(exc))
            break
        todo = [p for p in todo if new_failures(
            merge_attempts(read_attempts(where, f"{p.parent.name}.{p.name}"))[0], base)]
        if not todo:
            break
    for p in progs:
        final, seen = merge_attempts([a for f, ran in boots if p in ran
                                      for a in read_attempts(f, f"{p.parent.name}.{p.name}")])
        res.selftests.update(final)
        res.attempts.update(seen)
    rel = out / "release.txt"
    res.release = rel.read_text().strip() if rel.is_file() else ""
    (out / "results.json").write_text(json.dumps(asdict(res), indent=1) + "\n")
    return res


def saved(variant: str) -> Path:
    return repo_dir() / "results" / "peer-tests" / f"{variant}.json"


def latest(variant: str) -> Optional[PeerResult]:
    """The newest run of VARIANT under work/, else the one kept in results/."""
    found = sorted((work_dir() / "peer-tests").glob(f"{variant}-*/results.json"))
    if not found and saved(variant).is_file():
        found = [saved(variant)]
    return PeerResult(**json.loads(found[-1].read_text())) if found else None


def compare(base: Optional[PeerResult], patched: Optional[PeerResult]
            ) -> Tuple[List[str], List[str]]:
    """The side-by-side report lines, and the errors: tests base passes and
    patched does not."""
    b = base.all() if base else {}
    p = patched.all() if patched else {}
    lines = []
    for name, res in (("base", base), ("patched", patched)):
        if res is None:
            lines.append(f"  {name}: not run (./schedlab peer-tests --variant {name})")
            continue
        st = list(res.all().values())
        lines.append(f"  {name} ({res.release or '?'}): " + ", ".join(
            f"{st.count(s)} {s.lower()}" for s in (PASS, FAIL, SKIP)) + f"  [{res.out}]")
    errors = []
    rows = []
    for t in sorted(set(b) | set(p)):
        sb, sp = b.get(t, MISSING), p.get(t, MISSING)
        if sb == sp == PASS or PASS in (sb, sp) and not (base and patched):
            continue
        if base and patched and sb == PASS:
            errors.append(f"{t}: passes on base, {sp.lower()} on patched")
        rows.append(f"  {sb:8} {sp:8} {t}")
    if rows:
        lines.append("  base     patched  test (every test not passing on both, or on the one run)")
        lines += rows
    for name, res in (("base", base), ("patched", patched)):
        for t, statuses in sorted((res.attempts if res else {}).items()):
            if len(set(statuses)) > 1:
                lines.append(f"  {name}: {t} ran {len(statuses)} times: "
                             + ", ".join(x.lower() for x in statuses))
    return lines, errors


def run_peer_tests(tree_spec: TreeSpec, variants: List[str], no_build: bool = False,
                   timeout: float = 5400, save: bool = False) -> bool:
    tree = tree_spec.resolve()
    got: Dict[str, Optional[PeerResult]] = {}
    for v in variants:
        got[v] = res = run_variant(tree, v, no_build, timeout)
        if save and not res.problems:
            saved(v).parent.mkdir(parents=True, exist_ok=True)
            saved(v).write_text(json.dumps(asdict(res), indent=1) + "\n")
            say(f"  kept in {saved(v)}")
    base = got.get("base") or latest("base")
    patched = got.get("patched") or latest("patched")
    lines, errors = compare(base, patched)
    for line in lines:
        say(line)
    problems = [p for r in got.values() if r for p in r.problems] + errors
    for p in problems:
        say(f"  FAIL: {p}")
    say(f"peer tests: {'ok' if not problems else f'{len(problems)} problem(s)'}")
    return not problems
