"""The 'run' (build and boot) and 'test' (what CI runs) commands: stages in order, timed."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import List, Optional

from . import build as buildmod
from . import deps, kselftest, kunit, kunit_tool, pseries, series, series_check
from . import measure as measuremod
from . import peer_tests as peermod
from . import plan as planmod
from . import probes as probemod
from . import results as resmod
from . import soak as soakmod
from . import topology as topomod
from . import vm
from .spec import BuildSpec, TreeSpec, VmOptions, built, probe_build
from .util import LabError, Stages, eprint, package_file, run, say

CHECK_MARK = "@@schedlab-topology-end@@"
DEFAULT_TEST_TOPOLOGIES = ["smt4", "smt8", "smt4-numa"]
# KUnit boots of the test command: the fixtures on 192 possible CPUs with 2
# online, then every CPU of smt4-numa online for the live-domain comparison.
KUNIT_RUNS = [("2x12x8", 2), ("smt4-numa", None)]
# The POWER test ('./schedlab test --arch ppc64le'): pseries guests, the
# topology boots on SMT8 and SMT4, the fixtures on 192 possible CPUs, then
# the live-domain comparison with every CPU of each guest online.
PPC_TOPOLOGIES = ["smt8", "smt4"]
PPC_KUNIT_RUNS = [("2x12x8", 2), ("smt8", None), ("smt4", None)]
# The test command's POWER stages boot only the SMT8 guest (the SMT4 one is
# in its KUnit boot and in 'test --arch ppc64le').
CI_PPC_TOPOLOGIES = ["smt8"]


def power_checks(topologies: List[str]) -> List[str]:
    return ([f"boot {t} (pseries)" for t in topologies]
            + [f"KUnit {t} (pseries)" for t, _ in PPC_KUNIT_RUNS])
# The measurement harness's integration test: a short plan, every probe but
# the cost probes (each measured alone, under icount: ICOUNT_INTEGRATION).
# The knob exercises --knob/--arm end to end (written, read back, restored).
INTEGRATION = planmod.Plan(tuple(planmod.workmod.plan_workloads("stress-50")),
                           tuple(n for n, p in probemod.PROBES.items()
                                 if p.program != "cost"), runs=1, seconds=3,
                           knobs=(("newidle_cost_pct", "400"),))
INTEGRATION_TOPOLOGY = "smt4"
# The short soak of the test command (the floors scale with its length).
SOAK_TOPOLOGY, SOAK_MINUTES = "smt4-numa", 3
# And under icount: the cost probe of should_we_balance() with its calibration.
ICOUNT_INTEGRATION = planmod.Plan(tuple(planmod.workmod.plan_workloads("stress-100")),
                                  ("swb-cost",), runs=1, seconds=2, accel="icount")


def run_vm(topo: topomod.Topology, image: Path, command: List[str], opts: VmOptions) -> int:
    """Boot once: topology probe (unless no_check), then the user's command."""
    user = shlex.join(command) if command else "true"
    boot = dict(online=opts.online, memory_mib=opts.memory, kernel_args=opts.append,
                timeout=opts.timeout, verbose=opts.verbose, rwdirs=opts.rwdirs,
                icount=opts.accel == "icount")
    if opts.no_check:
        res = vm.boot(image, topo, user, **boot)  # type: ignore[arg-type]
        sys.stdout.write(res.output)
        return res.returncode
    cmd = shlex.join(["bash", str(package_file("guest/vm-command.sh")),
                      str(topomod.guest_probe()), CHECK_MARK, user])
    res = vm.boot(image, topo, cmd, **boot)  # type: ignore[arg-type]
    report, sep, rest = res.output.partition(CHECK_MARK + "\n")
    if not sep:
        report, rest = res.output, ""
    sys.stdout.write(rest)
    view = topomod.parse_guest_report(report)
    if not sep or view.nproc == 0:
        tail = "\n    ".join(res.output.strip().splitlines()[-30:])
        raise LabError(f"the guest did not report its topology (status {res.returncode}); "
                       f"last output:\n    {tail}\n  full log: {vm.log_dir() / 'vm.log'}")
    problems = topomod.check_view(topo, view, opts.online)
    say(f"  boot and command took {res.seconds:.1f}s under {res.accel}")
    say(vm.format_view(topo, view))
    if problems:
        eprint("topology check FAILED:\n  " + "\n  ".join(problems))
        return 3
    say(f"  topology check passed ({topo.name or topo.spec()})")
    return res.returncode


def setup_and_fetch(st: Stages, tree_spec: TreeSpec):
    """The first two stages of every command here: packages and venv, the tree."""
    with st.stage("setup"):
        deps.setup()
    with st.stage("fetch"):
        tree = tree_spec.resolve()
        say(f"  base: {tree.description}")
    return tree


