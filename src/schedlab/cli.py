"""A sched/fair SMT patch series and the lab that proves it.

The two main commands:
  ./schedlab ab      base vs patched in the VM: build both probe kernels, run
                     the measurement plan on a simulated SMT topology, print
                     a headline of about ten rows (mean, CV%, significance)
  ./schedlab test    the test command CI runs: unit tests, lint, series check,
                     build, boots, KUnit, kselftest, measurement runs
                     (--full: also soak, peer tests, POWER; a record kept)

Also: setup | fetch | presets | series ... | build | vm | kunit | selftest |
soak | peer-tests | measure | compare | reparse | run | hw.
Every command's --help ends with examples.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import List, Optional

from schedlab import pipeline, testcmd
from schedlab.cliargs import (VARIANTS, Sub, add_arch, add_build_opts, add_matrix_opts, add_online,
                              add_plan_opts, add_topic_opts, add_topology, add_tree_opts,
                              add_vm_opts, break_arg, build_spec, command, debug_command, knob_arg,
                              label_arg, plan_request, positive_int, result_set_arg, topic_arg,
                              tree_spec, vm_options)
from schedlab.core import build as buildmod
from schedlab.core import deps, guests, targets
from schedlab.core import topology as topomod
from schedlab.core.spec import BuildSpec
from schedlab.core.util import LabError, eprint, say, set_repo
from schedlab.kit import hw, kitproof, machine, rehearsal
from schedlab.measuring import ab as abmod
from schedlab.measuring import compare as comparemod
from schedlab.measuring import measure as measuremod
from schedlab.measuring import results as resmod
from schedlab.measuring.plan import KNOB_DIR
from schedlab.series import breaks as breaksmod
from schedlab.series import kselftest, kunit, kunit_tool, patchset
from schedlab.series import peer_tests as peermod
from schedlab.series import series_cmd
from schedlab.series import soak as soakmod
from schedlab.series import topics
from schedlab.series.topics import built

# ------------------------------------------------------------------ commands

def cmd_setup(args: argparse.Namespace) -> int:
    deps.setup()
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    tree = tree_spec(args).resolve()
    say(f"base: {tree.description}\n  tree {tree.path}, base commit {tree.base[:12]}")
    return 0


def cmd_hw(args: argparse.Namespace) -> int:
    if args.code_only and not args.switch_proof:
        raise LabError("hw --code-only goes with --switch-proof")
    bench = args.bench.split(",") if args.bench else None
    kind = hw.SHARE if args.lb_share else hw.MAIN
    hw.refuse_unknown(args.arm, bench)
    if args.lb_share and (args.c2c or args.switch_proof):
        raise LabError("hw --lb-share is a pass of its own: without "
                       + ("--c2c" if args.c2c else "--switch-proof"))
    if args.rehearse:
        if args.fresh:
            raise LabError("hw --rehearse always measures afresh (a new boot each time); "
                           "drop --fresh")
        arms = args.arm or list(rehearsal.SHARE_ARMS if args.lb_share else rehearsal.ARMS)
        hw.pick(hw.ARMS, arms, bench)   # refused before a build
        req = rehearsal.RehearsalRequest(
            args.topology, tuple(arms),
            tuple(bench or rehearsal.BENCH),
            args.seconds or (rehearsal.SHARE_SECONDS if args.lb_share else 3), tree_spec(args),
            rounds=args.rounds or 1, runs=args.runs, c2c=args.c2c, share=args.lb_share,
            timeout=rehearsal.RehearsalRequest.timeout * (args.rounds or 1) * args.runs)
        return 0 if rehearsal.run(req).ok else 1
    if args.switch_proof:
        given = [o for o, v in (("--rounds", args.rounds), ("--seconds", args.seconds),
                                ("--arm", args.arm), ("--bench", args.bench),
                                ("--runs", args.runs != 1), ("--c2c", args.c2c)) if v]
        if given:
            raise LabError(f"hw --switch-proof has its own arms, workloads and runs "
                           f"(kitproof.py); {', '.join(given)} would be ignored: drop it")
        return kitproof.run(tree_spec(args), args.fresh, code_only=args.code_only)
    args.rounds = args.rounds or 5
    seconds = args.seconds or 30
    if args.plan:
        say(hw.plan_text(machine.kernel_pieces(machine.DEBUG_SCHED), args.rounds, args.runs, seconds,
                         args.arm, bench, kind))
        return 0
    if args.report:
        return hw.report_again(not args.no_plots, kind)
    return hw.run(args.check, args.rounds, args.runs, seconds, args.fresh, args.arm, bench,
                  ["./schedlab", *sys.argv[1:]], not args.no_plots, args.c2c, kind)


def add_hw(sub: Sub) -> None:
    p = command(sub, "hw", cmd_hw, "on an SMT machine booted into the series: check what the "
                "kit needs, record the machine, run the arms interleaved (work/results/hw-*)", """
