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
import platform
import signal
from pathlib import Path
from typing import List, Optional

from schedlab import pipeline, testcmd
from schedlab.cli_kit import add_hw
from schedlab.cli_measuring import (add_ab, add_compare, add_lines_proof, add_measure,
                                    add_reparse)
from schedlab.cli_series import add_kunit, add_peer_tests, add_selftest, add_series, add_soak
from schedlab.cliargs import (Sub, add_arch, add_build_opts, add_topology, add_tree_opts,
                              add_vm_opts, build_spec, command, tree_spec, vm_options)
from schedlab.core import deps, guests, hostbuild, targets
from schedlab.core import topology as topomod
from schedlab.core.util import LabError, eprint, say, set_repo
from schedlab.kit import distro, install
from schedlab.series import patchset, topics
from schedlab.series.topics import built

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


def cmd_build(args: argparse.Namespace) -> int:
    spec = build_spec(args)
    installer = None
    if args.install or args.make_default:
        if not args.host_config or not args.install or args.configure_only or args.no_deb:
            raise LabError("build --install goes with --host-config (not --configure-only or "
                           "--no-deb: it installs the distribution's packages); "
                           "--make-default with --install")
        installer = install.Installer(distro.here())
        why = installer.refusal()
        if why:
            raise LabError(f"build --install: {why}")
    tree = tree_spec(args).resolve()
    if args.host_config:
        # An installable kernel for this machine: with the measurement series
        # and, with the whole series, the kit's switches (kit/hw.py); the
        # stock kernel (base) is the tree as it is.
        variant = spec.variant
        kit = variant == "patched" and bool(patchset.read_series(patchset.kit_dir()))
        commit = patchset.ensure_variant(tree, variant, variant != "base",
                                         topics.variant_series(variant), kit)
        made = hostbuild.build_host(tree, variant, commit,
                                    hostbuild.host_config_source(args.host_config),
                                    localmodconfig=args.localmodconfig,
                                    package=False if args.no_deb else None,
                                    configure_only=args.configure_only,
                                    pkg_target=installer.d.kernel_target if installer else None)
        if installer is not None:
            once = installer.install(made.files, made.release, args.make_default)
            say(f"  boot it once: {once}"
                + (f"\n  {distro.POWER_BOOT}" if platform.machine() == "ppc64le" else ""))
        return 0
    built(tree, spec)
    return 0


def add_build(sub: Sub) -> None:
    s = command(sub, "build", cmd_build, "build a kernel", """
./schedlab build --variant base            # the lab config, without the series
./schedlab build --config probe --measure  # what measure boots
./schedlab build --host-config --kernel ~/tip   # an installable kernel for this machine
./schedlab build --host-config --install --kernel ~/tip   # installed, the default entry kept""")
    add_tree_opts(s)
    add_build_opts(s)
    g = s.add_argument_group("a kernel for this machine")
    g.add_argument("--host-config", nargs="?", const="running", metavar="FILE",
                   help="an installable kernel for this machine from its own config "
                        "(default /proc/config.gz, else /boot/config-$(uname -r)), "
                        "LOCALVERSION -schedlab-VARIANT-SOURCES, measurement series applied "
                        "(and, "
                        "for the whole series, the hardware kit's switches)")
    g.add_argument("--localmodconfig", action="store_true",
                   help="with --host-config: only the modules loaded now (faster)")
    g.add_argument("--no-deb", action="store_true",
                   help="with --host-config: plain build instead of bindeb-pkg or "
                        "binrpm-pkg")
    g.add_argument("--configure-only", action="store_true",
                   help="with --host-config: write the .config and stop")
    g.add_argument("--install", action="store_true",
                   help="with --host-config, as root: install the kernel and its headers "
                        "(dpkg -i, rpm -ivh), keep the default boot entry as it was, and "
                        "print the command that boots the new kernel once. Checked before "
                        "the build: root, the packaging and boot tools, GRUB_DEFAULT=saved, "
                        "a default entry that names its kernel")
    g.add_argument("--make-default", action="store_true",
                   help="with --install: make the new kernel the default boot entry")


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
    add_lines_proof(sub)
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
