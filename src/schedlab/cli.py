"""Command line: one command per user intent.

  ./schedlab run        the main job: fetch, apply, build, boot smt4, topology check
  ./schedlab test       the test command CI runs
  ./schedlab setup | fetch | series ... | build | vm | presets
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from . import build as buildmod
from . import deps, series, source
from . import compare as comparemod
from . import kunit as kunitmod
from . import kunit_tool
from . import measure as measuremod
from . import topology as topomod
from . import vm
from .util import LabError, Stages, eprint, run, say, work_dir

CHECK_MARK = "@@schedlab-topology-end@@"
DEFAULT_TEST_TOPOLOGIES = ["smt4", "smt8", "smt4-numa"]
# KUnit boots of the test command: the fixtures on 192 possible CPUs with 2
# online, then every CPU of smt4-numa online for the live-domain comparison.
KUNIT_RUNS = [("2x12x8", 2), ("smt4-numa", None)]


def _tree(args) -> source.Tree:
    return source.resolve_tree(args.kernel, args.base)


def _built(args, tree: source.Tree) -> buildmod.BuildResult:
    measure = getattr(args, "measure", False)
    name = args.variant + ("+measure" if measure else "")
    if getattr(args, "no_build", False):
        arch = buildmod.get_arch(args.arch)
        bdir = buildmod.build_dir_for(tree, name, args.config, arch)
        image = bdir / arch.image_path
        if not image.is_file():
            raise LabError(f"--no-build: nothing built at {image}")
        say(f"  using the kernel already built in {bdir} (--no-build)")
        return buildmod.BuildResult(bdir, image, "", 0.0, "")
    commit = series.ensure_variant(tree, args.variant, measure)
    return buildmod.build(tree, name, commit, args.config, args.arch)


# ------------------------------------------------------------------ commands

def cmd_setup(args) -> int:
    deps.setup()
    return 0


def cmd_fetch(args) -> int:
    tree = _tree(args)
    say(f"base: {tree.description}\n  tree {tree.path}, base commit {tree.base[:12]}")
    return 0


def cmd_presets(args) -> int:
    say(topomod.presets_help())
    return 0


def cmd_series(args) -> int:
    tree = _tree(args)
    if args.action == "list":
        for p in series.read_series(series.PATCHES):
            say(f"  {p.name}: {series.parse_patch(p.read_text())['subject']}")
        return 0
    if args.action == "apply":
        commit = series.ensure_variant(tree, "patched", args.measure)
        tree.checkout(commit)
        n = len(series.variant_patches("patched", args.measure))
        say(f"  {n} patch(es) applied: {tree.path} is at {commit[:12]} "
            f"(ref {tree.ref('patched' + ('+measure' if args.measure else ''))})")
        return 0
    if args.action == "export":
        folder = series.MEASURE if args.measure else series.PATCHES
        start = args.start or ((tree.commit_of("patched") or
                                series.ensure_variant(tree, "patched"))
                               if args.measure else tree.base)
        series.export(tree, start, args.end, folder, cover=not args.measure,
                      reroll=args.reroll_count)
        return 0
    if args.action == "rebase":
        if not args.onto:
            raise LabError("series rebase needs --onto REV (a commit of the kernel tree)")
        new = source.resolve_tree(args.kernel, args.onto) if (args.kernel or
                                                               source.os.environ.get("KERNEL_SRC")) \
            else _rebase_debian(tree, args.onto)
        series.rebase(tree, new)
        say(f"  the series now applies onto {new.base[:12]}; run './schedlab series export' "
            "with the same --kernel/--base to write it back")
        return 0
    if args.action == "check":
        if not series.read_series(series.PATCHES):
            say("  the series is empty: nothing to check")
            return 0
        results = series.check(tree, ppc=not args.no_ppc)
        text, ok = series.report(results)
        say(text)
        return 0 if ok else 1
    raise LabError(f"unknown series action {args.action}")


def _rebase_debian(tree: source.Tree, onto: str) -> source.Tree:
    sha = source.git(tree.path, "rev-parse", "--verify", "-q", onto + "^{commit}", check=False)
    if not sha:
        raise LabError(f"no commit {onto!r} in {tree.path}")
    return source.Tree(key=tree.key, path=tree.path, base=sha,
                       description=f"{tree.path} at {sha[:12]}")


def cmd_build(args) -> int:
    tree = _tree(args)
    if args.host_config:
        # An installable kernel for this machine, always with the measurement series.
        commit = series.ensure_variant(tree, args.variant, True)
        buildmod.build_host(tree, args.variant, commit,
                            buildmod.host_config_source(args.host_config),
                            localmodconfig=args.localmodconfig,
                            package=False if args.no_deb else None,
                            configure_only=args.configure_only)
        return 0
    _built(args, tree)
    return 0


def run_vm(args, topo: topomod.Topology, image: Path, command: List[str]) -> int:
    """Boot once: topology probe (unless --no-check), then the user's command."""
    user = shlex.join(command) if command else "true"
    if args.no_check:
        res = vm.boot(image, topo, user, online=args.online, memory_mib=args.memory,
                      kernel_args=args.append, timeout=args.timeout, verbose=args.verbose,
                      rwdirs=args.rwdir)
        sys.stdout.write(res.output)
        return res.returncode
    probe = vm.guest_script("topology-probe.sh", topomod.GUEST_PROBE)
    wrapper = vm.guest_script("vm-command.sh", f"bash {probe}\necho {CHECK_MARK}\n{user}\n")
    res = vm.boot(image, topo, f"bash {wrapper}", online=args.online, memory_mib=args.memory,
                  kernel_args=args.append, timeout=args.timeout, verbose=args.verbose,
                  rwdirs=args.rwdir)
    report, sep, rest = res.output.partition(CHECK_MARK + "\n")
    if not sep:
        report, rest = res.output, ""
    sys.stdout.write(rest)
    view = topomod.parse_guest_report(report)
    if not sep or view.nproc == 0:
        tail = "\n    ".join(res.output.strip().splitlines()[-30:])
        raise LabError(f"the guest did not report its topology (status {res.returncode}); "
                       f"last output:\n    {tail}\n  full log: {vm.log_dir() / 'vm.log'}")
    problems = topomod.check_view(topo, view, args.online)
    say(f"  boot and command took {res.seconds:.1f}s under {res.accel}")
    say(vm.format_view(topo, view))
    if problems:
        eprint("topology check FAILED:\n  " + "\n  ".join(problems))
        return 3
    say(f"  topology check passed ({topo.name or topo.spec()})")
    return res.returncode


