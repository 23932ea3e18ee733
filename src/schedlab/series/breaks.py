"""Deliberate breaks of the series' code, each of which some KUnit test must catch.

Detail: docs/modules.md, section series/breaks.py.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from schedlab.core import build as buildmod
from schedlab.core import topology as topomod
from schedlab.core.source import Tree
from schedlab.core.util import LabError, git
from schedlab.core.util import run as run_cmd
from schedlab.core.util import say
from schedlab.series import kunit
from schedlab.series.patchset import ensure_variant

FAIR = "kernel/sched/fair.c"
SWB = "sched_fair_lb.swb*"
WAKE = "sched_fair_wake.*"
VARIANT = "breaks"


@dataclass(frozen=True)
class Break:
    name: str
    what: str
    old: str
    new: str
    tests: str = SWB        # kunit.filter_glob of the tests meant to catch it
    path: str = FAIR


BREAKS: Tuple[Break, ...] = (
    Break("busy-dst-trusts-env-idle",
          "a busy dst taken from env->idle alone: a stale __CPU_NOT_IDLE sends an idle "
          "dst down the busy path",
          "\tif (env->idle != CPU_IDLE && !is_idle(env->dst_cpu))\n\t\tgoto busy;",
          "\tif (env->idle == __CPU_NOT_IDLE)\n\t\tgoto busy;"),
    Break("busy-balance-cpu-scans-on",
          "the busy group balance CPU goes on scanning after the first idle CPU",
          "\t\tif (cpu != env->dst_cpu && is_idle(cpu))\n\t\t\treturn 0;\n\t}\n\n\treturn 1;",
          "\t\tif (cpu != env->dst_cpu && is_idle(cpu))\n\t\t\tidle_smt = cpu;\n\t}\n\n"
          "\treturn idle_smt == -1;"),
    Break("scan-asks-twice",
          "the scan asks about every CPU it finds busy twice",
          "\t\tif (!is_idle(cpu)) {\n\t\t\t/* dst_cpu is busy after all",
          "\t\tif (!is_idle(cpu) && !is_idle(cpu)) {\n\t\t\t/* dst_cpu is busy after all"),
    Break("one-cpu-group-probes",
          "a local group of one CPU is asked about like any other",
          "\tif (sg->group_weight == 1 && cpumask_test_cpu(env->dst_cpu, "
          "group_balance_mask(sg)))\n\t\treturn 1;\n",
          ""),
    Break("one-core-group-cores-matter",
          "a local group that is one SMT core looks for an idle core",
          "\tif (!smt_active() || (sg->flags & SD_SHARE_CPUCAPACITY)) {",
          "\tif (!smt_active()) {"),
    Break("smt-inactive-cores-matter",
          "with SMT inactive the scan still looks for idle cores",
          "\tif (!smt_active() || (sg->flags & SD_SHARE_CPUCAPACITY)) {",
          "\tif (sg->flags & SD_SHARE_CPUCAPACITY) {"),
    Break("busy-dst-scans-on",
          "a dst the scan finds busy goes on scanning",
          "\t\t\tif (cpu == env->dst_cpu)\n\t\t\t\tgoto busy;\n",
          ""),
    Break("busy-core-not-pruned",
          "a busy CPU never prunes its core, also once an idle SMT fallback is known",
          "\t\t\tif (idle_smt == -1)\n\t\t\t\tcontinue;\n"
          "\t\t} else if (__is_core_idle(cpu, is_idle, smt_mask)) {",
          "\t\t\tcontinue;\n\t\t} else if (__is_core_idle(cpu, is_idle, smt_mask)) {"),
    Break("wake-no-load-test",
          "the wakee goes to a group-idle CPU whatever its load",
          "\t\t\tif (cpu_load_without(cpu_rq(cpu), p) <= target_load)\n\t\t\t\treturn cpu;",
          "\t\t\treturn cpu;", WAKE),
    Break("wake-strictly-less-load",
          "a group-idle CPU with the target's load is passed over",
          "cpu_load_without(cpu_rq(cpu), p) <= target_load",
          "cpu_load_without(cpu_rq(cpu), p) < target_load", WAKE),
    Break("wake-load-of-the-waker",
          "the load compared with the waking CPU's, not the target's",
          "target_load = cpu_load_without(cpu_rq(target), p);",
          "target_load = cpu_load_without(cpu_rq(smp_processor_id()), p);", WAKE),
)


def get(names: Sequence[str]) -> List[Break]:
    """The breaks named (all for none); unknown names refused."""
    if not names:
        return list(BREAKS)
    known = {b.name: b for b in BREAKS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise LabError(f"unknown break(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in names]


def apply(text: str, b: Break) -> Optional[str]:
    """TEXT with the break made; None when its text is not there exactly once."""
    if text.count(b.old) != 1:
        return None
    return text.replace(b.old, b.new, 1)


@dataclass
class BreakOutcome:
    name: str
    verdict: str            # caught, MISSED, crashed, no result, stale, error
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict == "caught"


def verdict(failed: int, crashed: int, passed: int) -> str:
    """A break is caught when a test failed on an assertion; a crash or a
    boot that ran no test tells nothing about the tests."""
    if failed > crashed:
        return "caught"
    if crashed:
        return "crashed"
    return "MISSED" if passed else "no result"


def run(tree: Tree, names: Sequence[str] = (), timeout: float = 900) -> Tuple[str, bool]:
    """Every break named (all for none), after the tests they are for pass
    on the unbroken series: the report and the verdict."""
    todo = get(names)
    patched = ensure_variant(tree, "patched")
    topo = topomod.parse_topology(kunit.DEFAULT_TOPOLOGY)
    globs = sorted({b.tests for b in todo})
    say(f"==> the unbroken series: {', '.join(globs)} must pass")
    image = buildmod.build(tree, VARIANT, patched, "lab").image
    for glob in globs:
        res = kunit.run_kunit(tree.path, image, topo, kunit.DEFAULT_ONLINE, filter_glob=glob,
                              timeout=timeout, log_tag="-break-none")
        if res.failed or not res.passed:
            return (f"the unbroken series: {res.failed} failed, {res.passed} passed in {glob} "
                    f"(console: {res.log}); a break cannot be told from that"), False
    outcomes: List[BreakOutcome] = []
    try:
        for b in todo:
            outcomes.append(_one(tree, patched, b, topo, timeout))
            say(f"<== break {b.name}: {_line(outcomes[-1]).strip()}")
    finally:
        with tree.locked("breaks: back to the series"):
            tree.checkout(patched)
    lines = [_line(o) for o in outcomes]
    caught = sum(o.ok for o in outcomes)
    lines.append(f"breaks: {caught} of {len(outcomes)} caught")
    return "\n".join(lines), caught == len(outcomes)


def _line(o: BreakOutcome) -> str:
    return f"  {o.verdict:9} {o.name}" + (f": {o.detail}" if o.detail else "")


def break_commit(tree: Tree, patched: str, b: Break) -> Optional[str]:
    """A commit on PATCHED with the break made, written without the work
    tree (a scratch index); None when the break is stale."""
    gitc = ["git", "-C", str(tree.path)]
    text = run_cmd(gitc + ["show", f"{patched}:{b.path}"], capture=True).stdout
    broken = apply(text, b)
    if broken is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=str(Path(tmp) / "index"),
                   GIT_AUTHOR_NAME="schedlab", GIT_AUTHOR_EMAIL="schedlab@localhost",
                   GIT_COMMITTER_NAME="schedlab", GIT_COMMITTER_EMAIL="schedlab@localhost")
        blob = run_cmd(gitc + ["hash-object", "-w", "--stdin"], capture=True,
                       input=broken).stdout.strip()
        run_cmd(gitc + ["read-tree", patched], env=env, capture=True)
        mode = git(tree.path, "ls-tree", patched, "--", b.path).split()[0]
        run_cmd(gitc + ["update-index", "--cacheinfo", f"{mode},{blob},{b.path}"], env=env,
                capture=True)
        tree_id = run_cmd(gitc + ["write-tree"], env=env, capture=True).stdout.strip()
        return run_cmd(gitc + ["commit-tree", tree_id, "-p", patched], env=env,
                       capture=True, input=f"break {b.name}\n").stdout.strip()


def _one(tree: Tree, patched: str, b: Break, topo: topomod.Topology,
         timeout: float) -> BreakOutcome:
    say(f"==> break {b.name}: {b.what}")
    commit = break_commit(tree, patched, b)
    if commit is None:
        return BreakOutcome(b.name, "stale", f"its text is not once in {b.path}")
    try:
        image = buildmod.build(tree, VARIANT, commit, "lab").image
        res = kunit.run_kunit(tree.path, image, topo, kunit.DEFAULT_ONLINE,
                              filter_glob=b.tests, timeout=timeout,
                              log_tag=f"-break-{b.name}")
    except LabError as e:
        return BreakOutcome(b.name, "error", str(e).splitlines()[0])
    failing = [name for name, status in res.results if status not in ("PASS", "SKIP")]
    return BreakOutcome(b.name, verdict(res.failed, res.crashed, res.passed),
                        f"{res.failed} failed ({', '.join(failing[:3])}), {res.passed} passed")
