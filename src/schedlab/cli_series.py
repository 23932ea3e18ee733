"""The series' commands: 'series', 'kunit', 'selftest', 'soak', 'peer-tests'
(series/)."""

from __future__ import annotations

import argparse

from schedlab.cliargs import (VARIANTS, Sub, add_build_opts, add_matrix_opts, add_online,
                              add_topic_opts, add_topology, add_tree_opts, add_vm_opts, break_arg,
                              build_spec, command, debug_command, positive_int, tree_spec,
                              vm_options)
from schedlab.core import targets
from schedlab.core.spec import BuildSpec
from schedlab.core.util import LabError, say
from schedlab.series import breaks as breaksmod
from schedlab.series import kselftest, kunit, kunit_tool
from schedlab.series import peer_tests as peermod
from schedlab.series import series_cmd
from schedlab.series import soak as soakmod
from schedlab.series import topics
from schedlab.series.topics import built


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


def cmd_kunit(args: argparse.Namespace) -> int:
    if args.breaks is not None:
        others = [flag for flag, given in (
            ("--arch", args.arch), ("--topology", args.topology != kunit.DEFAULT_TOPOLOGY),
            ("--online", args.online is not None), ("--filter", args.filter),
            ("--reference", args.reference), ("--kunit-py", args.kunit_py),
            ("--scale", args.scale)) if given]
        if others:
            raise LabError(f"--breaks boots each break's own tests on {kunit.DEFAULT_TOPOLOGY} "
                           f"(x86_64): not with {', '.join(others)}")
    if args.scale:
        others = [flag for flag, given in (
            ("--topology", args.topology != kunit.DEFAULT_TOPOLOGY),
            ("--online", args.online is not None), ("--filter", args.filter),
            ("--kunit-py", args.kunit_py), (f"--config {args.config}", args.config != "lab"),
            ("--variant base", args.variant == "base")) if given]
        if others:
            raise LabError(f"--scale boots its own guest ({kunit.SCALE_TOPOLOGY.cpus} possible "
                           f"CPUs, {kunit.SCALE_PRESENT} present) with the lab config's "
                           f"kernel of the series, and runs only {kunit.SCALE_CASE}: not "
                           f"with {', '.join(others)}")
        why = kunit.scale_refusal(args.arch)
        if why:
            raise LabError(why)
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
    if args.scale:
        return 0 if kunit.run_scale(tree.path, result.image, args.timeout, args.arch,
                                    reference=reference) else 1
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
./schedlab kunit --breaks scan-asks-twice  # one break
./schedlab kunit --arch ppc64le --scale --reference
                                           # the probe table on 192, 768 and 1920 CPUs""")
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
    g.add_argument("--scale", action="store_true",
                   help="the probe table on 192, 768 and 1920 CPUs and how it grows "
                        "(sched_fair_lb.swb_probe_counts_at_scale); needs --arch ppc64le: a "
                        "pseries guest with 1920 possible CPUs, 8 present; with --reference "
                        "fails where the series probes more than v7.3")
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
