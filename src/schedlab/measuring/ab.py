"""'ab': base vs patched (or several arms) in the VM, from builds to tables.

Detail: docs/modules.md, section measuring/ab.py.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from schedlab.core import deps
from schedlab.core.spec import TreeSpec
from schedlab.core.stages import Report
from schedlab.core.util import LabError, say
from schedlab.measuring import compare as comparemod
from schedlab.measuring import equivalence as eqmod
from schedlab.measuring import measure as measuremod
from schedlab.measuring import plan as planmod
from schedlab.measuring import plots as plotmod
from schedlab.measuring import probes as probemod
from schedlab.measuring import results as resmod
from schedlab.measuring import resume
from schedlab.measuring import tables as tablemod
from schedlab.measuring.measure import probe_build
from schedlab.measuring.plan import Plan
from schedlab.series import topics as topicmod
from schedlab.series.topics import built


@dataclass(frozen=True)
class Arm:
    """One side of an 'ab' run: a build and the knobs written before its plan."""
    name: str
    variant: str
    knobs: Tuple[Tuple[str, str], ...] = ()


DEFAULT_ARMS = (Arm("base", "base"), Arm("patched", "patched"))
# The whole series with the hardware kit's switches (patches/kit/): one
# build whose arms differ by their writes, e.g. kit=kit:swb_state=0.
KIT_VARIANT = "kit"
_ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def parse_arms(items: Optional[List[str]], topic: Optional[str] = None,
               per_patch: bool = False) -> List[Arm]:
    """--arm NAME=VARIANT[:KNOB=VALUE...], in the order given (the first is the
    reference every other arm is compared with).  VARIANT: base, patched,
    topic-NAME or topic-NAME@K (topics.variant_names()), or kit (KIT_VARIANT).
    topic, without arms:
    base against the base plus the KUnit series and that topic; with
    per_patch, also an arm per patch of the topic (NAME.K, its first K)."""
    if items and topic:
        raise LabError(f"--topic {topic} and --arm: give the topic's arm as "
                       f"--arm {topic}={topicmod.VARIANT_PREFIX}{topic}")
    if per_patch and not topic:
        raise LabError("--per-patch needs --topic NAME")
    if topic:
        chain = topicmod.steps(topic) if per_patch else [topicmod.VARIANT_PREFIX + topic]
        return [Arm("base", "base")] + [
            Arm(topic if k == len(chain) else f"{topic}.{k}", v)
            for k, v in enumerate(chain, 1)]
    if not items:
        return list(DEFAULT_ARMS)
    known = topicmod.variant_names() + [KIT_VARIANT]
    arms: List[Arm] = []
    for item in items:
        name, eq, rest = item.partition("=")
        variant, *knobs = rest.split(":")
        if not eq or not _ARM_NAME.fullmatch(name) or variant not in known:
            raise LabError(f"--arm {item!r}: expected NAME=VARIANT[:KNOB=VALUE...], VARIANT "
                           f"one of {', '.join(known)}, e.g. x4=patched:newidle_cost_pct=400")
        if any(a.name == name for a in arms):
            raise LabError(f"--arm {name} is given twice")
        arms.append(Arm(name, variant, tuple(planmod.parse_knobs(knobs).items())))
    if len(arms) < 2:
        raise LabError("ab needs two arms or more")
    return arms


def arm_pairs(arms: List[Arm]) -> List[Tuple[Arm, Arm]]:
    """What 'ab' compares: every arm with the first; an arm with knobs also with
    the arm of the same build without knobs (the knob's own effect); a topic's
    patch also with the arm of its patch before (that patch's own effect)."""
    pairs = [(arms[0], a) for a in arms[1:]]
    for a in arms[1:]:
        before = topicmod.step_before(a.variant)
        prev = [p for p in arms if p.variant == before and not p.knobs]
        if not a.knobs and prev and prev[0] is not arms[0] and (prev[0], a) not in pairs:
            pairs.append((prev[0], a))
    for a in arms[1:]:
        plain = [p for p in arms if p.variant == a.variant and not p.knobs]
        if a.knobs and plain and plain[0] is not arms[0] and (plain[0], a) not in pairs:
            pairs.append((plain[0], a))
    return pairs


@dataclass(frozen=True)
class AbRequest:
    tree: Optional[TreeSpec]    # None: on this machine, in the kernel it runs (host)
    plan: Plan
    topology: str
    arms: Tuple[Arm, ...]
    prefix: str
    boots: int = 1
    fresh: bool = False
    online: Optional[int] = None
    timeout: float = 900
    arch: Optional[str] = None
    host: bool = False          # the arms on this machine, rounds for boots (hw.py)
    # More pairs to compare, (A, B) by arm name, beside arm_pairs()'s: the
    # hardware kit's should_we_balance() states, each against the one before.
    pairs: Tuple[Tuple[str, str], ...] = ()
    plots: bool = True          # False: tables only (the kit's rehearsal plots on the host)
    # Called once the request is accepted (resume, builds), before the first
    # boot: hw.py records its run there, not for a request that is refused.
    on_start: Optional[Callable[[], None]] = field(default=None, compare=False)
    # The arms of each boot in an order shuffled with this seed (round_orders());
    # None: in the order given.
    order_seed: Optional[int] = None
    # On this machine: the arms its running kernel runs (their variant names
    # it), maybe none; the others run after a reboot into theirs, and the
    # tables wait for them.  None: every arm.
    here: Optional[Tuple[str, ...]] = None
    # On this machine: its online CPUs (sysfs's list).  Rounds on other CPUs
    # (another SMT mode, CPUs taken offline) are refused, not pooled.
    cpus: str = ""

    def runs_here(self, arm: Arm) -> bool:
        return self.here is None or arm.name in self.here

    def label(self, arm: Arm) -> str:
        return f"{self.prefix}-{arm.name}"

    def boot_label(self, arm: Arm, boot: int) -> str:
        """Where boot BOOT of ARM is measured: the arm's folder with one boot,
        its boot-K/ with several (pooled into the arm's folder after)."""
        return self.label(arm) if self.boots == 1 else f"{self.label(arm)}/boot-{boot}"

    def record(self) -> Dict[str, Any]:
        """What resume.py compares when the same command runs again."""
        tree = {"kernel": self.tree.kernel, "base": self.tree.base} if self.tree else "host"
        return {"tree": tree,
                **resume.plan_fields(self.plan),
                "arms": [[a.name, a.variant, dict(a.knobs)] for a in self.arms],
                "topology": self.topology, "boots": self.boots, "online": self.online,
                "arch": self.arch or "x86_64", "order_seed": self.order_seed,
                **({"cpus": self.cpus} if self.cpus else {})}

    def units(self) -> List[Tuple[int, Arm]]:
        """(boot, arm) in the order they are measured."""
        names = [a.name for a in self.arms]
        byname = {a.name: a for a in self.arms}
        if self.order_seed is None:
            return [(boot, arm) for boot in range(self.boots) for arm in self.arms]
        return [(boot, byname[n])
                for boot, order in enumerate(round_orders(names, self.order_seed, self.boots))
                for n in order]


def round_orders(names: Sequence[str], seed: int, rounds: int) -> List[List[str]]:
    """The arms' order in each of ROUNDS rounds, shuffled with SEED: the
    same seed gives the same orders, so a resumed run keeps them."""
    out = []
    for r in range(rounds):
        order = list(names)
        random.Random(f"{seed}:{r}").shuffle(order)
        out.append(order)
    return out


def _pinned_latency_tool(plan: Plan, label: str) -> Plan:
    """The same latency tool on every arm, the one the first arm measured
    (LABEL) used: auto's choice depends on how fast bcc starts, i.e. on the
    machine's load at the time."""
    try:
        used = tablemod.setting(tablemod.load_runs(resmod.results_dir(label)), "latency_tool")
    except LabError:
        return plan
    tool = json.loads(next(iter(used))) if len(used) == 1 else None
    if tool in probemod.LATENCY_TOOLS[1:] and tool != plan.latency_tool:
        say(f"  the next measurements use the latency tool {label} used: {tool}")
        return plan.with_(latency_tool=tool)
    return plan


def run(req: AbRequest, tables_only: bool = False) -> int:
    st = Report("ab")
    try:
        if tables_only:
            folders = {a.name: resmod.find(req.label(a)) for a in req.arms}
        else:
            _measure(req, st)
            folders = {a.name: resmod.results_dir(req.label(a)) for a in req.arms}
            record = resume.read(resmod.results_dir(req.prefix))
            elsewhere = [a for a in req.arms if not req.runs_here(a)]
            waiting = pending(req, record, elsewhere) if record else []
            if waiting:
                say(f"ab: no tables yet: {', '.join(waiting)} still to measure on their "
                    "kernel")
                return 0
        with st.stage("compare"):
            tables(resmod.results_dir(req.prefix), list(req.arms), folders, req.pairs,
                   req.plots)
    finally:
        say(st.summary())
    return 0


def _builds(req: AbRequest, st: Report) -> Tuple[Any, Dict[str, Any]]:
    """Setup, the tree and the probe builds the arms need: (tree, {variant: build})."""
    with st.stage("setup"):
        deps.setup()
        req.plan.check_tools()
    if req.tree is None:
        raise LabError("ab: no kernel tree to build")
    with st.stage("fetch"):
        tree = req.tree.resolve()
        say(f"  base: {tree.description}")
    built_by = {}
    for variant in dict.fromkeys(a.variant for a in req.arms):
        kit = variant == KIT_VARIANT
        spec = probe_build("patched" if kit else variant, arch=req.arch,
                           accel=req.plan.accel).with_(kit=kit)
        with st.stage(f"build {variant} ({spec.config} config + measurement series"
                      + (" + the kit's switches)" if kit else ")")):
            built_by[variant] = built(tree, spec)
    return tree, built_by


def _complete(folder: Path, key: str, plan: Plan) -> bool:
    """FOLDER holds one boot of PLAN measured with KEY, every run complete."""
    try:
        meta = resmod.read_plan(folder)
        done = resmod.read_runs(folder)
    except (OSError, ValueError, LabError):
        return False
    return (meta.key == key and meta.plan == plan.names() and meta.runs == plan.runs
            and len(done) == len(plan.workloads) * plan.runs and all(r.complete for r in done))


def _clear(folder: Path) -> None:
    """An arm's folder emptied of runs, boots and plan (nothing else is touched)."""
    for f in [*folder.glob("run-*.json"), folder / "plan.json"]:
        f.unlink(missing_ok=True)
    for boot in folder.glob("boot-*"):
        if boot.is_dir():
            shutil.rmtree(boot)


def _measure(req: AbRequest, st: Report) -> None:
    """Build what the arms need and measure the boots not finished yet."""
    plan, arms = req.plan, list(req.arms)
    out = resmod.results_dir(req.prefix)
    record = resume.start(out, "ab", req.record(), req.fresh,
                          [resmod.results_dir(req.label(a)) for a in arms])
    if req.host:
        # No build: the kernel is the one this machine runs, the one of every
        # arm that runs here (their variant names it).
        with st.stage("tools"):
            plan.check_tools()
        tree, built_by = None, {}   # type: Any, Dict[str, Any]
        setting = measuremod.host_setting(plan, "host")
        now = next((a.variant for a in arms if req.runs_here(a)), "")
        ident = {now: [os.uname().release, setting.config]} if now else {}
        if now:
            resume.check_builds(out, record, {now: {"release": ident[now][0],
                                                    "config": ident[now][1]}})
    else:
        tree, built_by = _builds(req, st)
        ident = {v: [b.commit, b.release] for v, b in built_by.items()}
        resume.check_builds(out, record, {v: {"commit": b.commit, "release": b.release}
                                          for v, b in built_by.items()})
    keys = {a.name: json.dumps(ident[a.variant] + [req.topology, plan.seconds, list(plan.probes), plan.attach,
                                plan.latency_tool, req.online]
                               + ([plan.accel] if plan.accel != "auto" else [])
                               # not their number: a request may add boots
                               + (["boots"] if req.boots > 1 else [])
                               + ([dict(a.knobs)] if a.knobs else [])
                               + (["warm-up"] if plan.warmup else []),
                               sort_keys=True) for a in arms if a.variant in ident}
    if req.on_start:
        req.on_start()
    if not record.finished:
        for a in arms:
            _clear(resmod.results_dir(req.label(a)))
    units = req.units()
    # An arm of another kernel was measured in another boot of the machine:
    # its record stands.
    kept = {(arm.name, boot) for boot, arm in units if record.done(arm.name, boot)
            and (arm.name not in keys or _complete(resmod.results_dir(req.boot_label(arm, boot)),
                                                   keys[arm.name], plan))}
    lost = [f"{n} boot {b + 1}" for n, b in record.finished if (n, b) not in kept]
    if lost:
        say(f"  recorded as finished but not there as such: {', '.join(lost)}: measured again")
    record.finished = [f for f in record.finished if f in kept]
    resume.write(out, record)
    if kept:
        say(f"  {out}: {len(kept)} of {len(units)} boots of this request already measured: "
            "going on with the next (--fresh measures them all again)")
    for boot, arm in units:
        label = req.boot_label(arm, boot)
        if (arm.name, boot) not in kept and req.runs_here(arm):
            knobs = "".join(f", {k}={v}" for k, v in arm.knobs)
            name = f"measure {arm.name} ({arm.variant}{knobs}) on {req.topology}" + \
                (f", boot {boot + 1} of {req.boots}" if req.boots > 1 else "")
            with st.stage(name):
                if req.host:
                    p = plan.with_(knobs=arm.knobs)
                    runs = measuremod.measure_host(label, p, measuremod.host_setting(p, arm.name),
                                                   req.timeout, keys[arm.name])
                else:
                    runs = measuremod.measure_in_vm(tree, built_by[arm.variant], arm.variant,
                                                    label, plan.with_(knobs=arm.knobs),
                                                    req.topology, req.online, req.timeout,
                                                    keys[arm.name], req.arch)
            if runs and all(r.complete for r in runs):
                record.finish(arm.name, boot)
                resume.write(out, record)
            else:
                say(f"  {arm.name}, boot {boot + 1}: incomplete runs: the same command "
                    "measures this boot again")
        if plan.latency_tool == "auto":
            plan = _pinned_latency_tool(plan, label)
    if req.boots > 1:
        for arm in arms:
            if arm.name in keys:        # another kernel's arms were pooled on it
                resmod.merge_boots(resmod.results_dir(req.label(arm)), req.boots,
                                   keys[arm.name], req.label(arm))


def pending(req: AbRequest, record: resume.Record, arms: Sequence[Arm]) -> List[str]:
    """The arms of ARMS with a boot not finished."""
    return [a.name for a in arms if any(not record.done(a.name, b) for b in range(req.boots))]


def _pair_tables(out: Path, tag: str, a_dir: Path, b_dir: Path,
                 plots: bool = True) -> Tuple[str, Path]:
    """The tables of one pair into OUT: compare{tag}.txt/.md (every metric),
    headline{tag}.md, plots{tag}/ (with PLOTS); returns the headline text and
    the full table's path."""
    full = out / f"compare{tag}.txt"
    full.write_text(comparemod.compare_and_plot(a_dir, b_dir, False,
                                                out / f"plots{tag}" if plots else None)
                    + "\n")
    (out / f"compare{tag}.md").write_text(
        comparemod.compare_and_plot(a_dir, b_dir, True, None) + "\n")
    (out / f"headline{tag}.md").write_text(
        comparemod.compare_and_plot(a_dir, b_dir, True, None, comparemod.HEADLINE) + "\n")
    return comparemod.compare_and_plot(a_dir, b_dir, False, None, comparemod.HEADLINE), full


def tables(out: Path, arms: List[Arm], folders: Dict[str, Path],
           extra: Sequence[Tuple[str, str]] = (), plots: bool = True) -> None:
    """The pairwise tables, plots and the sweep table of an 'ab' run, from the
    arms' result sets FOLDERS, into OUT; prints each pair's headline.  EXTRA:
    more pairs by name, compared after arm_pairs()'s."""
    out.mkdir(parents=True, exist_ok=True)
    pairs = arm_pairs(arms)
    byname = {a.name: a for a in arms}
    pairs += [(byname[a], byname[b]) for a, b in extra
              if a in byname and b in byname and (byname[a], byname[b]) not in pairs]
    for a, b in pairs:
        # One pair (base vs patched) keeps the plain names.
        tag = "" if len(pairs) == 1 else f"-{a.name}-vs-{b.name}"
        text, full = _pair_tables(out, tag, folders[a.name], folders[b.name], plots)
        say(f"{a.name} vs {b.name}, the headline:")
        say(text)
        say(f"  every metric: {full} (Markdown: compare{tag}.md, the headline: "
            f"headline{tag}.md, plots: plots{tag}/)")
    if len(arms) > 2:
        sets = [(a.name, tablemod.load_runs(folders[a.name])) for a in arms]
        (out / "sweep.md").write_text(comparemod.sweep_table(sets) + "\n")
        (out / "sweep.txt").write_text(comparemod.sweep_table(sets, False) + "\n")
        say(comparemod.sweep_table(sets, False))
        say(f"  sweep table: {out / 'sweep.md'}")
        replica = eqmod.find_replica([(a.name, a.variant, a.knobs) for a in arms])
        shown = [(n, r) for n, r in sets if n != replica]
        if plots and plotmod.sweep_plot(shown, comparemod.SWEEP_COLUMNS, out / "sweep.png"):
            say(f"  sweep plot: {out / 'sweep.png'}")
        if replica:
            runs = dict(sets)
            named = [(a.name, b.name) for a, b in pairs]
            aa = (arms[0].name, replica)
            (out / "equivalence.md").write_text(eqmod.table(runs, aa, named) + "\n")
            (out / "equivalence.txt").write_text(eqmod.table(runs, aa, named, False) + "\n")
            say(f"  equivalence margins from the A/A pair {arms[0].name}/{replica}: "
                f"{out / 'equivalence.md'}")