./schedlab hw --check                      # as root: the kernel, the config, SMT, the tools; work/hw/
./schedlab hw --plan --rounds 5 --seconds 30   # the arms this kernel can run, the benchmarks, the time
./schedlab hw                              # the runs, then work/results/hw/report.md
./schedlab hw --report                     # the report again from what finished (after Ctrl-C)
./schedlab hw --lb-share                   # a pass of its own: how much SG_STATS_REUSE's sums
                                           # could serve here (work/results/hw-share/report.md)
./schedlab hw --rehearse -t smt8           # on the lab host: the kit in an SMT8 guest, checked
./schedlab hw --switch-proof               # on the lab host: each swb_state under icount against
                                           # the kernel built at its patch""")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true",
                      help="only the checks and the machine's record")
    what.add_argument("--plan", action="store_true",
                      help="print the arms this kernel can run, the benchmarks and the "
                           "estimated duration; runs nothing")
    what.add_argument("--report", action="store_true",
                      help="write the report of the last run again from what finished "
                           "(work/results/hw/report.md); runs nothing")
    what.add_argument("--rehearse", action="store_true",
                      help="on the lab's host, not the SMT machine: the kit inside a guest "
                           "booted with the kit's kernel (icount build, single-thread TCG), "
                           "3 s runs; checks the report (work/hw-rehearsal/)")
    what.add_argument("--switch-proof", action="store_true",
                      help="on the lab's host: should_we_balance()'s instructions per call "
                           "in each swb_state of the kit's kernel against the kernel built "
                           "at its patch, under icount on smt8 (an 'ab' run of ten arms, "
                           "two boots each; resumable); prints the proof "
                           "(work/results/kit-icount-smt8/switch-proof.md)")
    add_topology(p, "smt8")
    add_tree_opts(p)
    p.add_argument("--rounds", type=positive_int, default=None,
                   help="rounds of all arms, interleaved (default 5; 1 with --rehearse)")
    p.add_argument("--runs", type=positive_int, default=1, help="runs per arm and round")
    p.add_argument("--seconds", type=positive_int, default=None,
                   help="duration of timed workloads (default 30; 3 with --rehearse, 10 with "
                        "--rehearse --lb-share)")
    p.add_argument("--arm", action="append", metavar="NAME",
                   help="only these arms (repeatable; the first is the reference): "
                        + ", ".join(a.name for a in hw.ARMS))
    p.add_argument("--bench", metavar="LIST",
                   help="only these benchmarks (comma-separated): " + ", ".join(hw.BENCHMARKS))
    p.add_argument("--fresh", action="store_true",
                   help="measure every round again; a rerun otherwise goes on from the "
                        "first round not finished")
    p.add_argument("--c2c", action="store_true",
                   help="also perf c2c in every run (modified-line loads, where the CPU "
                        "samples loads); its sampling changes what the other numbers "
                        "measure, so run it as a pass of its own")
    p.add_argument("--lb-share", action="store_true",
                   help="the lb-share pass instead of the benchmarks': every busy balance "
                        "above the lowest level replayed under SG_STATS_REUSE's rule, how "
                        "much of their reads the sums could serve with this machine's "
                        "phases (arms series and lbstats, " + ", ".join(hw.SHARE.bench)
                        + " by default; work/results/hw-share/; with --plan, --report, "
                        "--rehearse)")
    p.add_argument("--no-plots", action="store_true",
                   help="tables only (matplotlib is slow in a TCG guest: the rehearsal "
                        "makes the plots on the host with --report)")
    p.add_argument("--code-only", action="store_true",
                   help="with --switch-proof: the builds and the code comparison, no boot")


