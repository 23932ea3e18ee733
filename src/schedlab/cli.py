"""A sched/fair SMT patch series and the lab that proves it.

The two main commands:
  ./schedlab ab      base vs patched in the VM: build both probe kernels, run
                     the measurement plan on a simulated SMT topology, print
                     the headline table (mean, CV%, significance)
  ./schedlab test    the test command CI runs: unit tests, lint, series check,
                     build, boots, KUnit, kselftest, a measurement run

Also: setup | fetch | presets | series ... | build | vm | kunit | selftest |
measure | compare | reparse | run (fetch, apply, build, boot smt4).
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import Any, Callable, List, Optional

from . import ab as abmod
from . import build as buildmod
from . import compare as comparemod
from . import deps, kselftest, kunit, kunit_tool, pipeline, series, series_cmd, tgstudy
from . import measure as measuremod
from . import peer_tests as peermod
from . import plan as planmod
from . import probes as probemod
from . import results as resmod
from . import soak as soakmod
from . import topology as topomod
from . import vm
from . import workloads as workmod
from .spec import BuildSpec, TreeSpec, VmOptions, built, topologies
from .util import LabError, eprint, say, set_repo

Sub = Any   # argparse's subparsers action (a private type)

# ------------------------------------------------------------------ option groups


def add_tree_opts(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("kernel tree")
    g.add_argument("--kernel", metavar="DIR",
                   help="your own kernel git tree (e.g. tip/sched/core); default: "
                        "$KERNEL_SRC, else Debian's linux-source-7.3")
    g.add_argument("--base", metavar="REV",
                   help="with --kernel: the base commit (default HEAD of that tree)")


def tree_spec(args: argparse.Namespace) -> TreeSpec:
    return TreeSpec(args.kernel, args.base)


def add_build_opts(p: argparse.ArgumentParser, measure: bool = True) -> None:
    g = p.add_argument_group("build")
    g.add_argument("--variant", default="patched", choices=["base", "patched"])
    g.add_argument("--config", default="lab", choices=sorted(buildmod.CONFIGS))
    g.add_argument("--arch", default=None, choices=sorted(buildmod.ARCHES),
                   help="target architecture (default x86_64)")
    if measure:
        g.add_argument("--measure", action="store_true",
                       help="also apply the measurement series (patches/measure/)")
    g.add_argument("--no-build", action="store_true",
                   help="boot what is already built, without an incremental build")


def build_spec(args: argparse.Namespace) -> BuildSpec:
    return BuildSpec(args.variant, args.config, args.arch, getattr(args, "measure", False),
                     getattr(args, "no_build", False))


def add_vm_opts(p: argparse.ArgumentParser, check: bool = True) -> None:
    g = p.add_argument_group("VM")
    g.add_argument("--online", type=int, metavar="K",
                   help="bring up only K CPUs (kernel maxcpus=K); nr_cpu_ids stays N")
    g.add_argument("--memory", type=int, default=2048, metavar="MIB")
    g.add_argument("--append", action="append", default=[], metavar="ARG",
                   help="extra kernel argument (repeatable)")
    g.add_argument("--timeout", type=float, default=900, metavar="SECS")
    if check:
        g.add_argument("--accel", default="auto", choices=vm.ACCELS,
                       help="icount: one host thread, the guest clock counting instructions")
        g.add_argument("--no-check", action="store_true", help="skip the topology check")
        g.add_argument("--verbose", action="store_true", help="show the guest console")
        g.add_argument("--rwdir", action="append", default=[], type=Path, metavar="DIR",
                       help="a host folder the guest may write (repeatable)")


def vm_options(args: argparse.Namespace) -> VmOptions:
    return VmOptions(args.online, args.memory, tuple(args.append), args.timeout,
                     getattr(args, "no_check", False), getattr(args, "verbose", False),
                     tuple(getattr(args, "rwdir", [])), getattr(args, "accel", "auto"))


def add_plan_opts(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("measurement plan")
    g.add_argument("--topology", "-t", default="smt4", help="preset or SxCxT[:numa]")
    g.add_argument("--plan", help="comma-separated workloads (default "
                   + ",".join(workmod.DEFAULT_PLAN) + "): " + ", ".join(workmod.WORKLOADS)
                   + ", schbench")
    g.add_argument("--probe", help="comma-separated probes (default "
                   + ",".join(probemod.DEFAULT_PROBES) + "): " + ", ".join(probemod.PROBES))
    g.add_argument("--attach", default="auto", choices=probemod.ATTACH_METHODS,
                   help="bpftrace attach method (auto: kfunc with BTF, else kprobe)")
    g.add_argument("--latency-tool", default="auto", choices=probemod.LATENCY_TOOLS,
                   help="funclatency tool (auto: bcc, else libbpf-tools, else bpftrace)")
    g.add_argument("--schbench", type=Path, metavar="PATH",
                   help="your schbench binary (for the schbench workload)")
    g.add_argument("--runs", type=int, default=3)
    g.add_argument("--seconds", type=int, default=10, help="duration of timed workloads")
    g.add_argument("--arch", default=None, choices=sorted(buildmod.ARCHES))
    g.add_argument("--accel", default="auto", choices=vm.ACCELS,
                   help="icount: one host thread, the guest clock counting instructions "
                        "(for the *-cost probes); default KVM where it works, else TCG")


def plan_request(args: argparse.Namespace, knobs: Optional[List[str]] = None) -> planmod.Plan:
    return planmod.make_plan(args.plan, args.probe, schbench=args.schbench, runs=args.runs,
                             seconds=args.seconds, attach=args.attach,
                             latency_tool=args.latency_tool,
                             knobs=planmod.parse_knobs(knobs), accel=args.accel)


def _command(sub: Sub, name: str, func: Callable[[argparse.Namespace], int], help: str,
             **kw) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help, description=help, **kw)
    p.set_defaults(func=func)
    return p


# ------------------------------------------------------------------ commands

def cmd_setup(args: argparse.Namespace) -> int:
    deps.setup()
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    tree = tree_spec(args).resolve()
    say(f"base: {tree.description}\n  tree {tree.path}, base commit {tree.base[:12]}")
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    say(topomod.presets_help())
    return 0


def cmd_series(args: argparse.Namespace) -> int:
    return series_cmd.command(args.action, tree_spec(args).resolve, measure=args.measure,
                          start=args.start, end=args.end, reroll=args.reroll_count,
                          onto=args.onto, kernel=args.kernel, ppc=not args.no_ppc)


def add_series(sub: Sub) -> None:
    s = _command(sub, "series", cmd_series, "apply, export, rebase, check the series")
    add_tree_opts(s)
    s.add_argument("action", choices=["list", "apply", "export", "rebase", "check"])
    s.add_argument("--measure", action="store_true",
                   help="apply: with the measurement series; export: into patches/measure/")
    s.add_argument("--start", metavar="REV", help="export: first commit excluded (default base)")
    s.add_argument("--end", default="HEAD", metavar="REV", help="export: last commit")
    s.add_argument("--reroll-count", "-v", type=int, metavar="N",
                   help="export: version N of the series ([PATCH vN m/n] subjects)")
    s.add_argument("--onto", metavar="REV", help="rebase: the new base")
    s.add_argument("--no-ppc", action="store_true", help="check: skip the ppc64le compile")


def cmd_build(args: argparse.Namespace) -> int:
    tree = tree_spec(args).resolve()
    if args.host_config:
        # An installable kernel for this machine, always with the measurement series.
        commit = series.ensure_variant(tree, args.variant, True)
        buildmod.build_host(tree, args.variant, commit,
                            buildmod.host_config_source(args.host_config),
                            localmodconfig=args.localmodconfig,
                            package=False if args.no_deb else None,
                            configure_only=args.configure_only)
        return 0
    built(tree, build_spec(args))
    return 0


def add_build(sub: Sub) -> None:
    s = _command(sub, "build", cmd_build, "build a kernel")
    add_tree_opts(s)
    add_build_opts(s)
    g = s.add_argument_group("a kernel for this machine")
    g.add_argument("--host-config", nargs="?", const="running", metavar="FILE",
                   help="an installable kernel for this machine from its own config "
                        "(default /boot/config-$(uname -r) or /proc/config.gz), "
                        "LOCALVERSION -schedlab-VARIANT, measurement series applied")
    g.add_argument("--localmodconfig", action="store_true",
                   help="with --host-config: only the modules loaded now (faster)")
    g.add_argument("--no-deb", action="store_true",
                   help="with --host-config: plain build instead of bindeb-pkg")
    g.add_argument("--configure-only", action="store_true",
                   help="with --host-config: write the .config and stop")


def cmd_vm(args: argparse.Namespace) -> int:
    result = built(tree_spec(args).resolve(), build_spec(args))
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    return pipeline.run_vm(topomod.parse_topology(args.topology), result.image, command,
                           vm_options(args))


def add_vm(sub: Sub) -> None:
    s = _command(sub, "vm", cmd_vm, "boot on a topology and run a command: "
                                    "vm --topology smt8 -- nproc")
    add_tree_opts(s)
    add_build_opts(s)
    add_vm_opts(s)
    s.add_argument("--topology", "-t", default="smt4", help="preset or SxCxT[:numa]")
    s.add_argument("command", nargs=argparse.REMAINDER)


def cmd_kunit(args: argparse.Namespace) -> int:
    tree = tree_spec(args).resolve()
    if args.kunit_py:
        result = built(tree, BuildSpec(args.variant, "lab", args.arch, False, args.no_build))
        return 0 if kunit_tool.run_readme_command(tree.path, tree.key, result.image,
                                                  args.arch or "x86_64") else 1
    result = built(tree, build_spec(args))
    online = args.online
    if online is None and args.topology == kunit.DEFAULT_TOPOLOGY:
        online = kunit.DEFAULT_ONLINE
    ok = kunit.run_on(tree.path, result.image, args.topology, online, args.filter,
                      args.timeout, arch=args.arch)
    return 0 if ok else 1


def add_kunit(sub: Sub) -> None:
    s = _command(sub, "kunit", cmd_kunit, "run the KUnit suites on a topology (default 192 "
                                          "possible, 2 online CPUs)")
    add_tree_opts(s)
    add_build_opts(s)
    g = s.add_argument_group("KUnit boot")
    g.add_argument("--online", type=int, metavar="K",
                   help="bring up only K CPUs (default 2 on the default topology)")
    g.add_argument("--timeout", type=float, default=900, metavar="SECS")
    g.add_argument("--topology", "-t", default=kunit.DEFAULT_TOPOLOGY,
                   help="preset or SxCxT[:numa]; smt4-numa with all CPUs online also "
                        "compares a fixture with the live domains")
    g.add_argument("--filter", metavar="GLOB", help="kunit.filter_glob, e.g. "
                                                    "'sched_fair_lb.swb*'")
    g.add_argument("--kunit-py", action="store_true",
                   help="run the tree's own kunit.py as the README shows (its own build of "
                        "kernel/sched/.kunitconfig, the series' qemu config, TCG where KVM "
                        "is broken) instead of the lab's boot")


def cmd_selftest(args: argparse.Namespace) -> int:
    if args.boots < 1:
        raise LabError(f"selftest: --boots must be 1 or more, not {args.boots}")
    tree = tree_spec(args).resolve()
    result = built(tree, build_spec(args))
    return 0 if kselftest.run_selftest(tree, result.image, vm_options(args), args.boots) else 1


def add_selftest(sub: Sub) -> None:
    topology, program = kselftest.SELFTEST
    s = _command(sub, "selftest", cmd_selftest, "the series' kselftest (tools/testing/"
                 f"selftests/sched/{program}) in the lab VM on {topology}")
    add_tree_opts(s)
    add_build_opts(s)
    add_vm_opts(s, check=False)
    s.add_argument("--boots", type=int, default=1, metavar="N",
                   help="run it in N boots, one after the other (default 1), to see "
                   "how its counts vary")


def debug_command(sub: Sub, name: str, fn: Callable[[argparse.Namespace], int],
                  text: str) -> argparse._ArgumentGroup:
    """A command that boots the debug kernel: tree options, and --no-build in
    its own group, which the caller fills."""
    s = _command(sub, name, fn, text)
    add_tree_opts(s)
    g = s.add_argument_group(name.replace("-", " "))
    g.add_argument("--no-build", action="store_true",
                   help="boot the debug kernel already built, without an incremental build")
    return g


def cmd_soak(args: argparse.Namespace) -> int:
    return 0 if soakmod.run_for(args.topology, args.minutes, args.variant, tree_spec(args),
                                args.no_build, args.append, args.save) else 1


def add_soak(sub: Sub) -> None:
    g = debug_command(sub, "soak", cmd_soak, "the debug kernel under load, CPU hotplug, "
                      "cgroup churn, cpuset partitions and feature flips; fails on a splat "
                      "base does not show, a failed or hung workload, or a fault count below "
                      "its floor")
    g.add_argument("--topology", "-t", default="smt4-numa", help="preset or SxCxT[:numa]")
    g.add_argument("--minutes", type=float, default=30)
    g.add_argument("--variant", default="patched", choices=["base", "patched"])
    g.add_argument("--append", action="append", default=[], metavar="ARG",
                   help="extra kernel argument (repeatable), e.g. relax_domain_level=1")
    g.add_argument("--save", action="store_true",
                   help="keep the summary in results/soak/VARIANT-TOPOLOGY.json (a base "
                        "soak kept there is what a clean checkout compares splats with)")


def cmd_peer_tests(args: argparse.Namespace) -> int:
    variants = [args.variant] if args.variant else ["base", "patched"]
    return 0 if peermod.run_peer_tests(tree_spec(args), variants, args.no_build,
                                       args.timeout, args.save) else 1


def add_peer_tests(sub: Sub) -> None:
    g = debug_command(sub, "peer-tests", cmd_peer_tests, "the kernel's own KUnit suites "
                      "(KUNIT_ALL_TESTS) and sched/cgroup selftests on base and patched, side "
                      "by side; fails on a test that passes on base and not on patched")
    g.add_argument("--variant", choices=["base", "patched"],
                   help="only this one, compared with the newest run of the other "
                        "(default: both)")
    g.add_argument("--timeout", type=float, default=5400, metavar="SECS",
                   help="for each boot (KUnit, then the selftests)")
    g.add_argument("--save", action="store_true",
                   help="keep the results in results/peer-tests/VARIANT.json (the "
                        "committed pass set a run without the other variant compares with)")


def cmd_measure(args: argparse.Namespace) -> int:
    if args.vm and args.host:
        raise LabError("measure: --vm or --host, not both")
    plan = plan_request(args, args.knob)
    if args.host:
        runs = measuremod.measure_on_host(args.label, plan, args.variant, args.timeout)
    else:
        runs = measuremod.measure_build(tree_spec(args), args.variant or "patched",
                                        args.label, plan, args.topology, args.online,
                                        args.timeout, args.arch, args.no_build)
    return 1 if any(not r.complete for r in runs) else 0


def add_measure(sub: Sub) -> None:
    s = _command(sub, "measure", cmd_measure, "run a measurement plan, results in "
                                              "results/LABEL/")
    add_tree_opts(s)
    add_plan_opts(s)
    g = s.add_argument_group("where")
    g.add_argument("--label", required=True)
    g.add_argument("--vm", action="store_true", help="in the lab VM (the default)")
    g.add_argument("--host", action="store_true",
                   help="on this machine, booted into the kernel to measure (needs root)")
    g.add_argument("--variant", default=None, choices=["base", "patched"],
                   help="with --vm: which build (default patched); with --host: a label "
                        "kept with the results")
    g.add_argument("--no-build", action="store_true")
    g.add_argument("--online", type=int, metavar="K",
                   help="with --vm: bring up only K CPUs (kernel maxcpus=K)")
    g.add_argument("--timeout", type=float, default=900, metavar="SECS")
    g.add_argument("--knob", action="append", metavar="NAME=VALUE",
                   help=f"write VALUE to {planmod.KNOB_DIR}/NAME before the plan and "
                        "restore it after (repeatable), e.g. "
                        "newidle_cost_pct=400")


def cmd_reparse(args: argparse.Namespace) -> int:
    """Parse a result set's raw outputs again; boots are pooled again."""
    resmod.reparse(resmod.find(args.label))
    return 0


