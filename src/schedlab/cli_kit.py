"""The kit's command: 'hw' (kit/)."""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

from schedlab.cliargs import (Sub, add_arch, add_topology, add_tree_opts, command, positive_int,
                              tree_spec)
from schedlab.core.util import LabError, log_dir, run, say
from schedlab.kit import arms as armmod
from schedlab.kit import benchmarks as benchmod
from schedlab.kit import distro, hw, kitproof, machine, rehearsal, rounds


def kit_setup(install: bool = True) -> int:
    """`hw --setup`: this distribution's plan, printed, then its packages
    installed (as root)."""
    d = distro.here()
    say(distro.setup_text(d, platform.machine()))
    if not install:
        return 0
    if os.geteuid() != 0:
        raise LabError("hw --setup installs packages: run it as root (sudo)")
    log = log_dir() / "hw-setup.log"
    if run(d.install_command(), log=log, check=False).returncode != 0:
        raise LabError(f"hw --setup: the install failed (log: {log}); the command is above")
    say(f"hw --setup: installed (log: {log})")
    try:
        built = benchmod.fetch_and_build(benchmod.SCHBENCH)
        say(f"hw --setup: schbench {built.line()}")
    except LabError as e:
        say(f"hw --setup: no schbench ({e}); the kit runs without it, or takes a local copy "
            "with --bench-dir DIR")
    say("hw --setup: './schedlab hw --check' says what is left")
    return 0


def cmd_hw(args: argparse.Namespace) -> int:
    if args.setup:
        return kit_setup()
    if args.code_only and not args.switch_proof:
        raise LabError("hw --code-only goes with --switch-proof")
    bench = args.bench.split(",") if args.bench is not None else None
    if args.lb_share and args.pass_name:
        raise LabError("hw --lb-share is a pass of its own: without --pass")
    if args.c2c and args.pass_name == hw.THROUGHPUT.name:
        raise LabError("hw --c2c is a probe: the throughput pass has none")
    kinds = tuple(k.labelled(args.label) for k in (
        (hw.SHARE,) if args.lb_share else (hw.PASSES[args.pass_name],) if args.pass_name
        else hw.DEFAULT_PASSES))
    hw.refuse_unknown(args.arm, bench)
    if args.lb_share and (args.c2c or args.switch_proof):
        raise LabError("hw --lb-share is a pass of its own: without "
                       + ("--c2c" if args.c2c else "--switch-proof"))
    if (args.arch or args.smt_modes) and not args.rehearse:
        raise LabError("hw --arch and --smt-modes go with --rehearse (the pseries guest); "
                       "on a machine the kit measures the kernel it runs")
    if args.rehearse:
        if args.label:
            raise LabError("hw --rehearse keeps its runs apart in work/hw-rehearsal*/ and "
                           "labels each SMT mode itself: drop --label")
        if args.fresh:
            raise LabError("hw --rehearse always measures afresh (a new boot each time); "
                           "drop --fresh")
        arms = args.arm or list(rehearsal.SHARE_ARMS if args.lb_share else rehearsal.REHEARSAL_ARMS)
        hw.pick(armmod.KIT_ARMS, arms, bench)   # refused before a build
        modes = rehearsal.smt_modes(args.smt_modes, args.arch or "x86_64", args.topology)
        req = rehearsal.RehearsalRequest(
            args.topology, tuple(arms),
            tuple(bench or rehearsal.BENCH),
            args.seconds or (rehearsal.SHARE_SECONDS if args.lb_share else 3), tree_spec(args),
            rounds=args.rounds or 1, runs=args.runs, c2c=args.c2c, share=args.lb_share,
            seed=args.seed, pass_name=args.pass_name, bench_dir=args.bench_dir,
            arch=args.arch or "x86_64", smt_modes=modes,
            timeout=rehearsal.RehearsalRequest.timeout * (args.rounds or 1) * args.runs
            * max(1, len(modes)))
        return 0 if rehearsal.run(req).ok else 1
    if args.switch_proof:
        given = [o for o, v in (("--rounds", args.rounds), ("--seconds", args.seconds),
                                ("--arm", args.arm), ("--bench", args.bench),
                                ("--runs", args.runs != 1), ("--c2c", args.c2c),
                                ("--seed", args.seed is not None),
                                ("--pass", args.pass_name),
                                ("--max-rounds", args.max_rounds)) if v]
        if given:
            raise LabError(f"hw --switch-proof has its own arms, workloads and runs "
                           f"(kitproof.py); {', '.join(given)} would be ignored: drop it")
        return kitproof.run(tree_spec(args), args.fresh, code_only=args.code_only)
    if args.seed is not None and (args.plan or args.report or args.check):
        raise LabError("hw --seed orders the arms of a run; --plan, --report and --check "
                       "run none")
    least = args.rounds or 5
    kit = hw.KitRun(least, args.max_rounds or max(hw.KitRun.max_rounds, least),
                    args.ci_width, args.runs, args.seconds or hw.KitRun.seconds, args.fresh,
                    tuple(args.arm) if args.arm else None, tuple(bench) if bench else None,
                    ("./schedlab", *sys.argv[1:]), not args.no_plots, args.c2c, kinds,
                    args.seed, not args.no_pin, args.bench_dir, args.label or "")
    kit.check()
    if args.plan:
        found = benchmod.find(benchmod.SCHBENCH, kit.bench_dir, fetch=False, build=False)
        asked = bool(bench) and benchmod.needs_schbench(benchmod.expand(bench or [], hw.ncpu()))
        # Asked for and not here: the run fetches and builds it first.
        binary = found.binary if found else benchmod.pinned_binary(benchmod.SCHBENCH) \
            if asked else None
        say(hw.plan_text(machine.switches_here(machine.DEBUG_SCHED), kit.rounds, kit.runs,
                         kit.seconds, args.arm, bench, kinds, binary))
        return 0
    if args.report:
        return rounds.report_again(not args.no_plots, kinds)
    return rounds.run(args.check, kit)


