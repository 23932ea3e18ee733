"""Boot and check: 'run' (build, boot, topology check), and the measurement
integration checks the test tiers run (testcmd.py)."""

from __future__ import annotations

from typing import List, Optional

from schedlab.core import build as buildmod
from schedlab.core import deps, guests
from schedlab.core import topology as topomod
from schedlab.core.spec import TreeSpec, VmOptions
from schedlab.core.stages import Report
from schedlab.core.util import say
from schedlab.measuring import measure as measuremod
from schedlab.measuring import plan as planmod
from schedlab.measuring import probes as probemod
from schedlab.measuring import results as resmod
from schedlab.measuring import workloads as workmod
from schedlab.series import patchset

# The measurement harness's integration test: a short plan, every probe but
# the cost probes (each measured alone, under icount: ICOUNT_INTEGRATION).
# The knob exercises --knob/--arm end to end (written, read back, restored).
# Every probe but the cost probes and the plugin probes, insns and lines
# (icount only, and alone), and cycles and c2c, which need a PMU (TCG has
# none: the guest drops them with a note).
INTEGRATION = planmod.Plan(tuple(workmod.plan_workloads("stress-50")),
                           tuple(n for n, p in probemod.PROBES.items()
                                 if p.program != "cost"
                                 and n not in (*probemod.PLUGIN_PROBES, "cycles", "c2c")),
                           runs=1, seconds=3,
                           knobs=(("newidle_cost_pct", "400"),))
INTEGRATION_TOPOLOGY = "smt4"
# And under icount: the cost probe of should_we_balance() with its calibration.
ICOUNT_INTEGRATION = planmod.Plan(tuple(workmod.plan_workloads("stress-100")),
                                  ("swb-cost",), runs=1, seconds=2, accel="icount")


def setup_and_fetch(st: Report, tree_spec: TreeSpec):
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
    st = Report("run")
    try:
        tree = setup_and_fetch(st, tree_spec)
        with st.stage("series apply"):
            commit = patchset.ensure_variant(tree, "patched")
        with st.stage(f"build patched/lab{'' if not arch else ' ' + arch}"):
            result = buildmod.build(tree, "patched", commit, "lab", arch)
        rc = 0
        for name in topologies:
            with st.stage(f"boot {name} + topology check"):
                rc |= guests.check_topology(arch, result.image, topomod.parse_topology(name),
                                             opts)
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
