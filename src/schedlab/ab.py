"""'ab': base vs patched (or several arms) in the VM, from builds to tables.

Arms are a build and the knobs written before its plan; every arm is
compared with the first, a knob arm also with its build's plain arm.  With
--boots N the runs are spread over N boots per arm, the arms interleaved
boot by boot, so that the spread between boots is in every arm's runs and
the significance rule sees it.  Results of the same plan on the same builds
are reused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from . import compare as comparemod
from . import deps
from . import equivalence as eqmod
from . import measure as measuremod
from . import plan as planmod
from . import results as resmod
from .plan import Plan
from .spec import TreeSpec, built, probe_build
from .util import LabError, Stages, say


@dataclass(frozen=True)
class Arm:
    """One side of an 'ab' run: a build and the knobs written before its plan."""
    name: str
    variant: str
    knobs: Tuple[Tuple[str, str], ...] = ()


DEFAULT_ARMS = (Arm("base", "base"), Arm("patched", "patched"))
_ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def parse_arms(items: Optional[List[str]]) -> List[Arm]:
    """--arm NAME=VARIANT[:KNOB=VALUE...], in the order given (the first is the
    reference every other arm is compared with)."""
    if not items:
        return list(DEFAULT_ARMS)
    arms: List[Arm] = []
    for item in items:
        name, eq, rest = item.partition("=")
        variant, *knobs = rest.split(":")
        if not eq or not _ARM_NAME.fullmatch(name) or variant not in ("base", "patched"):
            raise LabError(f"--arm {item!r}: expected NAME=VARIANT[:KNOB=VALUE...], VARIANT "
                           "base or patched, e.g. x4=patched:newidle_cost_pct=400")
        if any(a.name == name for a in arms):
            raise LabError(f"--arm {name} is given twice")
        arms.append(Arm(name, variant, tuple(planmod.parse_knobs(knobs).items())))
    if len(arms) < 2:
        raise LabError("ab needs two arms or more")
    return arms


def arm_pairs(arms: List[Arm]) -> List[Tuple[Arm, Arm]]:
    """What 'ab' compares: every arm with the first; an arm with knobs also with
    the arm of the same build without knobs (the knob's own effect)."""
    pairs = [(arms[0], a) for a in arms[1:]]
    for a in arms[1:]:
        plain = [p for p in arms if p.variant == a.variant and not p.knobs]
        if a.knobs and plain and plain[0] is not arms[0] and (plain[0], a) not in pairs:
            pairs.append((plain[0], a))
    return pairs


@dataclass(frozen=True)
class AbRequest:
    tree: TreeSpec
    plan: Plan
    topology: str
    arms: Tuple[Arm, ...]
    prefix: str
    boots: int = 1
    fresh: bool = False
    online: Optional[int] = None
    timeout: float = 900
    arch: Optional[str] = None

    def label(self, arm: Arm) -> str:
        return f"{self.prefix}-{arm.name}"


def _reusable(label: str, key: str, plan: Plan, runs: int) -> bool:
    """Results of the same plan on the same builds, every run complete."""
    folder = resmod.results_dir(label)
    try:
        meta = resmod.read_plan(folder)
        done = resmod.read_runs(folder)
    except (OSError, ValueError, LabError):
        return False
    return (meta.key == key and meta.plan == plan.names() and meta.runs == runs
            and len(done) == len(plan.workloads) * runs and all(r.complete for r in done))


def _pinned_latency_tool(plan: Plan, label: str) -> Plan:
    """The same latency tool on every arm: auto's choice depends on how fast
    bcc starts, i.e. on the machine's load at the time."""
    used = comparemod.setting(comparemod.load_runs(resmod.results_dir(label)), "latency_tool")
    tool = json.loads(next(iter(used))) if len(used) == 1 else None
    if tool in planmod.probemod.LATENCY_TOOLS[1:]:
        say(f"  the next measurements use the latency tool base used: {tool}")
        return plan.with_(latency_tool=tool)
    return plan


def run(req: AbRequest, tables_only: bool = False) -> int:
    st = Stages()
    try:
        if not tables_only:
            _measure(req, st)
        with st.stage("compare"):
            tables(req.prefix, list(req.arms), {a.name: req.label(a) for a in req.arms})
    finally:
        say(st.summary())
    return 0


def _measure(req: AbRequest, st: Stages) -> None:
    """Build what the arms need and measure the arms whose results are not there."""
    plan, arms = req.plan, list(req.arms)
    with st.stage("setup"):
        deps.setup()
        plan.check_tools()
    with st.stage("fetch"):
        tree = req.tree.resolve()
        say(f"  base: {tree.description}")
    built_by = {}
    for variant in [v for v in ("base", "patched") if any(a.variant == v for a in arms)]:
        with st.stage(f"build {variant} (probe config + measurement series)"):
            built_by[variant] = built(tree, probe_build(variant, arch=req.arch))
    keys = {a.name: json.dumps([built_by[a.variant].commit, built_by[a.variant].release,
                                req.topology, plan.seconds, list(plan.probes), plan.attach,
                                plan.latency_tool, req.online]
                               + ([plan.accel] if plan.accel != "auto" else [])
                               + ([req.boots] if req.boots > 1 else [])
                               + ([dict(a.knobs)] if a.knobs else []),
                               sort_keys=True) for a in arms}
    todo = [a for a in arms if req.fresh or not _reusable(
        req.label(a), keys[a.name], plan, plan.runs * req.boots)]
    for a in arms:
        if a not in todo:
            say(f"  results/{req.label(a)} already holds this plan on this build: "
                "reused (--fresh measures again)")
    if arms[0] not in todo and plan.latency_tool == "auto":
        plan = _pinned_latency_tool(plan, req.label(arms[0]))
    for boot in range(req.boots):
        for arm in todo:
            label = req.label(arm) if req.boots == 1 else f"{req.label(arm)}/boot-{boot}"
            knobs = "".join(f", {k}={v}" for k, v in arm.knobs)
            name = f"measure {arm.name} ({arm.variant}{knobs}) on {req.topology}" + \
                (f", boot {boot + 1} of {req.boots}" if req.boots > 1 else "")
            with st.stage(name):
                measuremod.measure_in_vm(tree, built_by[arm.variant], arm.variant, label,
                                         plan.with_(knobs=arm.knobs), req.topology,
                                         req.online, req.timeout, keys[arm.name], req.arch)
            if arm is arms[0] and plan.latency_tool == "auto":
                plan = _pinned_latency_tool(plan, label)
    if req.boots > 1:
        for arm in todo:
            resmod.merge_boots(resmod.results_dir(req.label(arm)), req.boots, keys[arm.name],
                               req.label(arm))


def tables(prefix: str, arms: List[Arm], labels: Dict[str, str]) -> None:
    """The pairwise tables, plots and the sweep table of an 'ab' run."""
    out = resmod.results_dir(prefix)
    out.mkdir(parents=True, exist_ok=True)
    pairs = arm_pairs(arms)
    for a, b in pairs:
        # One pair (base vs patched) keeps the plain names.
        tag = "" if len(pairs) == 1 else f"-{a.name}-vs-{b.name}"
        a_dir = resmod.results_dir(labels[a.name])
        b_dir = resmod.results_dir(labels[b.name])
        text = comparemod.compare_and_plot(a_dir, b_dir, False, out / f"plots{tag}")
        (out / f"compare{tag}.txt").write_text(text + "\n")
        (out / f"compare{tag}.md").write_text(
            comparemod.compare_and_plot(a_dir, b_dir, True, None) + "\n")
        (out / f"headline{tag}.md").write_text(
            comparemod.compare_and_plot(a_dir, b_dir, True, None, comparemod.HEADLINE) + "\n")
        say(f"{a.name} vs {b.name}:")
        say(comparemod.compare_and_plot(a_dir, b_dir, False, None, comparemod.HEADLINE))
        say(f"  every metric: {out / f'compare{tag}.txt'} (Markdown: compare{tag}.md, "
            f"headline rows: headline{tag}.md, plots: plots{tag}/)")
    if len(arms) > 2:
        sets = [(a.name, comparemod.load_runs(resmod.results_dir(labels[a.name])))
                for a in arms]
        (out / "sweep.md").write_text(comparemod.sweep_table(sets) + "\n")
        (out / "sweep.txt").write_text(comparemod.sweep_table(sets, False) + "\n")
        say(comparemod.sweep_table(sets, False))
        say(f"  sweep table: {out / 'sweep.md'}")
        replica = eqmod.find_replica([(a.name, a.variant, a.knobs) for a in arms])
        shown = [(n, r) for n, r in sets if n != replica]
        from . import plots as plotmod
        if plotmod.sweep_plot(shown, comparemod.SWEEP_COLUMNS, out / "sweep.png"):
            say(f"  sweep plot: {out / 'sweep.png'}")
        if replica:
            runs = dict(sets)
            named = [(a.name, b.name) for a, b in pairs]
            aa = (arms[0].name, replica)
            (out / "equivalence.md").write_text(eqmod.table(runs, aa, named) + "\n")
            (out / "equivalence.txt").write_text(eqmod.table(runs, aa, named, False) + "\n")
            say(f"  equivalence margins from the A/A pair {arms[0].name}/{replica}: "
                f"{out / 'equivalence.md'}")