def cmd_presets(args: argparse.Namespace) -> int:
    say(topomod.presets_help())
    return 0


def cmd_series(args: argparse.Namespace) -> int:
    return series_cmd.command(args.action, tree_spec(args).resolve, measure=args.measure,
                              kit=args.kit, lab=args.lab,
                          start=args.start, end=args.end, reroll=args.reroll_count,
                          onto=args.onto, kernel=args.kernel, ppc=not args.no_ppc,
                          full=args.full, cells=args.cells, topic=args.topic,
                          out=args.out, sender=args.sender)


def add_series(sub: Sub) -> None:
    s = command(sub, "series", cmd_series, "apply, export, rebase, check the series; "
                "build it in the config matrix", """
./schedlab series check                    # checkpatch, per-patch builds, W=1, ppc64le
./schedlab series apply --kernel ~/tip     # the series and patches/lab/ onto your tree (a worktree)
./schedlab series export --end HEAD~1      # after apply and edits: the series back (HEAD: patches/lab/)
./schedlab series matrix --cells fgs-no-cfs-bandwidth+all-tests --end my-tip   # 0-day's cell
./schedlab series topics                   # each topic applies alone on the KUnit series
./schedlab series objdiff                  # fair.o's production code, KUnit option on = off?
./schedlab series objdiff --start base --end posted~9  # what patch 1 changes in fair.o (report)
./schedlab series mail --topic wake --out /tmp/wake --from "Your Name <you@your.domain>"
                                           # one topic signed off by you, for git send-email""")
    add_tree_opts(s)
    s.add_argument("action", choices=["list", "apply", "export", "rebase", "check", "matrix",
                                      "topics", "mail", "objdiff"])
    s.add_argument("--measure", action="store_true",
                   help="apply: with the measurement series (apply always takes the series "
                        "and patches/lab/); export: into patches/measure/")
    s.add_argument("--kit", action="store_true",
                   help="apply: with the measurement series and the kit's switches; export: "
                        "into patches/kit/ (commits after the measurement series)")
    s.add_argument("--lab", action="store_true",
                   help="export: into patches/lab/, the lab's KUnit checks of the RFC topics "
                        "(commits after the series, never posted)")
    s.add_argument("--start", metavar="REV",
                   help="export: first commit excluded (default the base; with --lab the "
                        "series' tip, with --measure patched, with --kit patched+measure); "
                        "objdiff: with --end, a report of what differs in fair.o from REV to "
                        "--end (x86_64, the icount config: JUMP_LABEL=y). REV: a commit, "
                        "'base', 'posted' (the series), 'patched' (with patches/lab/), each "
                        "with an optional ~N")
    s.add_argument("--end", metavar="REV", help="export: last commit (default HEAD; a range "
                   "with the lab's commits is refused); matrix: the commit built (default "
                   "the series tip); objdiff: see --start")
    s.add_argument("--reroll-count", "-v", type=positive_int, metavar="N",
                   help="export, mail: version N of the series ([PATCH vN m/n] subjects; "
                        "default: no version)")
    s.add_argument("--onto", metavar="REV", help="rebase: the new base")
    s.add_argument("--no-ppc", action="store_true", help="check: skip the ppc64le compile")
    add_matrix_opts(s)
    add_topic_opts(s)