def cmd_vm(args) -> int:
    topo = topomod.parse_topology(args.topology)
    tree = _tree(args)
    result = _built(args, tree)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    return run_vm(args, topo, result.image, command)


def run_kunit_on(args, tree: source.Tree, image: Path, topology: str,
                 online: Optional[int]) -> bool:
    topo = topomod.parse_topology(topology)
    res = kunitmod.run_kunit(tree.path, image, topo, online, filter_glob=args.filter,
                             timeout=args.timeout)
    say(res.summary.rstrip())
    table = kunitmod.probe_table(res.rows)
    if table:
        say("  should_we_balance() idle-state probes per balance pass, upstream (v7.3 "
            "model) vs this kernel (mean over seeded patterns):")
        say(table)
        calls = kunitmod.call_table(res.calls)
        if calls:
            say("  idle-state probes per call, every level and dst of the comparison "
                "patterns:")
            say(calls)
        if any("upstream_pass_probes" in r.fields for r in res.rows):
            say("  targets (issue 5, fewer probes per pass than upstream):")
            for line in kunitmod.check_targets(res.rows):
                say(f"    {line}")
    say(f"  KUnit on {topology}: {res.passed} passed, {res.failed} failed, "
        f"{res.skipped} skipped in {res.seconds:.1f}s under {res.accel} "
        f"(console: {res.log})")
    return res.ok


def cmd_selftest(args) -> int:
    tree = _tree(args)
    result = _built(args, tree)
    return 0 if run_selftest(args, tree, result.image) else 1


def run_kunit_tool(tree: source.Tree, image: Path) -> bool:
    """The README's plain kunit.py command, with its TCG fallback where KVM is broken."""
    kvm, why = vm.kvm_works(image)
    say(f"  KVM: {'works' if kvm else 'not usable'} ({why})"
        + ("" if kvm else "; /dev/kvm hidden from qemu (README: TCG fallback)"))
    res = kunit_tool.run(tree.path, work_dir() / "build" / tree.key / "kunit-tool",
                         hide_kvm=not kvm, env=dict(os.environ, **buildmod.ccache_env()),
                         cc="ccache gcc" if shutil.which("ccache") else None)
    say(f"  kunit.py: {res.line}")
    say(f"  kunit.py: {'ok' if res.ok else 'FAILED'} in {res.seconds:.0f}s, build and boot "
        f"included (log: {res.log})")
    return res.ok


def cmd_kunit(args) -> int:
    tree = _tree(args)
    if args.kunit_py:
        args.config, args.measure, args.arch = "lab", False, None
    result = _built(args, tree)
    if args.kunit_py:
        return 0 if run_kunit_tool(tree, result.image) else 1
    online = args.online
    if online is None and args.topology == kunitmod.DEFAULT_TOPOLOGY:
        online = kunitmod.DEFAULT_ONLINE
    return 0 if run_kunit_on(args, tree, result.image, args.topology, online) else 1


def _measure_plan(args):
    plan = measuremod.plan_workloads(args.plan, args.schbench)
    probes = measuremod.probe_names(args.probe)
    return plan, probes