def add_reparse(sub: Sub) -> None:
    s = _command(sub, "reparse", cmd_reparse, "parse the raw outputs of results/LABEL again "
                                              "(after a parser change; boots pooled again)")
    s.add_argument("label")


def cmd_compare(args: argparse.Namespace) -> int:
    a_dir, b_dir = resmod.find(args.a), resmod.find(args.b)
    plots = args.plots
    if plots is None and not args.no_plots:
        plots = b_dir.parent / f"{a_dir.name}-vs-{b_dir.name}-plots"
    only = comparemod.HEADLINE if args.headline else args.only
    say(comparemod.compare_and_plot(a_dir, b_dir, args.markdown, plots, only, args.each))
    return 0


def add_compare(sub: Sub) -> None:
    s = _command(sub, "compare", cmd_compare, "compare two result sets: compare base patched")
    s.add_argument("a")
    s.add_argument("b")
    s.add_argument("--markdown", action="store_true")
    s.add_argument("--plots", type=Path, metavar="DIR",
                   help="where the PNG plots go (default results/A-vs-B-plots)")
    s.add_argument("--no-plots", action="store_true")
    s.add_argument("--each", action="store_true",
                   help="also every run's value, in run order (one per boot of an 'ab' arm)")
    pick = s.add_mutually_exclusive_group()
    pick.add_argument("--only", metavar="REGEX", help="only the metrics matching REGEX")
    pick.add_argument("--headline", action="store_true",
                      help="only the headline metrics (the rows 'ab' prints)")