def cmd_build(args: argparse.Namespace) -> int:
    spec = build_spec(args)
    tree = tree_spec(args).resolve()
    if args.host_config:
        # An installable kernel for this machine, always with the measurement
        # series, and the kit's switches with the whole series (hw.py).
        variant = spec.variant
        kit = variant == "patched" and bool(patchset.read_series(patchset.kit_dir()))
        commit = patchset.ensure_variant(tree, variant, True, topics.variant_series(variant), kit)
        buildmod.build_host(tree, variant, commit,
                            buildmod.host_config_source(args.host_config),
                            localmodconfig=args.localmodconfig,
                            package=False if args.no_deb else None,
                            configure_only=args.configure_only)
        return 0
    built(tree, spec)
    return 0


def add_build(sub: Sub) -> None:
    s = command(sub, "build", cmd_build, "build a kernel", """
./schedlab build --variant base            # the lab config, without the series
./schedlab build --config probe --measure  # what measure boots
./schedlab build --host-config --kernel ~/tip   # an installable kernel for this machine""")
    add_tree_opts(s)
    add_build_opts(s)
    g = s.add_argument_group("a kernel for this machine")
    g.add_argument("--host-config", nargs="?", const="running", metavar="FILE",
                   help="an installable kernel for this machine from its own config "
                        "(default /boot/config-$(uname -r) or /proc/config.gz), "
                        "LOCALVERSION -schedlab-VARIANT, measurement series applied (and, "
                        "for the whole series, the hardware kit's switches)")
    g.add_argument("--localmodconfig", action="store_true",
                   help="with --host-config: only the modules loaded now (faster)")
    g.add_argument("--no-deb", action="store_true",
                   help="with --host-config: plain build instead of bindeb-pkg")
    g.add_argument("--configure-only", action="store_true",
                   help="with --host-config: write the .config and stop")


