"""The command line's option groups and argument types.

Every name a command takes (topology presets, arches, probes, workloads,
knobs, labels, configs, variants) is checked here, where argparse reads it:
a bad one stops the command with usage status 2 before any fetch, build or
boot.  The option groups turn into the typed requests of spec.py.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any, Callable, List, Optional

from schedlab.core import build as buildmod
from schedlab.core import targets
from schedlab.core import topology as topomod
from schedlab.core import vm
from schedlab.core.spec import BuildSpec, TreeSpec, VmOptions
from schedlab.core.util import LabError
from schedlab.measuring import plan as planmod
from schedlab.measuring import probes as probemod
from schedlab.measuring import results as resmod
from schedlab.measuring import workloads as workmod
from schedlab.series import matrix_cells
from schedlab.series.breaks import BREAKS
from schedlab.series.topics import VARIANT_PREFIX, read_topics, variant_names

Sub = Any   # argparse's subparsers action (a private type)
VARIANTS = ("base", "patched")
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*(/[A-Za-z0-9][A-Za-z0-9_.+-]*)*")


def _checked(what: str, check: Callable[[str], Any]) -> Callable[[str], str]:
    """An argparse type: the text as given, once CHECK accepts it (a LabError
    becomes argparse's usage error, status 2)."""
    def parse(text: str) -> str:
        try:
            check(text)
        except LabError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text
    parse.__name__ = what        # argparse names the type in its messages
    return parse


def _workloads(text: str) -> None:
    for name in text.split(","):
        if name != workmod.SCHBENCH:     # needs --schbench PATH: checked with the plan
            workmod.workload(name)


def _label(text: str) -> None:
    if not _LABEL.fullmatch(text) or ".." in text.split("/"):
        raise LabError(f"label {text!r}: letters, digits and _.+- (folders split by /), "
                       "e.g. ab-smt4 or scratch/try1")


def _result_set(text: str) -> None:
    if not resmod.find(text).is_dir():
        raise LabError(f"no result set {text!r} (neither a folder nor a label with "
                       f"results in {resmod.results_dir(text)})")


def _positive(text: str) -> None:
    if not text.isdigit() or int(text) < 1:
        raise LabError(f"{text!r}: a whole number, 1 or more")


topology_arg = _checked("topology", topomod.parse_topology)
probes_arg = _checked("probes", probemod.probe_names)
workloads_arg = _checked("workloads", _workloads)
knob_arg = _checked("knob", lambda t: planmod.parse_knobs([t]))
label_arg = _checked("label", _label)
result_set_arg = _checked("result set", _result_set)


_cells_text = _checked("cells", matrix_cells.parse_cells)


def cells_arg(text: str) -> List[str]:
    """--cells A,B: names of the config matrix's cells (matrix_cells.CELLS), as a list."""
    return matrix_cells.parse_cells(_cells_text(text))


def positive_int(text: str) -> int:
    return int(_checked("count", _positive)(text))


# ------------------------------------------------------------------ option groups

def add_matrix_opts(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("series matrix")
    g.add_argument("--full", action="store_true",
                   help="every cell, the bisection of the series and the sparse diff "
                        "(default: the default tier's cells)")
    g.add_argument("--cells", type=cells_arg, metavar="A,B",
                   help="only these cells, comma-separated (docs/matrix.md; an unknown "
                        "name is refused with the list); --full still adds the bisection "
                        "and sparse")


def break_arg(text: str) -> str:
    """A deliberate break of breaks.BREAKS, refused at parse time otherwise."""
    names = [b.name for b in BREAKS]
    if text not in names:
        raise argparse.ArgumentTypeError(f"unknown break {text!r}; known: {', '.join(names)}")
    return text


def topic_arg(text: str) -> str:
    """A topic of patches/topics, refused at parse time otherwise."""
    names = [t.name for t in read_topics()]
    if text not in names:
        raise argparse.ArgumentTypeError(f"unknown topic {text!r}; known: {', '.join(names)}")
    return text


def topic_step_arg(text: str) -> str:
    """A topic, or NAME@K: that topic's first K patches (a build variant)."""
    name, at, _ = text.partition("@")
    topic_arg(name)
    if at and VARIANT_PREFIX + text not in variant_names():
        raise argparse.ArgumentTypeError(
            f"{text!r}: not a patch of topic {name} before its last (NAME@K, K from 1; "
            f"NAME alone is the whole topic)")
    return text


def add_topic_opts(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("series topics, mail")
    g.add_argument("--topic", type=topic_arg, metavar="NAME",
                   help="mail: the topic of patches/topics to write")
    g.add_argument("--out", type=Path, metavar="DIR",
                   help="mail: an empty folder for the patches and the cover letter")
    g.add_argument("--from", dest="sender", metavar='"NAME <ADDRESS>"',
                   help="mail: the sender, author of every patch and its last Signed-off-by "
                        "(default: git config user.name/user.email of the checkout)")


def add_tree_opts(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("kernel tree")
    g.add_argument("--kernel", metavar="DIR",
                   help="your own kernel git tree (e.g. tip/sched/core); default: "
                        "$KERNEL_SRC, else Debian's linux-source-7.3")
    g.add_argument("--base", metavar="REV",
                   help="with --kernel: the base commit (default HEAD of that tree)")


def tree_spec(args: argparse.Namespace) -> TreeSpec:
    return TreeSpec(args.kernel, args.base)


def add_arch(g: Any, help: str = "target architecture (default x86_64)",
             commands: bool = False) -> None:
    """--arch: every target, or (commands) those whose guest runs commands and plans."""
    names = [n for n, t in targets.TARGETS.items() if t.runs_commands or not commands]
    g.add_argument("--arch", default=None, choices=sorted(names), help=help)


def add_build_opts(p: argparse.ArgumentParser, measure: bool = True,
                   commands: bool = False) -> None:
    g = p.add_argument_group("build")
    g.add_argument("--variant", default=None, choices=VARIANTS,
                   help="base, or patched (the whole series and the lab's checks of "
                        "its RFC topics, patches/lab/; the default)")
    g.add_argument("--topic", type=topic_step_arg, metavar="NAME[@K]",
                   help="instead of a variant: the base plus the KUnit series and topic "
                        "NAME of patches/topics, as it is mailed (kunit: the KUnit series "
                        "alone, its tests on the base's code); NAME@K: only the topic's "
                        "first K patches")
    g.add_argument("--config", default="lab", choices=sorted(buildmod.CONFIGS))
    add_arch(g, commands=commands)
    if measure:
        g.add_argument("--measure", action="store_true",
                       help="also apply the measurement series (patches/measure/)")
        g.add_argument("--kit", action="store_true",
                       help="also the measurement series and the hardware kit's switches "
                            "(patches/kit/; the whole series only)")
    g.add_argument("--no-build", action="store_true",
                   help="boot what is already built, without an incremental build")


def build_variant(args: argparse.Namespace) -> str:
    """--variant or --topic (not both): the name of the build variant."""
    topic = getattr(args, "topic", None)
    if topic and args.variant:
        raise LabError(f"--variant {args.variant} and --topic {topic}: give one")
    if topic:
        return VARIANT_PREFIX + topic
    return args.variant or "patched"


def build_spec(args: argparse.Namespace) -> BuildSpec:
    kit = getattr(args, "kit", False)
    return BuildSpec(build_variant(args), args.config, args.arch,
                     getattr(args, "measure", False) or kit, getattr(args, "no_build", False),
                     kit)


def add_online(g: Any, help: str = "bring up only K CPUs (kernel maxcpus=K)") -> None:
    g.add_argument("--online", type=positive_int, metavar="K", help=help)


def add_vm_opts(p: argparse.ArgumentParser, check: bool = True) -> None:
    g = p.add_argument_group("VM")
    add_online(g, "bring up only K CPUs (kernel maxcpus=K); nr_cpu_ids stays N")
    g.add_argument("--memory", type=positive_int, default=2048, metavar="MIB")
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


def add_topology(p: Any, default: Optional[str] = "smt4", many: bool = False,
                 help: str = "preset or SxCxT[:numa] (./schedlab presets)") -> None:
    if many:
        p.add_argument("--topology", "-t", action="append", default=None, type=topology_arg,
                       help=help + "; repeatable")
    else:
        p.add_argument("--topology", "-t", default=default, type=topology_arg, help=help)


def add_plan_opts(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("measurement plan")
    add_topology(g)
    g.add_argument("--plan", type=workloads_arg,
                   help="comma-separated workloads (default " + ",".join(workmod.DEFAULT_PLAN)
                   + "): " + ", ".join(workmod.WORKLOADS) + ", schbench")
    g.add_argument("--probe", type=probes_arg, help="comma-separated probes (default "
                   + ",".join(probemod.DEFAULT_PROBES) + "): " + ", ".join(probemod.PROBES)
                   + f"; {probemod.NO_PROBES}: nothing attached, the runner checking that "
                   "nothing is (a clean run)")
    g.add_argument("--attach", default="auto", choices=probemod.ATTACH_METHODS,
                   help="bpftrace attach method (auto: kfunc with BTF, else kprobe)")
    g.add_argument("--latency-tool", default="auto", choices=probemod.LATENCY_TOOLS,
                   help="funclatency tool (auto: bcc, else libbpf-tools, else bpftrace)")
    g.add_argument("--schbench", type=Path, metavar="PATH",
                   help="your schbench binary (for the schbench workload)")
    g.add_argument("--runs", type=positive_int, default=3)
    g.add_argument("--seconds", type=positive_int, default=10,
                   help="duration of timed workloads")
    add_arch(g, "target architecture (default x86_64; those whose guest runs the plan)",
             commands=True)
    g.add_argument("--accel", default="auto", choices=vm.ACCELS,
                   help="icount: one host thread, the guest clock counting instructions "
                        "(for the *-cost, insns and lines probes); default KVM where it works, "
                        "else TCG")


def plan_request(args: argparse.Namespace, knobs: Optional[List[str]] = None) -> planmod.Plan:
    return planmod.make_plan(args.plan, args.probe, schbench=args.schbench, runs=args.runs,
                             seconds=args.seconds, attach=args.attach,
                             latency_tool=args.latency_tool,
                             knobs=planmod.parse_knobs(knobs), accel=args.accel)


def debug_command(sub: Sub, name: str, fn: Callable[[argparse.Namespace], int],
                  text: str, examples: str) -> argparse._ArgumentGroup:
    """A command that boots the debug kernel: tree options, and --no-build in
    its own group, which the caller fills."""
    s = command(sub, name, fn, text, examples)
    add_tree_opts(s)
    g = s.add_argument_group(name.replace("-", " "))
    g.add_argument("--no-build", action="store_true",
                   help="boot the debug kernel already built, without an incremental build")
    return g


def command(sub: Sub, name: str, func: Callable[[argparse.Namespace], int], help: str,
            examples: str = "", **kw) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with a few example lines (as bcc's tools do)."""
    epilog = "examples:\n" + "\n".join("  " + ln for ln in examples.strip().splitlines()) \
        if examples.strip() else None
    p = sub.add_parser(name, help=help, description=help, epilog=epilog,
                       formatter_class=argparse.RawDescriptionHelpFormatter, **kw)
    p.set_defaults(func=func)
    return p
