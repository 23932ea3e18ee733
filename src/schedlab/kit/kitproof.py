"""The kit's switches against the kernels built at each patch, twice over.

Detail: docs/modules.md, section kit/kitproof.py.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from schedlab.core import build as buildmod
from schedlab.core.spec import TreeSpec
from schedlab.core.util import LabError
from schedlab.core.util import run as run_command
from schedlab.core.util import say
from schedlab.measuring import ab as abmod
from schedlab.measuring import icount
from schedlab.measuring import plan as planmod
from schedlab.measuring import results as resmod
from schedlab.measuring.measure import probe_build
from schedlab.series import topics as topicmod
from schedlab.series.topics import built

TOPIC = "swb"
STATE_NAMES = ("v7.3", "busy", "one-cpu", "one-core", "prune")
PREFIX = "kit-icount-smt8"
TOPOLOGY = "smt8"
# stress-50 leaves CPUs idle: the idle and newly idle balances' paths too.
WORKLOADS, PROBES, RUNS, SECONDS, ACCEL, BOOTS = "stress-100,stress-50", "swb-cost-idle", 2, 5, \
    "icount", 2
MEDIAN = "should_we_balance instructions per call, median ("
MEAN = "should_we_balance instructions per call, mean ("
SWB_COPY = "should_we_balance_s"


# ------------------------------------------------------------------ the code

_TARGET = re.compile(r"\b[0-9a-f]{8,16} <([^>+]+)(\+0x[0-9a-f]+)?>")
_COMMENT = re.compile(r"#\s*[0-9a-f]+ <([^>]+)>")
_RIP = re.compile(r"-?0x[0-9a-f]+\(%rip\)")
# A hex literal (a displacement, an immediate, an address), never part of a
# register, a mnemonic or a branch's label.
_NUMBER = re.compile(r"(?<![\w%])-?0x[0-9a-f]+")


def disassembly(vmlinux: Path, function: str) -> List[Tuple[int, str]]:
    """(address, instruction) of FUNCTION in VMLINUX, [] if absent: objdump
    of that symbol alone, read as the icount calibration reads it."""
    out = run_command(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={function}",
                       str(vmlinux)], capture=True, check=False).stdout
    return [(a, re.sub(r"\s+", " ", f"{op} {arg}").strip())
            for a, op, arg in icount.parse_objdump(out)]


def normalised(insns: Sequence[Tuple[int, str]], function: str) -> List[str]:
    """FUNCTION's instructions with what the build's layout decides taken out:
    a branch within the function names the instruction it goes to (by
    index), a call or jump elsewhere names its symbol, a rip-relative operand
    and objdump's address comments lose their address.  A leading endbr64
    (the kit's copies have their address taken) is left out."""
    body = list(insns)
    if body and body[0][1] == "endbr64":
        body = body[1:]
    index = {a: i for i, (a, _) in enumerate(body)}
    out = []
    for _, text in body:
        def target(m: "re.Match[str]") -> str:
            if m.group(1) == function:
                addr = int(m.group(0).split()[0], 16)
                return f"<L{index.get(addr, '?')}>"
            return f"<{m.group(1)}{m.group(2) or ''}>"
        text = _COMMENT.sub(lambda m: f"# <{m.group(1)}>", text)
        text = _TARGET.sub(target, text)
        out.append(_RIP.sub("REL(%rip)", text))
    return out


@dataclass
class CodeCheck:
    state: str
    insns: int                  # in the copy, without a leading endbr64
    same: int                   # instructions the same once normalised
    layout: List[Tuple[str, str]]   # the same but for a number (a field offset)
    other: List[Tuple[str, str]]    # anything else: the proof fails

    @property
    def ok(self) -> bool:
        return not self.other and self.insns > 0


def compare_code(built_at: Sequence[str], copy: Sequence[str], state: str) -> CodeCheck:
    layout, other = [], []
    for a, b in itertools.zip_longest(built_at, copy, fillvalue=""):
        if a == b:
            continue
        if a and b and _NUMBER.sub("N", a) == _NUMBER.sub("N", b):
            layout.append((a, b))
        else:
            other.append((a, b))
    same = sum(1 for a, b in zip(built_at, copy) if a == b)
    return CodeCheck(state, len(copy), same, layout, other)


def wrapper_constant(kit_vmlinux: Path) -> Tuple[Optional[int], str]:
    """The instructions the switch adds to a call, from the kit's vmlinux: the
    wrapper's after its fentry call (its jump to the state's copy, which the
    inline static call makes direct), the copy's endbr64 if it has one, and
    the copy's fentry call site, a nop at run time.  The probe attaches at
    the wrapper's fentry, as at the function's own in the kernel built at
    the patch: that one is in both windows alike."""
    wrapper = disassembly(kit_vmlinux, "should_we_balance")
    copy = disassembly(kit_vmlinux, f"{SWB_COPY}0")
    if not wrapper or not copy:
        return None, "no should_we_balance() wrapper or copy in the kit's vmlinux"
    after = [t for _, t in wrapper if "__fentry__" not in t]
    endbr = 1 if copy[0][1] == "endbr64" else 0
    fentry = 1 if any("__fentry__" in t for _, t in copy[:2]) else 0
    n = len(after) + endbr + fentry
    return n, (f"the wrapper's {len(after)} ({'; '.join(after)}), the copy's "
               + ("endbr64 and " if endbr else "") + ("fentry nop" if fentry else "nothing"))


def arms() -> List[abmod.Arm]:
    """At each state: the kernel built at its patch (at-NAME), then the kit's
    kernel in that state (kit-NAME)."""
    steps = ["base"] + topicmod.steps(TOPIC)
    if len(steps) != len(STATE_NAMES):
        raise LabError(f"kit proof: the {TOPIC} topic has {len(steps) - 1} patches; the "
                       f"kit switches between {len(STATE_NAMES) - 1}")
    built_at = [abmod.Arm(f"at-{n}", v) for n, v in zip(STATE_NAMES, steps)]
    kit = [abmod.Arm(f"kit-{n}", abmod.KIT_VARIANT, (("swb_state", str(k)),))
           for k, n in enumerate(STATE_NAMES)]
    return built_at + kit


def request(tree: TreeSpec, prefix: str = PREFIX, fresh: bool = False) -> abmod.AbRequest:
    plan = planmod.make_plan(WORKLOADS, PROBES, runs=RUNS, seconds=SECONDS, accel=ACCEL)
    return abmod.AbRequest(tree, plan, TOPOLOGY, tuple(arms()), prefix, BOOTS, fresh,
                           timeout=2400, plots=False)


def command(prefix: str = PREFIX) -> str:
    """The same run as one `ab` command line (for the docs)."""
    parts = ["./schedlab ab"] + [
        f"--arm {a.name}={a.variant}" + "".join(f":{k}={v}" for k, v in a.knobs)
        for a in arms()]
    parts += [f"-t {TOPOLOGY}", f"--accel {ACCEL}", f"--probe {PROBES}", f"--plan {WORKLOADS}",
              f"--runs {RUNS}", f"--seconds {SECONDS}", f"--boots {BOOTS}", f"--label {prefix}"]
    return " \\\n    ".join(parts)


@dataclass
class ProofCell:
    state: str
    key: str                # the workload, level and idle type ('stress-50, MC, busy')
    at: List[float]         # the kernel built at the patch: one median per run
    kit: List[float]        # the kit in that state
    at_means: List[float]
    kit_means: List[float]


@dataclass
class ArmRuns:
    medians: Dict[str, List[float]]
    means: Dict[str, List[float]]
    runs: int               # complete runs
    incomplete: int
    overheads: List[float]  # the calibrated probe overhead of each run


def _arm_runs(folder: Path) -> ArmRuns:
    """Every run of every boot in FOLDER: per workload, level and idle type,
    the median and the mean."""
    out = ArmRuns({}, {}, 0, 0, [])
    boots = sorted(p for p in folder.glob("boot-*") if p.is_dir()) or [folder]
    for b in boots:
        if not any(b.glob("run-*.json")):
            continue
        for r in resmod.read_runs(b):
            if not r.complete:
                out.incomplete += 1
                continue
            out.runs += 1
            if r.calibration and r.calibration.get("overhead") is not None:
                out.overheads.append(float(r.calibration["overhead"]))
            for name, m in r.metrics.items():
                for prefix, into in ((MEDIAN, out.medians), (MEAN, out.means)):
                    if name.startswith(prefix) and name.endswith(")"):
                        # Per workload: which path is the most frequent
                        # follows the load.
                        key = f"{r.workload}, {name[len(prefix):-1]}"
                        into.setdefault(key, []).append(float(m["value"]))
    return out


def expected_runs() -> int:
    """Complete runs per arm."""
    return BOOTS * RUNS * len(WORKLOADS.split(","))


def runs_per_cell() -> int:
    """Runs per arm of one workload: a cell's values at most."""
    return BOOTS * RUNS


def gather(prefix: str = PREFIX) -> Tuple[List[ProofCell], Dict[str, ArmRuns]]:
    cells_out, arms_out = [], {}
    for state in STATE_NAMES:
        at = arms_out[f"at-{state}"] = _arm_runs(resmod.results_dir(f"{prefix}-at-{state}"))
        kit = arms_out[f"kit-{state}"] = _arm_runs(resmod.results_dir(f"{prefix}-kit-{state}"))
        for key in sorted(set(at.medians) | set(kit.medians)):
            cells_out.append(ProofCell(state, key, at.medians.get(key, []),
                                       kit.medians.get(key, []), at.means.get(key, []),
                                       kit.means.get(key, [])))
    return cells_out, arms_out


def check_counts(found: Sequence[ProofCell], arms_found: Dict[str, ArmRuns],
                 constant: int) -> List[str]:
    """The icount half: every run of the arms complete and there; in every
    cell, each median of the kit less CONSTANT within the range of the
    medians of the kernel built at the patch (its boots' spread)."""
    problems = []
    for name, a in arms_found.items():
        if a.incomplete or a.runs != expected_runs():
            problems.append(f"{name}: {a.runs} complete runs of {expected_runs()}"
                            + (f", {a.incomplete} incomplete" if a.incomplete else ""))
        if len(a.overheads) != a.runs:
            problems.append(f"{name}: {a.runs - len(a.overheads)} runs without a calibration")
    for c in found:
        every = runs_per_cell()
        if not c.at or not c.kit:
            # A path a run may or may not take is no problem; one every run
            # of one side took and no run of the other is.
            if len(c.at) == every or len(c.kit) == every:
                problems.append(f"{c.state}, {c.key}: in every run of "
                                + ("the kernel built at the patch" if c.at else "the kit")
                                + ", in none of the other's")
            continue
        lo, hi = min(c.at), max(c.at)
        out = sorted({v - constant for v in c.kit if not lo <= v - constant <= hi})
        if out:
            problems.append(f"{c.state}, {c.key}: the kit's medians less {constant} "
                            f"({', '.join(f'{v:g}' for v in out)}) outside the range of the "
                            f"kernel built at the patch ({_rng(c.at)})")
    return problems


def _rng(vals: Sequence[float], fmt: str = "{:g}") -> str:
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}-{fmt.format(hi)}"