def _check_tools(plan, probes, latency_tool: str) -> None:
    missing = measuremod.missing_tools(plan, probes, latency_tool)
    if missing:
        raise LabError("missing tool(s) the plan needs: " + ", ".join(missing)
                       + "; './schedlab setup' installs them")


def measure_in_vm(args, tree: source.Tree, variant: str, label: str, plan, probes,
                  key: str = "", result: Optional[buildmod.BuildResult] = None,
                  knobs: Optional[Dict[str, str]] = None) -> List[dict]:
    topo = topomod.parse_topology(args.topology)
    args.config, args.measure, args.variant = "probe", True, variant
    result = result or _built(args, tree)
    setting = {"topology": topo.spec(), "config": "probe+measure",
               "arch": args.arch or "x86_64", "variant": variant,
               "kernel_tree": tree.description, "commit": result.commit,
               "seconds": args.seconds, "knobs": dict(knobs or {})}
    return measuremod.measure_vm(label, result.image, topo, plan, args.runs, args.seconds,
                                 setting, args.timeout, probes, args.attach, args.latency_tool,
                                 online=args.online, key=key, knobs=knobs)


def cmd_measure(args) -> int:
    plan, probes = _measure_plan(args)
    knobs = measuremod.parse_knobs(args.knob)
    if args.vm and args.host:
        raise LabError("measure: --vm or --host, not both")
    if args.host:
        _check_tools(plan, probes, args.latency_tool)
        import platform
        conf = measuremod.running_config()
        setting = {"topology": measuremod.host_topology(),
                   "config": measuremod.host_config_key(conf) if conf else "host-config:?",
                   "arch": platform.machine(), "variant": args.variant or "host",
                   "seconds": args.seconds, "knobs": knobs}
        runs = measuremod.measure_host(args.label, plan, args.runs, args.seconds, setting,
                                       args.timeout, probes, args.attach, args.latency_tool,
                                       knobs=knobs)
    else:
        deps.setup()
        _check_tools(plan, probes, args.latency_tool)
        runs = measure_in_vm(args, _tree(args), args.variant or "patched", args.label, plan,
                             probes, knobs=knobs)
    return 1 if any(not r["complete"] for r in runs) else 0


def _results(name: str) -> Path:
    p = Path(name)
    return p if p.is_dir() else measuremod.results_dir(name)


def compare_and_plot(a_dir: Path, b_dir: Path, markdown: bool, plots: Optional[Path],
                     only: Optional[str] = None) -> str:
    a, b = comparemod.load_runs(a_dir), comparemod.load_runs(b_dir)
    comparemod.check_comparable(a, b)
    rs = comparemod.rows(a, b)
    if not rs:
        raise LabError("no metric has complete runs on both sides")
    shown = comparemod.select(rs, only)
    if not shown:
        raise LabError(f"--only {only!r} matches no metric")
    text = comparemod.table(shown, a_dir.name, b_dir.name, markdown=markdown)
    if plots:
        from . import plots as plotmod
        files = plotmod.write_plots(a, b, rs, a_dir.name, b_dir.name, plots)
        text += "\nplots:\n" + "\n".join(f"  {f}" for f in files)
    return text


def cmd_reparse(args) -> int:
    """Parse a result set's raw outputs again; boots are pooled again."""
    folder = _results(args.label)
    boots = sorted(folder.glob("boot-*"), key=lambda b: int(b.name.split("-")[1]))
    if boots:
        for b in boots:
            measuremod.reparse(b)
        meta = json.loads((folder / "plan.json").read_text())
        runs = merge_boots(folder.name, len(boots), meta.get("key", ""))
    else:
        runs = measuremod.reparse(folder)
    bad = sum(1 for r in runs if not r.get("complete"))
    say(f"  {folder}: {len(runs)} runs parsed again" + (f", {bad} incomplete" if bad else ""))
    return 0


def cmd_compare(args) -> int:
    a_dir, b_dir = _results(args.a), _results(args.b)
    plots = args.plots
    if plots is None and not args.no_plots:
        plots = b_dir.parent / f"{a_dir.name}-vs-{b_dir.name}-plots"
    only = comparemod.HEADLINE if args.headline else args.only
    say(compare_and_plot(a_dir, b_dir, args.markdown, plots, only))
    return 0


def _reusable(label: str, key: str, plan, runs: int) -> bool:
    """Results of the same plan on the same builds, every run complete."""
    folder = measuremod.results_dir(label)
    try:
        meta = json.loads((folder / "plan.json").read_text())
        done = comparemod.load_runs(folder)
    except (OSError, ValueError, LabError):
        return False
    return (meta.get("key") == key and meta.get("plan") == [w.name for w in plan]
            and meta.get("runs") == runs and len(done) == len(plan) * runs
            and all(r.get("complete") for r in done))