def cmd_vm(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    guests.check_request(args.arch, vm_options(args), command)
    spec = build_spec(args)
    result = built(tree_spec(args).resolve(), spec)
    return guests.check_topology(args.arch, result.image, topomod.parse_topology(args.topology),
                                 vm_options(args), command)


def add_vm(sub: Sub) -> None:
    s = command(sub, "vm", cmd_vm, "boot on a topology and run a command", """
./schedlab vm -t smt8 -- nproc             # boot, check the topology, run nproc
./schedlab vm -t 2x4x4:numa --online 8 -- cat /proc/schedstat
./schedlab vm --variant base --no-build -t smt4 -- true""")
    add_tree_opts(s)
    add_build_opts(s)
    add_vm_opts(s)
    add_topology(s)
    s.add_argument("command", nargs=argparse.REMAINDER)


def cmd_kunit(args: argparse.Namespace) -> int:
    if args.breaks is not None:
        others = [flag for flag, given in (
            ("--arch", args.arch), ("--topology", args.topology != kunit.DEFAULT_TOPOLOGY),
            ("--online", args.online is not None), ("--filter", args.filter),
            ("--reference", args.reference), ("--kunit-py", args.kunit_py)) if given]
        if others:
            raise LabError(f"--breaks boots each break's own tests on {kunit.DEFAULT_TOPOLOGY} "
                           f"(x86_64): not with {', '.join(others)}")
    spec = build_spec(args)
    tree = tree_spec(args).resolve()
    if args.breaks is not None:
        text, ok = breaksmod.run(tree, args.breaks, args.timeout)
        say(text)
        return 0 if ok else 1
    if args.kunit_py:
        result = built(tree, BuildSpec(spec.variant, "lab", args.arch, False, args.no_build))
        return 0 if kunit_tool.run_readme_command(tree.path, tree.key, result.image,
                                                  targets.get_target(args.arch).arch) else 1
    reference = None
    if args.reference:
        first = topics.read_topics()[0].name
        reference = built(tree, spec.with_(variant=topics.VARIANT_PREFIX + first)).image
    result = built(tree, spec)
    online = args.online
    if online is None and args.topology == kunit.DEFAULT_TOPOLOGY:
        online = kunit.DEFAULT_ONLINE
    ok = kunit.run_on(tree.path, result.image, args.topology, online, args.filter,
                      args.timeout, arch=args.arch, reference=reference)
    return 0 if ok else 1


def add_kunit(sub: Sub) -> None:
    s = command(sub, "kunit", cmd_kunit, "run the KUnit suites on a topology (default 192 "
                                         "possible, 2 online CPUs)", """
./schedlab kunit                           # every suite, 2x12x8 with 2 CPUs online
./schedlab kunit -t smt4-numa --filter 'sched_fair_lb.swb*'
./schedlab kunit --reference               # and v7.3's probe counts: the targets
./schedlab kunit --topic swb               # the base + the KUnit series + the swb topic
./schedlab kunit --kunit-py                # plain kunit.py, as the README shows
./schedlab kunit --breaks                  # each deliberate break must fail a test
./schedlab kunit --breaks scan-asks-twice  # one break""")
    add_tree_opts(s)
    add_build_opts(s)
    g = s.add_argument_group("KUnit boot")
    add_online(g, "bring up only K CPUs (default 2 on the default topology)")
    g.add_argument("--timeout", type=float, default=900, metavar="SECS")
    add_topology(g, kunit.DEFAULT_TOPOLOGY,
                 help="preset or SxCxT[:numa]; smt4-numa with all CPUs online also "
                      "compares a fixture with the live domains")
    g.add_argument("--filter", metavar="GLOB", help="kunit.filter_glob, e.g. "
                                                    "'sched_fair_lb.swb*'")
    g.add_argument("--breaks", nargs="*", metavar="NAME", type=break_arg,
                   help="build each deliberate break of the series' code (all, or those "
                        "named) and boot the tests it is for; fails unless every break "
                        "fails a test (" + ", ".join(b.name for b in breaksmod.BREAKS) + ")")
    g.add_argument("--reference", action="store_true",
                   help="also build the KUnit series alone and boot it first: its "
                        "should_we_balance() probe counts are v7.3's, the upstream columns "
                        "of the tables and what the targets compare with")
    g.add_argument("--kunit-py", action="store_true",
                   help="run the tree's own kunit.py as the README shows (its own build of "
                        "kernel/sched/.kunitconfig, the series' qemu config, TCG where KVM "
                        "is broken) instead of the lab's boot")


def cmd_selftest(args: argparse.Namespace) -> int:
    spec = build_spec(args)
    tree = tree_spec(args).resolve()
    result = built(tree, spec)
    return 0 if kselftest.run_selftest(tree, result.image, vm_options(args), args.boots) else 1


def add_selftest(sub: Sub) -> None:
    topology, program = kselftest.SELFTEST
    s = command(sub, "selftest", cmd_selftest, "the series' kselftest (tools/testing/"
                f"selftests/sched/{program}) in the lab VM on {topology}", """
./schedlab selftest                        # build, boot, run it once
./schedlab selftest --boots 3 --no-build   # three boots of the kernel built""")
    add_tree_opts(s)
    add_build_opts(s, commands=True)
    add_vm_opts(s, check=False)
    s.add_argument("--boots", type=positive_int, default=1, metavar="N",
                   help="run it in N boots, one after the other (default 1), to see "
                   "how its counts vary")


def cmd_soak(args: argparse.Namespace) -> int:
    if args.kit and args.variant != "patched":
        raise LabError("soak --kit: the kit's switches apply on the whole series "
                       "(--variant patched)")
    return 0 if soakmod.run_for(args.topology, args.minutes, args.variant, tree_spec(args),
                                args.no_build, args.append, args.save, args.kit) else 1


def add_soak(sub: Sub) -> None:
    g = debug_command(sub, "soak", cmd_soak, "the debug kernel under load, CPU hotplug, "
                      "cgroup churn, cpuset partitions and feature flips; fails on a splat "
                      "base does not show, a failed or hung workload, or a fault count below "
                      "its floor", """
./schedlab soak -t smt4-numa --minutes 10  # the debug kernel, patched
./schedlab soak --variant base --minutes 30 --save""")
    add_topology(g, "smt4-numa")
    g.add_argument("--minutes", type=float, default=30)
    g.add_argument("--variant", default="patched", choices=VARIANTS)
    g.add_argument("--kit", action="store_true",
                   help="with the measurement series and the kit's switches: their "
                        "should_we_balance() states flipped with the rest")
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
                      "by side; fails on a test that passes on base and not on patched", """
./schedlab peer-tests                      # base and patched, side by side
./schedlab peer-tests --variant patched    # patched against the kept base results""")
    g.add_argument("--variant", choices=VARIANTS,
                   help="only this one, compared with the newest run of the other "
                        "(default: both)")
    g.add_argument("--timeout", type=float, default=5400, metavar="SECS",
                   help="for each boot (KUnit, then the selftests)")
    g.add_argument("--save", action="store_true",
                   help="keep the results in results/peer-tests/VARIANT.json (the "
                        "committed pass set a run without the other variant compares with)")