def add_hw(sub: Sub) -> None:
    p = command(sub, "hw", cmd_hw, "on an SMT machine booted into the series: check what the "
                "kit needs, record the machine, run the arms interleaved (work/results/hw-*)", """
./schedlab hw --setup                      # as root: the kit's packages (apt or dnf), once
./schedlab hw --check                      # as root: the kernel, the config, SMT, the tools; work/hw/
./schedlab hw --plan --rounds 5 --seconds 30   # the arms this kernel can run, the benchmarks, the time
./schedlab hw                              # the throughput pass (nothing attached), then the
                                           # probe pass; work/results/hw-tp/ and hw/report.md
./schedlab hw --pass throughput            # one pass only
./schedlab hw --report                     # the report again from what finished (after Ctrl-C)
# exit status 75: this kernel's arms are done, the other kernel's (stock or kit) wait:
# boot it once and run the same command again
./schedlab hw --lb-share                   # a pass of its own: how much SG_STATS_REUSE's sums
                                           # could serve here (work/results/hw-share/report.md)
./schedlab hw --rehearse -t smt8           # on the lab host: the kit in an SMT8 guest, checked
./schedlab hw --rehearse --arch ppc64le    # the same in the pseries SMT8 guest, SMT modes 8,
                                           # 4 and 2 swept in each boot (--label smtM each)
./schedlab hw --switch-proof               # on the lab host: each swb_state under icount against
                                           # the kernel built at its patch""")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--setup", action="store_true",
                      help="install what the kit needs on this distribution (Debian, Ubuntu, "
                           "Fedora, RHEL; apt or dnf), nothing of the VM lab, and print how to "
                           "build, install and boot the kernels; as root. After it the kit "
                           "runs offline")
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
                           "booted with the kit's kernel (icount build, single-thread TCG; "
                           "with --arch ppc64le the pseries guest, its probe build, the SMT "
                           "modes swept), 3 s runs; checks the reports "
                           "(work/hw-rehearsal[-ppc64le]/)")
    what.add_argument("--switch-proof", action="store_true",
                      help="on the lab's host: should_we_balance()'s instructions per call "
                           "in each swb_state of the kit's kernel against the kernel built "
                           "at its patch, under icount on smt8 (an 'ab' run of ten arms, "
                           "two boots each; resumable); prints the proof "
                           "(work/results/kit-icount-smt8/switch-proof.md)")
    add_topology(p, "smt8")
    add_tree_opts(p)
    add_arch(p, help="with --rehearse: x86_64 (the default) or ppc64le, the pseries guest "
                     "with a Debian ppc64el userspace (docs/power.md)")
    p.add_argument("--smt-modes", metavar="LIST",
                   help="with --rehearse --arch ppc64le: the SMT modes each boot sweeps "
                        "(ppc64_cpu --smt=M, labelled smtM; default the topology's threads "
                        "a core, halved down to 2: 8,4,2 on smt8)")
    p.add_argument("--rounds", type=positive_int, default=None,
                   help=f"rounds of all arms, each arm once a round (default 5, at least "
                        f"{armmod.MIN_ROUNDS}; 1 with --rehearse)")
    p.add_argument("--max-rounds", type=positive_int, default=None, metavar="N",
                   help=f"the most rounds: after --rounds, a round more while a headline "
                        f"metric's 95%% interval is wider than --ci-width (default "
                        f"{hw.KitRun.max_rounds})")
    p.add_argument("--ci-width", type=float, default=hw.KitRun.width, metavar="PCT",
                   help="the widest 95%% interval of a headline metric's mean, in percent of "
                        "the mean, before the rounds stop (default %(default)s)")
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help="the seed that shuffles the arms' order every round (default: a new "
                        "one, or the one of the run this resumes; the report names it)")
    p.add_argument("--runs", type=positive_int, default=1, help="runs per arm and round")
    p.add_argument("--seconds", type=positive_int, default=None,
                   help="duration of each run: every benchmark runs for a fixed time, the "
                        "fixed-work ones started again until it has passed (default "
                        f"{hw.KitRun.seconds}; 3 with --rehearse, 10 with --rehearse "
                        "--lb-share)")
    p.add_argument("--arm", action="append", metavar="NAME",
                   help="only these arms (repeatable; the first given is the reference): "
                        + ", ".join(a.name for a in armmod.KIT_ARMS))
    p.add_argument("--bench", metavar="LIST",
                   help="only these benchmarks (comma-separated): a sweep ("
                        + ", ".join(benchmod.FAMILIES) + "), one of its points as --plan "
                        "lists them (hackbench-thread-pipe-g8, tbench-c64, schbench-m2-t16) "
                        "or a workload of the lab; default: the pass's own ("
                        + ", ".join(benchmod.THROUGHPUT) + " for throughput, "
                        + ", ".join(benchmod.PROBES) + " for probes)")
    p.add_argument("--bench-dir", type=Path, metavar="DIR",
                   help="schbench (no distribution packages it) from DIR: the binary itself, "
                        "a folder holding it, or its sources (a Makefile), built in a copy "
                        "under work/bench/; by default --setup fetches and builds it at the "
                        "kit's commit")
    p.add_argument("--label", metavar="NAME",
                   help="keeps this run's passes apart from others (work/results/hw-tp@NAME/, "
                        "in the reports' titles): an SMT mode, cache aware scheduling on "
                        "or off, set again after every boot; the same label resumes and "
                        "reports them")
    p.add_argument("--fresh", action="store_true",
                   help="measure every round again; a rerun otherwise goes on from the "
                        "first round not finished")
    p.add_argument("--pass", dest="pass_name", choices=[k.name for k in hw.DEFAULT_PASSES],
                   help="only this pass (default: both, throughput first): throughput runs "
                        "the benchmarks with nothing attached and checks that nothing is, "
                        "probes runs them with the probes (work/results/hw-tp/, "
                        "work/results/hw/)")
    p.add_argument("--c2c", action="store_true",
                   help="also perf c2c in every run of the probe pass (modified-line loads, "
                        "where the CPU samples loads); its sampling changes what the other "
                        "probes measure, so best with --pass probes as a run of its own")
    p.add_argument("--lb-share", action="store_true",
                   help="the lb-share pass instead of the benchmarks': every busy balance "
                        "above the lowest level replayed under SG_STATS_REUSE's rule, how "
                        "much of their reads the sums could serve with this machine's "
                        "phases (arms series and lbstats, " + ", ".join(hw.SHARE.bench)
                        + " by default; work/results/hw-share/; with --plan, --report, "
                        "--rehearse)")
    p.add_argument("--no-pin", action="store_true",
                   help="leave the CPU frequency governor as it is (by default every CPU's "
                        "is set to performance for the runs and put back after; the report "
                        "records which)")
    p.add_argument("--no-plots", action="store_true",
                   help="tables only (matplotlib is slow in a TCG guest: the rehearsal "
                        "makes the plots on the host with --report)")
    p.add_argument("--code-only", action="store_true",
                   help="with --switch-proof: the builds and the code comparison, no boot")