def _pin_latency_tool(args, base_label: str) -> None:
    """The same latency tool on both sides: auto's choice depends on how fast
    bcc starts, i.e. on the machine's load at the time."""
    used = comparemod.setting(comparemod.load_runs(measuremod.results_dir(base_label)),
                              "latency_tool")
    tool = json.loads(next(iter(used))) if len(used) == 1 else None
    if tool in measuremod.LATENCY_TOOLS[1:]:
        args.latency_tool = tool
        say(f"  the next measurements use the latency tool base used: {args.latency_tool}")


def merge_boots(label: str, boots: int, key: str) -> List[dict]:
    """results/LABEL/boot-K/ (one per boot) pooled into results/LABEL/: runs
    numbered on across boots, each with its boot number."""
    out = measuremod.results_dir(label)
    for old in out.glob("run-*.json"):
        old.unlink()
    merged, plan_meta = [], None
    for boot in range(boots):
        folder = out / f"boot-{boot}"
        meta = json.loads((folder / "plan.json").read_text())
        plan_meta = plan_meta or meta
        for one in comparemod.load_runs(folder):
            one = dict(one, boot=boot, run=boot * meta["runs"] + one["run"], label=label)
            (out / f"run-{one['workload']}-{one['run']}.json").write_text(
                json.dumps(one, indent=1) + "\n")
            merged.append(one)
    (out / "plan.json").write_text(json.dumps(
        {"plan": plan_meta["plan"], "runs": plan_meta["runs"] * boots, "boots": boots,
         "setting": plan_meta["setting"], "key": key}, indent=1) + "\n")
    bad = sum(1 for r in merged if not r.get("complete"))
    say(f"  results/{label}: {len(merged)} runs from {boots} boots pooled"
        + (f", {bad} incomplete" if bad else ""))
    return merged


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
                           "base or patched, e.g. 500us=patched:newidle_min_avg_idle_ns=500000")
        if any(a.name == name for a in arms):
            raise LabError(f"--arm {name} is given twice")
        arms.append(Arm(name, variant, tuple(measuremod.parse_knobs(knobs).items())))
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


def cmd_ab(args) -> int:
    """Base vs patched (or several arms) in the VM: builds, the plan on each, tables, plots."""
    st = Stages()
    plan, probes = _measure_plan(args)
    arms = parse_arms(args.arm)
    if args.boots < 1:
        raise LabError(f"ab: --boots must be 1 or more, not {args.boots}")
    prefix = args.label or f"ab-{args.topology}"
    labels = {a.name: f"{prefix}-{a.name}" for a in arms}
    variants = [v for v in ("base", "patched") if any(a.variant == v for a in arms)]
    try:
        if not args.tables_only:
            _ab_measure(args, st, plan, probes, arms, labels, variants)
        with st.stage("compare"):
            _ab_tables(prefix, arms, labels)
    finally:
        say(st.summary())
    return 0


def _ab_measure(args, st: Stages, plan, probes, arms: List[Arm], labels: Dict[str, str],
                variants: List[str]) -> None:
    """Build what the arms need and measure the arms whose results are not there."""
    with st.stage("setup"):
        deps.setup()
        _check_tools(plan, probes, args.latency_tool)
    with st.stage("fetch"):
        tree = _tree(args)
        say(f"  base: {tree.description}")
    built = {}
    for variant in variants:
        with st.stage(f"build {variant} (probe config + measurement series)"):
            args.config, args.measure, args.variant = "probe", True, variant
            built[variant] = _built(args, tree)
    keys = {a.name: json.dumps([built[a.variant].commit, built[a.variant].release,
                                args.topology, args.seconds, probes, args.attach,
                                args.latency_tool, args.online]
                               + ([args.boots] if args.boots > 1 else [])
                               + ([dict(a.knobs)] if a.knobs else []),
                               sort_keys=True) for a in arms}
    todo = [a for a in arms if args.fresh or not _reusable(
        labels[a.name], keys[a.name], plan, args.runs * args.boots)]
    for a in arms:
        if a not in todo:
            say(f"  results/{labels[a.name]} already holds this plan on this build: "
                "reused (--fresh measures again)")
    if arms[0] not in todo and args.latency_tool == "auto":
        _pin_latency_tool(args, labels[arms[0].name])
    # Boots interleaved, the arms in order in each, so that the spread
    # between boots is in every arm's runs and the significance rule sees it.
    for boot in range(args.boots):
        for arm in todo:
            label = labels[arm.name] if args.boots == 1 else \
                f"{labels[arm.name]}/boot-{boot}"
            knobs = "".join(f", {k}={v}" for k, v in arm.knobs)
            name = f"measure {arm.name} ({arm.variant}{knobs}) on {args.topology}" + \
                (f", boot {boot + 1} of {args.boots}" if args.boots > 1 else "")
            with st.stage(name):
                measure_in_vm(args, tree, arm.variant, label, plan, probes,
                              key=keys[arm.name], result=built[arm.variant],
                              knobs=dict(arm.knobs))
            if arm is arms[0] and args.latency_tool == "auto":
                _pin_latency_tool(args, label)
    if args.boots > 1:
        for arm in todo:
            merge_boots(labels[arm.name], args.boots, keys[arm.name])