def cmd_measure(args: argparse.Namespace) -> int:
    plan = plan_request(args, args.knob)
    if args.host:
        runs = measuremod.measure_on_host(args.label, plan, args.variant, args.timeout,
                                          fresh=args.fresh)
    else:
        runs = measuremod.measure_build(tree_spec(args), args.variant or "patched",
                                        args.label, plan, args.topology, args.online,
                                        args.timeout, args.arch, args.no_build, args.fresh)
    return 1 if any(not r.complete for r in runs) else 0


def add_measure(sub: Sub) -> None:
    s = command(sub, "measure", cmd_measure, "run a measurement plan, results in "
                "work/results/LABEL/ (--label results/NAME keeps them in the checkout)", """
./schedlab measure --label try -t smt8 --plan stress-100 --probe swb
./schedlab measure --label cost -t smt8 --probe swb-cost --accel icount
./schedlab measure --host --label mybox --variant patched   # on this machine, as root""")
    add_tree_opts(s)
    add_plan_opts(s)
    g = s.add_argument_group("where")
    g.add_argument("--label", required=True, type=label_arg)
    where = g.add_mutually_exclusive_group()
    where.add_argument("--vm", action="store_true", help="in the lab VM (the default)")
    where.add_argument("--host", action="store_true",
                       help="on this machine, booted into the kernel to measure (needs root)")
    g.add_argument("--fresh", action="store_true",
                   help="measure again; a rerun otherwise keeps a finished boot, and a "
                        "different request is refused")
    g.add_argument("--variant", default=None, choices=VARIANTS,
                   help="with --vm: which build (default patched); with --host: a label "
                        "kept with the results")
    g.add_argument("--no-build", action="store_true")
    add_online(g, "with --vm: bring up only K CPUs (kernel maxcpus=K)")
    g.add_argument("--timeout", type=float, default=900, metavar="SECS")
    g.add_argument("--knob", action="append", metavar="NAME=VALUE", type=knob_arg,
                   help=f"write VALUE to {KNOB_DIR}/NAME before the plan and "
                        "restore it after (repeatable), e.g. "
                        "newidle_cost_pct=400")


def cmd_reparse(args: argparse.Namespace) -> int:
    """Parse a result set's raw outputs again; boots are pooled again."""
    resmod.reparse(resmod.find(args.label))
    return 0


def add_reparse(sub: Sub) -> None:
    s = command(sub, "reparse", cmd_reparse, "parse the raw outputs of a result set (label "
                "or folder) again "
                                             "(after a parser change; boots pooled again)", """
./schedlab reparse ab-smt4-patched
./schedlab reparse /tmp/docs/results/data/icount-smt8-base   # a folder""")
    s.add_argument("label", type=result_set_arg)


def cmd_compare(args: argparse.Namespace) -> int:
    a_dir, b_dir = resmod.find(args.a), resmod.find(args.b)
    plots = args.plots
    if plots is None and not args.no_plots:
        plots = comparemod.default_plots(a_dir, b_dir)
    only = comparemod.HEADLINE if args.headline else args.only
    say(comparemod.compare_and_plot(a_dir, b_dir, args.markdown, plots, only, args.each))
    return 0