def cmd_tg_report(args: argparse.Namespace) -> int:
    say(tgstudy.table(args.label, args.markdown))
    return 0


def add_tg_report(sub: Sub) -> None:
    s = _command(sub, "tg-report", cmd_tg_report,
                 "the task-group gathering study: depth 1 vs depth 2 of the tg-... "
                 "workloads in results/LABEL")
    s.add_argument("label")
    s.add_argument("--markdown", action="store_true")


def cmd_ab(args: argparse.Namespace) -> int:
    if args.boots < 1:
        raise LabError(f"ab: --boots must be 1 or more, not {args.boots}")
    req = abmod.AbRequest(tree_spec(args), plan_request(args), args.topology,
                          tuple(abmod.parse_arms(args.arm)),
                          args.label or f"ab-{args.topology}", args.boots, args.fresh,
                          args.online, args.timeout, args.arch)
    return abmod.run(req, tables_only=args.tables_only)


def add_ab(sub: Sub) -> None:
    s = _command(sub, "ab", cmd_ab, "main job: base vs patched in the VM: build both, run "
                                    "the plan, compare")
    add_tree_opts(s)
    add_plan_opts(s)
    g = s.add_argument_group("comparison")
    g.add_argument("--label", help="results prefix (default ab-TOPOLOGY)")
    g.add_argument("--fresh", action="store_true", help="measure again even when results "
                                                        "of the same plan and builds exist")
    g.add_argument("--boots", type=int, default=1, metavar="N",
                   help="spread the runs over N boots per arm, the arms interleaved "
                        "(--runs per boot; default 1)")
    g.add_argument("--arm", action="append", metavar="NAME=VARIANT[:KNOB=VALUE...]",
                   help="a side of the comparison (repeatable; default base=base "
                        "patched=patched): the build and the knobs of "
                        f"{planmod.KNOB_DIR}/ written before its plan, e.g. "
                        "--arm base=base --arm default=patched "
                        "--arm x4=patched:newidle_cost_pct=400; every arm is "
                        "compared with the first, a knob arm also with its build's plain arm")
    g.add_argument("--tables-only", action="store_true",
                   help="no build, no measuring: the tables and plots again from the "
                        "results there (after 'reparse')")
    g.add_argument("--online", type=int, metavar="K",
                   help="bring up only K CPUs (kernel maxcpus=K)")
    g.add_argument("--timeout", type=float, default=900, metavar="SECS")