def _ab_tables(prefix: str, arms: List[Arm], labels: Dict[str, str]) -> None:
    """The pairwise tables, plots and the sweep table of an 'ab' run."""
    out = measuremod.results_dir(prefix)
    out.mkdir(parents=True, exist_ok=True)
    pairs = arm_pairs(arms)
    for a, b in pairs:
        # One pair (base vs patched) keeps the plain names.
        tag = "" if len(pairs) == 1 else f"-{a.name}-vs-{b.name}"
        a_dir = measuremod.results_dir(labels[a.name])
        b_dir = measuremod.results_dir(labels[b.name])
        text = compare_and_plot(a_dir, b_dir, False, out / f"plots{tag}")
        (out / f"compare{tag}.txt").write_text(text + "\n")
        (out / f"compare{tag}.md").write_text(
            compare_and_plot(a_dir, b_dir, True, None) + "\n")
        (out / f"headline{tag}.md").write_text(
            compare_and_plot(a_dir, b_dir, True, None, comparemod.HEADLINE) + "\n")
        say(f"{a.name} vs {b.name}:")
        say(compare_and_plot(a_dir, b_dir, False, None, comparemod.HEADLINE))
        say(f"  every metric: {out / f'compare{tag}.txt'} (Markdown: compare{tag}.md, "
            f"headline rows: headline{tag}.md, plots: plots{tag}/)")
    if len(arms) > 2:
        sets = [(a.name, comparemod.load_runs(measuremod.results_dir(labels[a.name])))
                for a in arms]
        (out / "sweep.md").write_text(comparemod.sweep_table(sets) + "\n")
        (out / "sweep.txt").write_text(comparemod.sweep_table(sets, False) + "\n")
        say(comparemod.sweep_table(sets, False))
        say(f"  sweep table: {out / 'sweep.md'}")