def main_job(tree_spec: TreeSpec, topologies: List[str], opts: VmOptions,
             arch: Optional[str] = None) -> int:
    """Build and boot: fetch to topology check."""
    st = Stages()
    try:
        tree = setup_and_fetch(st, tree_spec)
        with st.stage("series apply"):
            commit = series.ensure_variant(tree, "patched")
        with st.stage(f"build patched/lab{'' if not arch else ' ' + arch}"):
            result = buildmod.build(tree, "patched", commit, "lab", arch)
        rc = 0
        for name in topologies:
            with st.stage(f"boot {name} + topology check"):
                if arch == "ppc64le":
                    rc |= pseries.run_topology_check(result.image,
                                                     topomod.parse_topology(name),
                                                     opts.online, opts.memory, opts.append,
                                                     opts.timeout)
                else:
                    rc |= run_vm(topomod.parse_topology(name), result.image, ["nproc"], opts)
        return rc
    finally:
        say(st.summary())


def measure_integration(tree, build: buildmod.BuildResult, opts: VmOptions) -> bool:
    plan = INTEGRATION
    plan.check_tools()
    runs = measuremod.measure_in_vm(tree, build, "patched", resmod.SCRATCH + "ci-integration",
                                    plan, INTEGRATION_TOPOLOGY, None, opts.timeout)
    problems = resmod.check_runs(runs, plan.probes)
    for p in problems:
        say(f"  FAIL: {p}")
    if not problems:
        s = runs[0].setting or resmod.Setting()
        say(f"  every metric has a value ({len(runs[0].metrics)} metrics, probes "
            f"{', '.join(plan.probes)}, latency with {s.latency_tool}); "
            "knobs written and read back: " + ", ".join(f"{k}={v}" for k, v in plan.knobs))
    return not problems


def icount_integration(tree, build: buildmod.BuildResult, opts: VmOptions) -> bool:
    """A short icount run: calibrated, 'one ns = one instruction' holding, and
    should_we_balance() instructions per call at every level it ran at."""
    plan = ICOUNT_INTEGRATION
    runs = measuremod.measure_in_vm(tree, build, "patched", resmod.SCRATCH + "ci-icount", plan,
                                    INTEGRATION_TOPOLOGY, None, opts.timeout)
    problems = resmod.check_runs(runs, plan.probes)
    for r in runs:
        cal = r.calibration or {}
        if "holds" not in cal.get("check", ""):
            problems.append(f"{r.name()}: calibration: {cal.get('check', 'none')}")
        if (r.setting.accel if r.setting else None) != "icount":
            problems.append(f"{r.name()}: not measured under icount")
        if not any(m.startswith("should_we_balance instructions per call, median (")
                   for m in r.metrics):
            problems.append(f"{r.name()}: no should_we_balance() instructions per call")
    for p in problems:
        say(f"  FAIL: {p}")
    if not problems:
        per = {m: round(v["value"]) for m, v in runs[0].metrics.items()
               if "instructions per call, median" in m}
        cal = runs[0].calibration or {}
        say(f"  calibrated ({cal.get('overhead')} instructions of the probe's own; "
            f"{cal.get('check')}); medians: {per}")
    return not problems


def lint() -> List[str]:
    """mypy over the package, shellcheck over the guest scripts: what failed."""
    failed = []
    if run(deps.mypy_cmd(), check=False).returncode != 0:
        failed.append("mypy")
    scripts = sorted(str(p) for p in package_file("guest").rglob("*.sh"))
    if run(["shellcheck", *scripts], check=False).returncode != 0:
        failed.append("shellcheck")
    else:
        say(f"  shellcheck: {len(scripts)} guest scripts clean")
    return failed