def add_compare(sub: Sub) -> None:
    s = command(sub, "compare", cmd_compare, "compare two result sets", """
./schedlab compare ab-smt4-base ab-smt4-patched --headline
./schedlab compare base patched --markdown --no-plots
./schedlab compare base patched --only 'should_we_balance' --each""")
    s.add_argument("a", type=result_set_arg)
    s.add_argument("b", type=result_set_arg)
    s.add_argument("--markdown", action="store_true")
    s.add_argument("--plots", type=Path, metavar="DIR",
                   help="where the PNG plots go (default work/results/A-vs-B-plots)")
    s.add_argument("--no-plots", action="store_true")
    s.add_argument("--each", action="store_true",
                   help="also every run's value, in run order (one per boot of an 'ab' arm)")
    pick = s.add_mutually_exclusive_group()
    pick.add_argument("--only", metavar="REGEX", help="only the metrics matching REGEX")
    pick.add_argument("--headline", action="store_true",
                      help="only the headline metrics (the rows 'ab' prints)")


def cmd_ab(args: argparse.Namespace) -> int:
    req = abmod.AbRequest(tree_spec(args), plan_request(args), args.topology,
                          tuple(abmod.parse_arms(args.arm, args.topic, args.per_patch)),
                          args.label or f"ab-{args.topology}", args.boots, args.fresh,
                          args.online, args.timeout, args.arch)
    return abmod.run(req, tables_only=args.tables_only)


def add_ab(sub: Sub) -> None:
    s = command(sub, "ab", cmd_ab, "main job: base vs patched in the VM: build both, run "
                                   "the plan, compare", """
./schedlab ab                              # smt4, the default plan, headline at the end
./schedlab ab -t smt8 --boots 5 --plan stress-100,hackbench-process
./schedlab ab --arm base=base --arm x4=patched:newidle_cost_pct=400
./schedlab ab --topic swb -t smt8          # base vs base + KUnit series + the swb topic
./schedlab ab --topic swb --per-patch -t smt8 --accel icount --probe swb-cost""")
    add_tree_opts(s)
    add_plan_opts(s)
    g = s.add_argument_group("comparison")
    g.add_argument("--label", type=label_arg, help="results prefix (default ab-TOPOLOGY, "
                   "under work/results/; --label results/NAME keeps them in the checkout)")
    g.add_argument("--fresh", action="store_true", help="measure every boot again; a rerun "
                   "otherwise goes on from the first missing boot, and a different request "
                   "is refused")
    g.add_argument("--boots", type=positive_int, default=1, metavar="N",
                   help="spread the runs over N boots per arm, the arms interleaved "
                        "(--runs per boot; default 1)")
    g.add_argument("--arm", action="append", metavar="NAME=VARIANT[:KNOB=VALUE...]",
                   help="a side of the comparison (repeatable; default base=base "
                        "patched=patched): the build and the knobs of "
                        f"{KNOB_DIR}/ written before its plan, e.g. "
                        "--arm base=base --arm default=patched "
                        "--arm x4=patched:newidle_cost_pct=400; every arm is "
                        "compared with the first, a knob arm also with its build's plain arm")
    g.add_argument("--topic", type=topic_arg, metavar="NAME",
                   help="base against the base plus the KUnit series and topic NAME of "
                        "patches/topics (arms base and NAME; not with --arm)")
    g.add_argument("--per-patch", action="store_true",
                   help="with --topic: also an arm per patch of the topic (NAME.K: its first "
                        "K patches), each compared with the arm before it and with base")
    g.add_argument("--tables-only", action="store_true",
                   help="no build, no measuring: the tables and plots again from the "
                        "results there (after 'reparse')")
    add_online(g)
    g.add_argument("--timeout", type=float, default=900, metavar="SECS")