def counts_table(found: Sequence[ProofCell], constant: int) -> str:
    lines = ["| state | workload, level, idle type | built at the patch: median | kit: median "
             f"| kit - {constant} | built at the patch: mean | kit - {constant}: mean |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for x in found:
        lines.append(f"| {x.state} | {x.key} | {_rng(x.at)} | {_rng(x.kit)} | "
                     f"{_rng([v - constant for v in x.kit])} | {_rng(x.at_means, '{:.1f}')} | "
                     f"{_rng([v - constant for v in x.kit_means], '{:.1f}')} |")
    return "\n".join(lines)


def code_table(checks: Sequence[CodeCheck]) -> str:
    lines = ["| state | instructions | identical | differing by a number only | other |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {c.state} | {c.insns} | {c.same} | {len(c.layout)} | {len(c.other)} |"
              for c in checks]
    return "\n".join(lines)


def code_checks(vmlinux: Dict[str, Path]) -> List[CodeCheck]:
    """Each state's copy in the kit's vmlinux (key 'kit') against
    should_we_balance() in the vmlinux built at its patch (key: the state)."""
    out = []
    for k, state in enumerate(STATE_NAMES):
        copy = f"{SWB_COPY}{k}"
        at = normalised(disassembly(vmlinux[state], "should_we_balance"), "should_we_balance")
        kit = normalised(disassembly(vmlinux["kit"], copy), copy)
        out.append(compare_code(at, kit, state))
    return out


def code_report(vmlinux: Dict[str, Path]) -> Tuple[List[str], Optional[int], List[str]]:
    """The code half: its text, the instructions the switch adds, problems."""
    constant, how = wrapper_constant(vmlinux["kit"])
    problems = [] if constant is not None else [how]
    checks = code_checks(vmlinux)
    for c in checks:
        if not c.insns:
            problems.append(f"{c.state}: no {SWB_COPY}N in the kit's vmlinux, or no "
                            "should_we_balance() in the build at the patch")
        for a, b in c.other[:5]:
            problems.append(f"{c.state}: the code differs: {a or '(nothing)'} | "
                            f"{b or '(nothing)'}")
    text = [
        "## The code: each state's copy against should_we_balance() built at its patch", "",
        "objdump of both vmlinux files, normalised (branches within the function by the "
        "index of their target, other targets by symbol, rip-relative operands and "
        "addresses dropped, the copy's leading endbr64 left out):", "",
        code_table(checks), ""]
    for c in checks:
        if c.layout:
            text.append(f"- {c.state}: differing by a number only: " + "; ".join(
                f"`{a}` / `{b}`" for a, b in c.layout))
    text += ["", f"The switch adds {constant} instructions to every call: {how}.", ""]
    return text, constant, problems


def report(vmlinux: Dict[str, Path], prefix: str = PREFIX,
           code_only: bool = False) -> Tuple[str, bool]:
    text, constant, problems = code_report(vmlinux)
    if code_only:
        if not problems:
            text.append("Every state's copy is the code built at its patch, instruction for "
                        "instruction (the icount half: `./schedlab hw --switch-proof`).")
        text += [f"FAIL: {p}" for p in problems]
        return "\n".join(text) + "\n", not problems
    found, arms_found = gather(prefix)
    if not found:
        problems.append("no should_we_balance() instructions per call in the results")
    problems += check_counts(found, arms_found, constant or 0)
    text += ["## Instructions per call under icount", "",
             f"{TOPOLOGY}, {WORKLOADS}, probe {PROBES}; {BOOTS} boots x {RUNS} runs of "
             f"each workload per arm ({expected_runs()} runs); each value the median or mean "
             "of one run; calibrated probe overheads: " + ", ".join(
                 f"{n} {_rng(a.overheads)}" for n, a in arms_found.items()), "",
             counts_table(found, constant or 0), ""]
    if not problems:
        text.append(f"Every state's copy is the code built at its patch, instruction for "
                    f"instruction; under icount every median of the kit less {constant} lies "
                    "within the medians of the kernel built at the patch, in every state, "
                    "for every workload, level and idle type.")
    text += [f"FAIL: {p}" for p in problems]
    return "\n".join(text) + "\n", not problems


def vmlinux_files(tree) -> Dict[str, Path]:
    """The icount builds the proof's arms booted."""
    arch = buildmod.get_arch(None)
    out = {}
    for state, a in zip(STATE_NAMES, arms()):
        spec = probe_build(a.variant, accel=ACCEL)
        out[state] = buildmod.build_dir_for(tree, spec.name, spec.config, arch) / "vmlinux"
    kit = probe_build("patched", accel=ACCEL).with_(kit=True)
    out["kit"] = buildmod.build_dir_for(tree, kit.name, kit.config, arch) / "vmlinux"
    return out


def run(tree_spec: TreeSpec, fresh: bool = False, prefix: str = PREFIX,
        code_only: bool = False) -> int:
    """CODE_ONLY: the builds and the code half, no boot."""
    if code_only:
        tree = tree_spec.resolve()
        for a in arms()[:len(STATE_NAMES) + 1]:
            kit = a.variant == abmod.KIT_VARIANT
            built(tree, probe_build("patched" if kit else a.variant, accel=ACCEL)
                  .with_(kit=kit))
    else:
        rc = abmod.run(request(tree_spec, prefix, fresh))
        if rc:
            return rc
    text, ok = report(vmlinux_files(tree_spec.resolve()), prefix, code_only)
    out = resmod.results_dir(prefix) / ("switch-proof-code.md" if code_only
                                        else "switch-proof.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    say(text + f"(written to {out})")
    return 0 if ok else 1