def test_command(tree_spec: TreeSpec, topologies: List[str], opts: VmOptions,
                 ppc: bool = True, unit_only: bool = False, reliability: bool = False) -> int:
    """The test command (CI): unit tests, lint, series check, one build, boots."""
    failed: List[str] = []
    st = Stages(failed)
    checks = ["pytest", "mypy", "shellcheck"]
    if not unit_only:
        checks += ["series check"] + [f"boot {t}" for t in topologies] + \
            [f"KUnit {t}" for t, _ in KUNIT_RUNS] + ["kunit.py", "kselftest",
                                                     "measure integration",
                                                     "icount integration"]
        if ppc:
            checks += power_checks(CI_PPC_TOPOLOGIES)
        if reliability:
            checks += ["soak", "peer tests"]
    try:
        with st.stage("setup"):
            deps.setup()
        with st.stage("lab unit tests (pytest)"):
            if run(deps.pytest_cmd(), check=False).returncode != 0:
                failed.append("pytest")
        with st.stage("lint (mypy, shellcheck)"):
            failed += lint()
        if unit_only:
            return 1 if failed else 0
        with st.stage("fetch"):
            tree = tree_spec.resolve()
            say(f"  base: {tree.description}")
        with st.stage("series check"):
            if series.read_series(series.patches_dir()):
                text, ok = series_check.report(series_check.check(tree, ppc=ppc))
                say(text)
                if not ok:
                    failed.append("series check")
            else:
                say("  the series is empty: nothing to check")
        with st.stage("build patched/lab"):
            result = built(tree, BuildSpec("patched", "lab"))
        for name in topologies:
            with st.stage(f"boot {name} + topology check"):
                if run_vm(topomod.parse_topology(name), result.image, ["nproc"], opts) != 0:
                    failed.append(f"boot {name}")
        for name, online in KUNIT_RUNS:
            with st.stage(f"KUnit on {name}"):
                if not kunit.run_on(tree.path, result.image, name, online, None, opts.timeout,
                                    require_live=online is None):
                    failed.append(f"KUnit {name}")
        with st.stage("KUnit with kunit.py (the README's command)"):
            if not kunit_tool.run_readme_command(tree.path, tree.key, result.image):
                failed.append("kunit.py")
        with st.stage(f"kselftest sched/{kselftest.SELFTEST[1]} on {kselftest.SELFTEST[0]}"):
            if not kselftest.run_selftest(tree, result.image, opts):
                failed.append("kselftest")
        if ppc:
            power_stages(st, tree, opts, failed, CI_PPC_TOPOLOGIES)
        with st.stage("build patched/probe + measurement series"):
            probe = built(tree, probe_build("patched"))
        with st.stage(f"measure integration ({INTEGRATION_TOPOLOGY}, "
                      f"{','.join(INTEGRATION.names())})"):
            if not measure_integration(tree, probe, opts):
                failed.append("measure integration")
        with st.stage(f"icount integration ({INTEGRATION_TOPOLOGY}, swb-cost)"):
            if not icount_integration(tree, probe, opts):
                failed.append("icount integration")
        if reliability:
            with st.stage("build patched/debug"):
                built(tree, BuildSpec("patched", "debug"))
            with st.stage(f"soak ({SOAK_TOPOLOGY}, patched, {SOAK_MINUTES:g} min)"):
                if not soakmod.run_for(SOAK_TOPOLOGY, SOAK_MINUTES, "patched", tree_spec,
                                       no_build=True):
                    failed.append("soak")
            with st.stage("peer tests (patched, against the kept base results)"):
                if not peermod.run_peer_tests(tree_spec, ["patched"], no_build=True):
                    failed.append("peer tests")
    finally:
        say(st.summary())
    return verdict("test", checks, failed)


def verdict(name: str, checks: List[str], failed: List[str]) -> int:
    """The last lines of a test command: the failed stages, 'NAME: N passed,
    N failed'; the exit status."""
    if failed:
        say(f"failed stages: {', '.join(failed)}")
    say(f"{name}: {len(checks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def power_stages(st: Stages, tree, opts: VmOptions, failed: List[str],
                 topologies: List[str]) -> None:
    """The POWER stages: the ppc64le lab build, topology boots of the
    given topologies, KUnit on PPC_KUNIT_RUNS (the live comparison must run
    and pass with every CPU online)."""
    with st.stage("build patched/lab ppc64le"):
        try:
            result = built(tree, BuildSpec("patched", "lab", "ppc64le"))
        except LabError as exc:
            say(f"  FAIL: {exc}")
            failed.append("build ppc64le")
            return
    for name in topologies:
        with st.stage(f"boot {name} (pseries) + topology check"):
            try:
                ok = pseries.run_topology_check(result.image, topomod.parse_topology(name),
                                                None, opts.memory, opts.append,
                                                opts.timeout) == 0
            except LabError as exc:
                say(f"  FAIL: {exc}")
                ok = False
            if not ok:
                failed.append(f"boot {name} (pseries)")
    for name, online in PPC_KUNIT_RUNS:
        with st.stage(f"KUnit on {name} (pseries)"):
            try:
                ok = kunit.run_on(tree.path, result.image, name, online, None, opts.timeout,
                                  arch="ppc64le", require_live=online is None)
            except LabError as exc:
                say(f"  FAIL: {exc}")
                ok = False
            if not ok:
                failed.append(f"KUnit {name} (pseries)")


def ppc_test_command(tree_spec: TreeSpec, opts: VmOptions, kunit_py: bool = True) -> int:
    """'./schedlab test --arch ppc64le': the series on POWER under qemu pseries.

    One ppc64le lab build; the busybox topology boots (PPC_TOPOLOGIES);
    KUnit on 192 possible CPUs and on every CPU of an SMT8 and an SMT4 guest
    (fixture_matches_live_domains must run and pass there); then the
    README's kunit.py command for powerpc (its own cross build)."""
    failed: List[str] = []
    st = Stages(failed)
    checks = power_checks(PPC_TOPOLOGIES) + (["kunit.py"] if kunit_py else [])
    try:
        tree = setup_and_fetch(st, tree_spec)
        power_stages(st, tree, opts, failed, PPC_TOPOLOGIES)
        if kunit_py:
            with st.stage("KUnit with kunit.py for powerpc (the README's command)"):
                image = built(tree, BuildSpec("patched", "lab", "ppc64le", no_build=True)).image
                if not kunit_tool.run_readme_command(tree.path, tree.key, image,
                                                     arch="ppc64le"):
                    failed.append("kunit.py")
    finally:
        say(st.summary())
    return verdict("test --arch ppc64le", checks, failed)
