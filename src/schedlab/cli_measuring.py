"""The measuring commands: 'measure', 'reparse', 'compare', 'ab', 'lines-proof'
(measuring/)."""

from __future__ import annotations

import argparse
from pathlib import Path

from schedlab.cliargs import (VARIANTS, Sub, add_online, add_plan_opts, add_tree_opts, command,
                              knob_arg, label_arg, plan_request, positive_int, result_set_arg,
                              topic_arg, tree_spec)
from schedlab.core.util import LabError, say
from schedlab.measuring import ab as abmod
from schedlab.measuring import compare as comparemod
from schedlab.measuring import costmodel, costtable
from schedlab.measuring import linecount, lineproof
from schedlab.measuring import measure as measuremod
from schedlab.measuring import results as resmod
from schedlab.measuring.plan import KNOB_DIR


def _lines_checked(args: argparse.Namespace, host: bool = False) -> None:
    if "lines" in (args.probe or "").split(","):
        linecount.check_request(args.topology, host)


def cmd_measure(args: argparse.Namespace) -> int:
    _lines_checked(args, args.host)
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
                "or folder) again (after a parser change; boots pooled again)", """
./schedlab reparse ab-smt4-patched
./schedlab reparse work/results/ab-smt4-patched   # a folder""")
    s.add_argument("label", type=result_set_arg)


def cmd_compare(args: argparse.Namespace) -> int:
    if not args.model and (args.other_llc or args.model_func):
        raise LabError("compare: --other-llc and --func are for the cost model; give --model too")
    extra = [o for o, on in (("--each", args.each), ("--plots", args.plots)) if on]
    if args.model and extra:
        raise LabError(f"compare: --model prints the cost model's tables alone; "
                       f"drop {' and '.join(extra)}")
    if args.model_func is not None and not args.model_func.strip():
        raise LabError("compare: --func needs a function's name")
    a_dir, b_dir = resmod.find(args.a), resmod.find(args.b)
    if args.model:
        say(costtable.model_table(a_dir, b_dir, args.model_func or costmodel.FUNC, args.markdown,
                                  args.other_llc))
        return 0
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
./schedlab compare base patched --only 'should_we_balance' --each
./schedlab compare lines-pp-swb-smt8-base lines-pp-swb-smt8-swb --model
./schedlab compare lines-lbstats-smt8-off lines-lbstats-smt8-on --model --func update_sd_lb_stats""")
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
    pick.add_argument("--model", action="store_true",
                      help="the cost model instead of the metrics: a function's lines moved "
                      "per call by distance and instructions, per workload and level, and "
                      "the ns per call each CPU family's published core-to-core latencies "
                      "predict (sets of a --probe lines run)")
    s.add_argument("--func", dest="model_func", metavar="FUNC",
                   help=f"with --model: the function (default {costmodel.FUNC})")
    s.add_argument("--other-llc", action="store_true",
                   help="with --model: price lines to another core of the LLC at the "
                   "family's figure for another LLC of the socket, as if every other core "
                   "of the guest's node sat in an LLC of its own")


def cmd_ab(args: argparse.Namespace) -> int:
    _lines_checked(args)
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


def cmd_lines_proof(args: argparse.Namespace) -> int:
    out = resmod.results_dir(args.label) if args.label else lineproof.default_out()
    return lineproof.run(lineproof.ProofRequest(tree_spec(args), tuple(args.topology or
                                                lineproof.TOPOLOGIES), args.rounds, out))


def add_lines_proof(sub: Sub) -> None:
    s = command(sub, "lines-proof", cmd_lines_proof, "prove the lines probe's plugin: guest "
                "programs whose cache-line traffic is known (a ping-pong at each distance, "
                "own lines, false sharing, padded counters, atomics), each count checked; "
                "then the kernel's check: CPU 0 calls idle_cpu() of a CPU that switches "
                "tasks (at each distance), of a spinning CPU (reported, not checked) and of "
                "itself, 20 calls each, through the measurement series' sched/lab_idle_cpu. "
                "Builds the base kernel with the icount config and the measurement series "
                "if it is not built (minutes from ccache), then boots each topology under "
                "single-thread TCG with the plugin (3-5 minutes each); proof.json is "
                "rewritten, the plugin's raw records go to $SCHEDLAB_WORK/lines-proof/TIME/", """
./schedlab lines-proof                          # smt4-numa and 2x2x2, 1000 rounds
./schedlab lines-proof -t smt8 --rounds 200
./schedlab lines-proof --label results/lines-proof   # the record kept in the checkout""")
    add_tree_opts(s)
    g = s.add_argument_group("proof")
    g.add_argument("--topology", "-t", action="append", metavar="TOPOLOGY",
                   help="preset or SxCxT[:numa], at most 64 CPUs (repeatable; default "
                        + " and ".join(lineproof.TOPOLOGIES) + ": every distance)")
    g.add_argument("--rounds", type=int, default=1000, metavar="N",
                   help="round trips of each program (default 1000; at least 10)")
    g.add_argument("--label", type=label_arg, help="where proof.json goes (default "
                   "work/results/lines-proof; --label results/NAME keeps it in the checkout)")