def cmd_run(args) -> int:
    """Build and boot: fetch to topology check."""
    st = Stages()
    try:
        with st.stage("setup"):
            deps.setup()
        with st.stage("fetch"):
            tree = _tree(args)
            say(f"  base: {tree.description}")
        with st.stage("series apply"):
            commit = series.ensure_variant(tree, "patched")
        with st.stage("build patched/lab"):
            result = buildmod.build(tree, "patched", commit, "lab", args.arch)
        rc = 0
        for name in args.topology:
            with st.stage(f"boot {name} + topology check"):
                rc |= run_vm(args, topomod.parse_topology(name), result.image, ["nproc"])
        return rc
    finally:
        say(st.summary())


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
    proc = subprocess.run(["make", "-C", str(src), f"OUTPUT={out}", str(out / program)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise LabError(f"building the kselftest {program} failed:\n"
                       + proc.stdout[-2000:] + proc.stderr[-2000:])
    return out / program


_TAP_TOTALS = re.compile(r"# Totals: pass:(\d+) fail:(\d+) xfail:(\d+) xpass:(\d+) "
                         r"skip:(\d+) error:(\d+)")


def selftest_verdict(tap: str, status: str) -> Tuple[bool, str]:
    """ok when the program exited 0 and every test passed: a skip is a
    failure here, since the lab kernel has what the test needs."""
    m = _TAP_TOTALS.search(tap)
    if not m:
        return False, f"no kselftest totals in the output (exit status {status or '?'})"
    passed, failed, _, _, skipped, errors = map(int, m.groups())
    text = f"{passed} passed, {failed} failed, {skipped} skipped, {errors} errors"
    ok = status == "0" and passed > 0 and not (failed or skipped or errors)
    return ok, text + (f", exit status {status or '?'}" if status != "0" else "")


def run_selftest(args, tree: source.Tree, image: Path) -> bool:
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
    vm.boot(image, topomod.parse_topology(topology), cmd, online=args.online,
            memory_mib=args.memory, timeout=args.timeout, rwdirs=[out])
    tap = (out / "tap.txt").read_text(errors="replace") if (out / "tap.txt").is_file() else ""
    status = (out / "status.txt").read_text().strip() if (out / "status.txt").is_file() else ""
    for line in tap.splitlines():
        if line.startswith(("ok ", "not ok ", "#      ", "# newly")) or "newly idle" in line:
            say(f"  {line}")
    ok, text = selftest_verdict(tap, status)
    say(f"  {program}: {text} (TAP: {out / 'tap.txt'})")
    return ok


# The measurement harness's integration test: a short plan, every probe.
# The knob exercises --knob/--arm end to end (written, read back, restored).
INTEGRATION = {"topology": "smt4", "plan": "stress-50", "seconds": 3,
               "knobs": {"newidle_min_avg_idle_ns": "500000"}}


def measure_integration(args, tree: source.Tree, build: buildmod.BuildResult) -> bool:
    plan = measuremod.plan_workloads(INTEGRATION["plan"])
    probes = list(measuremod.PROBES)
    _check_tools(plan, probes, "auto")
    args.topology, args.seconds, args.runs = INTEGRATION["topology"], INTEGRATION["seconds"], 1
    args.attach, args.latency_tool, args.online = "auto", "auto", None
    runs = measure_in_vm(args, tree, "patched", measuremod.SCRATCH + "ci-integration", plan,
                         probes, result=build, knobs=INTEGRATION["knobs"])
    problems = measuremod.check_runs(runs, probes)
    for p in problems:
        say(f"  FAIL: {p}")
    if not problems:
        say(f"  every metric has a value ({len(runs[0]['metrics'])} metrics, probes "
            f"{', '.join(probes)}, latency with {runs[0]['setting']['latency_tool']}); "
            "knobs written and read back: "
            + ", ".join(f"{k}={v}" for k, v in INTEGRATION["knobs"].items()))
    return not problems


def cmd_test(args) -> int:
    """The test command (CI): unit tests, series check, one build, boots."""
    failed: List[str] = []
    st = Stages(failed)
    try:
        with st.stage("setup"):
            deps.setup()
        with st.stage("lab unit tests (pytest)"):
            if run(deps.pytest_cmd(), check=False).returncode != 0:
                failed.append("pytest")
        if args.unit_only:
            return 1 if failed else 0
        with st.stage("fetch"):
            tree = _tree(args)
            say(f"  base: {tree.description}")
        with st.stage("series check"):
            if series.read_series(series.PATCHES):
                text, ok = series.report(series.check(tree, ppc=not args.no_ppc))
                say(text)
                if not ok:
                    failed.append("series check")
            else:
                say("  the series is empty: nothing to check")
        with st.stage("build patched/lab"):
            commit = series.ensure_variant(tree, "patched")
            result = buildmod.build(tree, "patched", commit, "lab")
        for name in args.topology:
            with st.stage(f"boot {name} + topology check"):
                if run_vm(args, topomod.parse_topology(name), result.image, ["nproc"]) != 0:
                    failed.append(f"boot {name}")
        args.filter = None
        for name, online in KUNIT_RUNS:
            with st.stage(f"KUnit on {name}"):
                if not run_kunit_on(args, tree, result.image, name, online):
                    failed.append(f"KUnit {name}")
        with st.stage("KUnit with kunit.py (the README's command)"):
            if not run_kunit_tool(tree, result.image):
                failed.append("kunit.py")
        with st.stage(f"kselftest sched/{SELFTEST[1]} on {SELFTEST[0]}"):
            if not run_selftest(args, tree, result.image):
                failed.append("kselftest")
        with st.stage("build patched/probe + measurement series"):
            args.config, args.measure, args.variant = "probe", True, "patched"
            args.no_build, args.arch = False, None
            probe_build = _built(args, tree)
        with st.stage(f"measure integration ({INTEGRATION['topology']}, "
                      f"{INTEGRATION['plan']})"):
            if not measure_integration(args, tree, probe_build):
                failed.append("measure integration")
    finally:
        say(st.summary())
    passed = len(args.topology) + len(KUNIT_RUNS) + 6 - len(failed)
    if failed:
        say(f"failed stages: {', '.join(failed)}")
    say(f"test: {passed} passed, {len(failed)} failed")
    return 1 if failed else 0


# ------------------------------------------------------------------ parser

def make_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kernel", metavar="DIR",
                        help="your own kernel git tree (e.g. tip/sched/core); default: "
                             "$KERNEL_SRC, else Debian's linux-source-7.3")
    common.add_argument("--base", metavar="REV",
                        help="with --kernel: the base commit (default HEAD of that tree)")
    buildopts = argparse.ArgumentParser(add_help=False)
    buildopts.add_argument("--variant", default="patched", choices=["base", "patched"])
    buildopts.add_argument("--config", default="lab", choices=sorted(buildmod.CONFIGS))
    buildopts.add_argument("--arch", default=None, choices=sorted(buildmod.ARCHES),
                           help="target architecture (default x86_64)")
    buildopts.add_argument("--measure", action="store_true",
                           help="also apply the measurement series (patches/measure/)")
    buildopts.add_argument("--no-build", action="store_true",
                           help="boot what is already built, without an incremental build")
    vmopts = argparse.ArgumentParser(add_help=False)
    vmopts.add_argument("--online", type=int, metavar="K",
                        help="bring up only K CPUs (kernel maxcpus=K); nr_cpu_ids stays N")
    vmopts.add_argument("--memory", type=int, default=2048, metavar="MIB")
    vmopts.add_argument("--append", action="append", default=[], metavar="ARG",
                        help="extra kernel argument (repeatable)")
    vmopts.add_argument("--timeout", type=float, default=900, metavar="SECS")
    vmopts.add_argument("--no-check", action="store_true",
                        help="skip the topology check")
    vmopts.add_argument("--verbose", action="store_true", help="show the guest console")
    vmopts.add_argument("--rwdir", action="append", default=[], type=Path, metavar="DIR",
                        help="a host folder the guest may write (repeatable)")

    p = argparse.ArgumentParser(prog="schedlab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("setup", help="install missing Debian packages and the venv")
    s.set_defaults(func=cmd_setup)
    s = sub.add_parser("fetch", parents=[common], help="prepare the base tree")
    s.set_defaults(func=cmd_fetch)
    s = sub.add_parser("presets", help="list the topology presets")
    s.set_defaults(func=cmd_presets)
    s = sub.add_parser("series", parents=[common], help="apply, export, rebase, check")
    s.add_argument("action", choices=["list", "apply", "export", "rebase", "check"])
    s.add_argument("--measure", action="store_true",
                   help="apply: with the measurement series; export: into patches/measure/")
    s.add_argument("--start", metavar="REV", help="export: first commit excluded (default base)")
    s.add_argument("--end", default="HEAD", metavar="REV", help="export: last commit")
    s.add_argument("--reroll-count", "-v", type=int, metavar="N",
                   help="export: version N of the series ([PATCH vN m/n] subjects)")
    s.add_argument("--onto", metavar="REV", help="rebase: the new base")
    s.add_argument("--no-ppc", action="store_true", help="check: skip the ppc64le compile")
    s.set_defaults(func=cmd_series)
    s = sub.add_parser("build", parents=[common, buildopts], help="build a kernel")
    s.add_argument("--host-config", nargs="?", const="running", metavar="FILE",
                   help="an installable kernel for this machine from its own config "
                        "(default /boot/config-$(uname -r) or /proc/config.gz), "
                        "LOCALVERSION -schedlab-VARIANT, measurement series applied")
    s.add_argument("--localmodconfig", action="store_true",
                   help="with --host-config: only the modules loaded now (faster)")
    s.add_argument("--no-deb", action="store_true",
                   help="with --host-config: plain build instead of bindeb-pkg")
    s.add_argument("--configure-only", action="store_true",
                   help="with --host-config: write the .config and stop")
    s.set_defaults(func=cmd_build)
    s = sub.add_parser("vm", parents=[common, buildopts, vmopts],
                       help="boot on a topology and run a command: vm --topology smt8 -- nproc")
    s.add_argument("--topology", "-t", default="smt4", help="preset or SxCxT[:numa]")
    s.add_argument("command", nargs=argparse.REMAINDER)
    s.set_defaults(func=cmd_vm)
    s = sub.add_parser("kunit", parents=[common, buildopts, vmopts],
                       help="run the KUnit suites on a topology (default 192 possible, "
                            "2 online CPUs)")
    s.add_argument("--topology", "-t", default=kunitmod.DEFAULT_TOPOLOGY,
                   help="preset or SxCxT[:numa]; smt4-numa with all CPUs online also "
                        "compares a fixture with the live domains")
    s.add_argument("--filter", metavar="GLOB", help="kunit.filter_glob, e.g. 'sched_fair_lb.swb*'")
    s.add_argument("--kunit-py", action="store_true",
                   help="run the tree's own kunit.py as the README shows (its own build of "
                        "kernel/sched/.kunitconfig, the series' qemu config, TCG where KVM "
                        "is broken) instead of the lab's boot")
    s.set_defaults(func=cmd_kunit)
    measopts = argparse.ArgumentParser(add_help=False)
    measopts.add_argument("--topology", "-t", default="smt4", help="preset or SxCxT[:numa]")
    measopts.add_argument("--plan", help="comma-separated workloads (default "
                          + ",".join(measuremod.DEFAULT_PLAN) + "): "
                          + ", ".join(measuremod.WORKLOADS) + ", schbench")
    measopts.add_argument("--probe", help="comma-separated probes (default "
                          + ",".join(measuremod.DEFAULT_PROBES) + "): "
                          + ", ".join(measuremod.PROBES))
    measopts.add_argument("--attach", default="auto", choices=measuremod.ATTACH_METHODS,
                          help="bpftrace attach method (auto: kfunc with BTF, else kprobe)")
    measopts.add_argument("--latency-tool", default="auto", choices=measuremod.LATENCY_TOOLS,
                          help="funclatency tool (auto: bcc, else libbpf-tools, else bpftrace)")
    measopts.add_argument("--schbench", type=Path, metavar="PATH",
                          help="your schbench binary (for the schbench workload)")
    measopts.add_argument("--runs", type=int, default=3)
    measopts.add_argument("--seconds", type=int, default=10,
                          help="duration of timed workloads")
    measopts.add_argument("--arch", default=None, choices=sorted(buildmod.ARCHES))
    s = sub.add_parser("measure", parents=[common, vmopts, measopts],
                       help="run a measurement plan, results in results/LABEL/")
    s.add_argument("--label", required=True)
    s.add_argument("--vm", action="store_true", help="in the lab VM (the default)")
    s.add_argument("--host", action="store_true",
                   help="on this machine, booted into the kernel to measure (needs root)")
    s.add_argument("--variant", default=None, choices=["base", "patched"],
                   help="with --vm: which build (default patched); with --host: a label "
                        "kept with the results")
    s.add_argument("--no-build", action="store_true")
    s.add_argument("--knob", action="append", metavar="NAME=VALUE",
                   help=f"write VALUE to {measuremod.KNOB_DIR}/NAME before the plan and "
                        "restore it after (repeatable), e.g. "
                        "newidle_min_avg_idle_ns=500000")
    s.set_defaults(func=cmd_measure)
    s = sub.add_parser("reparse", help="parse the raw outputs of results/LABEL again "
                                       "(after a parser change; boots pooled again)")
    s.add_argument("label")
    s.set_defaults(func=cmd_reparse)
    s = sub.add_parser("compare", help="compare two result sets: compare base patched")
    s.add_argument("a")
    s.add_argument("b")
    s.add_argument("--markdown", action="store_true")
    s.add_argument("--plots", type=Path, metavar="DIR",
                   help="where the PNG plots go (default results/A-vs-B-plots)")
    s.add_argument("--no-plots", action="store_true")
    s.add_argument("--only", metavar="REGEX", help="only the metrics matching REGEX")
    s.add_argument("--headline", action="store_true",
                   help="only the headline metrics (the rows 'ab' prints)")
    s.set_defaults(func=cmd_compare)
    s = sub.add_parser("selftest", parents=[common, buildopts, vmopts],
                       help="the series' kselftest (tools/testing/selftests/sched/"
                            f"{SELFTEST[1]}) in the lab VM on {SELFTEST[0]}")
    s.set_defaults(func=cmd_selftest)
    s = sub.add_parser("ab", parents=[common, vmopts, measopts],
                       help="base vs patched in the VM: build both, run the plan, compare")
    s.add_argument("--label", help="results prefix (default ab-TOPOLOGY)")
    s.add_argument("--fresh", action="store_true", help="measure again even when results "
                                                         "of the same plan and builds exist")
    s.add_argument("--boots", type=int, default=1, metavar="N",
                   help="spread the runs over N boots per arm, the arms interleaved "
                        "(--runs per boot; default 1)")
    s.add_argument("--arm", action="append", metavar="NAME=VARIANT[:KNOB=VALUE...]",
                   help="a side of the comparison (repeatable; default base=base "
                        "patched=patched): the build and the knobs of "
                        f"{measuremod.KNOB_DIR}/ written before its plan, e.g. "
                        "--arm base=base --arm default=patched "
                        "--arm 500us=patched:newidle_min_avg_idle_ns=500000; every arm is "
                        "compared with the first, a knob arm also with its build's plain arm")
    s.add_argument("--tables-only", action="store_true",
                   help="no build, no measuring: the tables and plots again from the "
                        "results there (after 'reparse')")
    s.set_defaults(func=cmd_ab)
    s = sub.add_parser("run", parents=[common, vmopts],
                       help="main job: fetch, apply, build, boot smt4, topology check")
    s.add_argument("--topology", "-t", action="append", default=None)
    s.add_argument("--arch", default=None, choices=sorted(buildmod.ARCHES))
    s.set_defaults(func=cmd_run, default_topologies=["smt4"])
    s = sub.add_parser("test", parents=[common, vmopts],
                       help="the test command: pytest, series check, build, boots")
    s.add_argument("--topology", "-t", action="append", default=None)
    s.add_argument("--no-ppc", action="store_true", help="skip the ppc64le compile check")
    s.add_argument("--unit-only", action="store_true", help="only the lab's pytest suite")
    s.set_defaults(func=cmd_test, default_topologies=DEFAULT_TEST_TOPOLOGIES)
    return p


def _terminate(signum, frame):  # noqa: ARG001
    raise SystemExit(128 + signum)


def main(argv: Optional[List[str]] = None) -> int:
    # Ctrl-C and SIGTERM unwind through the finally blocks that stop VMs,
    # even where the parent started us with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)
    args = make_parser().parse_args(argv)
    if hasattr(args, "default_topologies") and not args.topology:
        args.topology = args.default_topologies
    try:
        return args.func(args)
    except LabError as exc:
        eprint(f"schedlab: error: {exc}")
        return 2
    except KeyboardInterrupt:
        eprint("schedlab: interrupted (every VM started was stopped)")
        return 130