def cmd_run(args: argparse.Namespace) -> int:
    return pipeline.main_job(tree_spec(args), topologies(args.topology, ["smt4"]),
                             vm_options(args), args.arch)


def add_run(sub: Sub) -> None:
    s = _command(sub, "run", cmd_run, "fetch, apply, build, boot smt4, topology check")
    add_tree_opts(s)
    add_vm_opts(s)
    s.add_argument("--topology", "-t", action="append", default=None)
    s.add_argument("--arch", default=None, choices=sorted(buildmod.ARCHES))


def cmd_test(args: argparse.Namespace) -> int:
    if args.arch == "ppc64le":
        return pipeline.ppc_test_command(tree_spec(args), vm_options(args),
                                         kunit_py=not args.no_kunit_py)
    return pipeline.test_command(tree_spec(args),
                                 topologies(args.topology, pipeline.DEFAULT_TEST_TOPOLOGIES),
                                 vm_options(args), ppc=not args.no_ppc,
                                 unit_only=args.unit_only,
                                 reliability=not args.no_reliability)


def add_test(sub: Sub) -> None:
    s = _command(sub, "test", cmd_test, "the test command CI runs (pytest, lint, "
                                        "series check, build, boots, KUnit, measurement)")
    add_tree_opts(s)
    add_vm_opts(s)
    s.add_argument("--topology", "-t", action="append", default=None)
    s.add_argument("--no-ppc", action="store_true", help="skip the ppc64le compile check and the POWER stages (pseries boot, KUnit)")
    s.add_argument("--arch", default=None, choices=sorted(buildmod.ARCHES),
                   help="ppc64le: the POWER test instead (qemu pseries: topology boots, "
                        "KUnit on SMT8 and SMT4 guests, kunit.py for powerpc)")
    s.add_argument("--no-kunit-py", action="store_true",
                   help="with --arch ppc64le: leave out kunit.py's own cross build and boot")
    s.add_argument("--unit-only", action="store_true",
                   help="only the lab's pytest suite and lint")
    s.add_argument("--no-reliability", action="store_true",
                   help="leave out the debug build, the short soak (smt4-numa, patched) "
                        "and the peer tests of patched: about 30 minutes less")