def cmd_run(args: argparse.Namespace) -> int:
    return pipeline.main_job(tree_spec(args), args.topology or ["smt4"], vm_options(args),
                             args.arch)


def add_run(sub: Sub) -> None:
    s = command(sub, "run", cmd_run, "fetch, apply, build, boot smt4, topology check", """
./schedlab run                             # the series on Debian's 7.3, booted on smt4
./schedlab run --kernel ~/tip -t smt8 -t smt4-numa
./schedlab run --arch ppc64le -t smt8      # a pseries guest under TCG""")
    add_tree_opts(s)
    add_vm_opts(s)
    add_topology(s, many=True)
    add_arch(s)
    s.set_defaults(default_topologies=["smt4"])


def cmd_test(args: argparse.Namespace) -> int:
    if targets.get_target(args.arch) is not testcmd.DEFAULT and \
            (args.full or args.unit_only or args.topology):
        raise LabError("test --arch ppc64le runs the POWER stages alone: without --full, "
                       "--unit-only or --topology")
    req = testcmd.TestRequest(tree_spec(args),
                              tuple(args.topology or testcmd.DEFAULT_TOPOLOGIES),
                              vm_options(args), args.full, args.unit_only, args.arch)
    return testcmd.test_command(req)


def add_test(sub: Sub) -> None:
    s = command(sub, "test", cmd_test, "the test command CI runs (lint, unit tests, series "
                "check, build, boots, KUnit, kselftest, measurement runs); --full adds the "
                "soak, the peer tests and the POWER stages and records the result", """
./schedlab test                            # what CI runs: <= 60 min cold, <= 30 warm
./schedlab test --full                     # before a changed patch is called done
./schedlab test --unit-only                # pytest (no tree), mypy, shellcheck, commits""")
    add_tree_opts(s)
    add_vm_opts(s)
    add_topology(s, many=True, help="x86_64 topology boots (default "
                 + ", ".join(testcmd.DEFAULT_TOPOLOGIES) + ")")
    s.set_defaults(default_topologies=list(testcmd.DEFAULT_TOPOLOGIES))
    tier = s.add_mutually_exclusive_group()
    tier.add_argument("--full", action="store_true",
                      help="also the debug build, a short soak, the peer tests, the ppc64le "
                           "compile and POWER stages; writes results/test-full/HASH.json")
    tier.add_argument("--unit-only", action="store_true",
                      help="only the lab's tests that need no kernel tree, and lint")
    add_arch(s, help="ppc64le: the POWER stages alone (qemu pseries: topology boots, "
                     "KUnit on SMT8 and SMT4 guests, kunit.py for powerpc)")


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
    command(sub, "setup", cmd_setup, "install missing Debian packages and the venv",
            "./schedlab setup                           # as root: apt-get install, work/venv")
    add_tree_opts(command(sub, "fetch", cmd_fetch, "prepare the base tree", """
./schedlab fetch                           # Debian's linux-source-7.3 into work/trees
./schedlab fetch --kernel ~/tip --base v7.3"""))
    command(sub, "presets", cmd_presets, "list the topology presets",
            "./schedlab presets")
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
    add_run(sub)
    add_hw(sub)
    return p


def check_online(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--online K fits the topology (checked before any work, like the names)."""
    online = getattr(args, "online", None)
    topo = getattr(args, "topology", None) or getattr(args, "default_topologies", None)
    if online is None or topo is None:
        return
    for name in topo if isinstance(topo, list) else [topo]:
        cpus = topomod.parse_topology(name).cpus
        if online > cpus:
            parser.error(f"--online {online}: topology {name} has {cpus} CPUs")


def _terminate(signum, frame):  # noqa: ARG001
    raise SystemExit(128 + signum)


def main(argv: Optional[List[str]] = None) -> int:
    # Ctrl-C and SIGTERM unwind through the finally blocks that stop VMs,
    # even where the parent started us with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)
    parser = make_parser()
    args = parser.parse_args(argv)
    check_online(parser, args)
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