# ------------------------------------------------------------------ parser

def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="schedlab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", type=Path, metavar="DIR",
                   help="the project checkout (patches/, results/, work/); default: the "
                        "current directory or the checkout ./schedlab is in")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    add_ab(sub)
    add_test(sub)
    _command(sub, "setup", cmd_setup, "install missing Debian packages and the venv")
    add_tree_opts(_command(sub, "fetch", cmd_fetch, "prepare the base tree"))
    _command(sub, "presets", cmd_presets, "list the topology presets")
    add_series(sub)
    add_build(sub)
    add_vm(sub)
    add_kunit(sub)
    add_selftest(sub)
    add_soak(sub)
    add_peer_tests(sub)
    add_measure(sub)
    add_compare(sub)
    add_reparse(sub)
    add_tg_report(sub)
    add_run(sub)
    return p


def _terminate(signum, frame):  # noqa: ARG001
    raise SystemExit(128 + signum)


def main(argv: Optional[List[str]] = None) -> int:
    # Ctrl-C and SIGTERM unwind through the finally blocks that stop VMs,
    # even where the parent started us with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)
    args = make_parser().parse_args(argv)
    try:
        if args.repo:
            set_repo(args.repo)
        return args.func(args)
    except LabError as exc:
        eprint(f"schedlab: error: {exc}")
        return 2
    except KeyboardInterrupt:
        eprint("schedlab: interrupted (every VM started was stopped)")
        return 130
