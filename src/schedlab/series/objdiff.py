"""fair.o's production code with the series' KUnit option on and off.

The series tip's kernel/sched/fair.o is compiled twice per arch, the lab
config with CONFIG_SCHED_FAIR_LB_KUNIT_TEST on and off (KUNIT=y both times);
objdump -dr of each is split per function and each function of the
option-off object must be in the option-on object with the same code.
Functions only in the option-on object are the tests'.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from schedlab.core import build as buildmod
from schedlab.core.source import Tree
from schedlab.core.util import LabError, log_dir, run, say, work_dir
from schedlab.series.patchset import ensure_variant
from schedlab.series.series_check import KUNIT_OPTION

OBJECT = "kernel/sched/fair.o"

# The two configs differ only by the option: probe.config turns it off.
CONFIGS = {"on": "lab", "off": "probe"}
ARCHES = ("x86_64", "ppc64le")

_HEADER = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
_INSN = re.compile(r"^\s*([0-9a-f]+):\t(.*)$")
# A code address with its symbol ("6d <foo+0x5d>"): the symbol alone.
_TARGET = re.compile(r"\b[0-9a-f]+ (<[^>]+>)")
# "54d: R_X86_64_PC32\t.data+0x50": the type and the target, a section and
# offset resolved to the object's symbol there (Symbols), since the tests'
# data moves the offsets; where no symbol covers it (string merges) the
# section alone.
_RELOC = re.compile(r"\t[0-9a-f]+: (R_\S+)\t(\S+?)([+-]0x[0-9a-f]+)?$")
# objdump -t: "0000000000000050 l     O .data\t0000000000000004 name".
_SYMBOL = re.compile(r"^([0-9a-f]+) .{7} (\S+)\t([0-9a-f]+) (\S+)$")
_NUMBERED = re.compile(r"(?<![.\w])([A-Za-z_]\w*)\.\d+(?![.\w])")
# GCC's clones: foo.constprop.0, foo.isra.0, foo.part.0, foo.cold.
_CLONE = re.compile(r"\.(?:constprop|isra|part|cold|lto_priv)(?:\.\d+)?")

Symbols = Dict[str, List[Tuple[int, int, str]]]   # section -> (start, size, name), sorted


def symbols(table: str) -> Symbols:
    """The named data and functions of objdump -t, by section."""
    out: Symbols = {}
    for line in table.splitlines():
        m = _SYMBOL.match(line.strip())
        if m and not m.group(4).startswith(".") and int(m.group(3), 16) > 0:
            out.setdefault(m.group(2), []).append(
                (int(m.group(1), 16), int(m.group(3), 16), m.group(4)))
    for entries in out.values():
        entries.sort()
    return out


def toc_entries(relocs: str, syms: Optional[Symbols] = None) -> Symbols:
    """ppc64le's .toc as symbols: each 8-byte entry named by what its
    relocation points at (objdump -r -j .toc: "OFFSET TYPE VALUE"), a
    section and offset (a jump table in .text) as the symbol there."""
    out = []
    for line in relocs.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].startswith("R_") and re.fullmatch(r"[0-9a-f]+", parts[0]):
            value = parts[2]
            m = re.fullmatch(r"(\.[\w.]+)\+0x([0-9a-f]+)", value)
            if m and syms:
                value = resolve(m.group(1), int(m.group(2), 16), syms)
            out.append((int(parts[0], 16), 8, f"toc({_local(value)})"))
    return {".toc": sorted(out)} if out else {}


def _local(name: str) -> str:
    """A symbol without the number gcc gives a function's static variable
    (_rs.98, __func__.1, __already_done.3, CSWTCH.1247): it counts the
    statics of the whole object, so the tests' own move it."""
    return _NUMBERED.sub(r"\1", name)


def resolve(section: str, addend: int, syms: Symbols) -> str:
    """SECTION+ADDEND as "symbol+offset", or the section where none covers it."""
    for start, size, name in syms.get(section, ()):
        if start <= addend < start + size:
            return f"{name}+{addend - start:#x}" if addend > start else name
    return section
# Padding: the nops an assembler puts before an aligned loop or function
# end depend on where the function lands (ppc64le's "ori r2,r2,0" too).
_PADDING = re.compile(r"^(?:(?:data16 |cs )*nop[lw]?\b.*|xchg %ax,%ax|ori r2,r2,0)$")


def normalise(insn: str, syms: Optional[Symbols] = None) -> str:
    """One instruction of objdump -dr -w --no-show-raw-insn without its
    address, its branch targets and relocations as symbols."""
    m = _RELOC.search(insn)
    reloc = ""
    if m:
        sym, addend = m.group(2), m.group(3) or ""
        if sym.startswith("."):
            # The addend of a PC-relative reference counts from the field.
            bias = 4 if m.group(1).endswith(("PC32", "PLT32")) else 0
            target = resolve(sym, int(addend or "0", 16) + bias, syms or {})
        else:
            target = sym + addend
        reloc = f"\t{m.group(1)} {_local(target)}"
        insn = insn[:m.start()]
        # The relocation names the target; the address objdump shows is
        # that of the unrelocated field (a tail call's: the next function).
        insn = _TARGET.sub("", insn)
    insn = _TARGET.sub(r"\1", insn)
    insn = re.sub(r"\s+", " ", insn).strip()
    return insn + reloc


def _labelled(name: str, start: int, insns: List[Tuple[int, str]]) -> List[str]:
    """A function's instructions without padding, a branch into the
    function itself named by the index of the instruction it reaches (the
    next one kept when it lands on padding), so that padding moved by the
    function's placement changes nothing."""
    kept = [(addr, text) for addr, text in insns if not _PADDING.match(text)]
    index = {addr: i for i, (addr, _) in enumerate(kept)}
    addrs = sorted(index)

    def label(m: "re.Match[str]") -> str:
        target = start + int(m.group(1), 16)
        pos = next((index[a] for a in addrs if a >= target), len(kept))
        return f"<L{pos}>"
    own = re.compile(rf"<{re.escape(name)}\+0x([0-9a-f]+)>")
    return [own.sub(label, text) for _, text in kept]


def split_functions(text: str, syms: Optional[Symbols] = None) -> Dict[str, List[str]]:
    """objdump -dr output as {function: normalised instructions}; the
    padding before a function ("<foo-0x10>") is left out; SYMS: the
    object's symbols, to name what section offsets point at."""
    raw: Dict[str, Tuple[int, List[Tuple[int, str]]]] = {}
    current = None
    for line in text.splitlines():
        h = _HEADER.match(line)
        if h:
            name = h.group(2)
            # Padding ("<foo-0x10>") and section starts ("<.altinstr_replacement>")
            # are not functions.
            current = None if (re.search(r"[+-]0x[0-9a-f]+$", name)
                               or name.startswith(".")) else name
            if current is not None:
                raw[current] = (int(h.group(1), 16), [])
            continue
        m = _INSN.match(line)
        if m and current is not None:
            raw[current][1].append((int(m.group(1), 16), normalise(m.group(2), syms)))
    return {name: _labelled(name, start, insns) for name, (start, insns) in raw.items()}


@dataclass
class Comparison:
    arch: str
    same: int = 0
    differ: List[str] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)     # off only: not in the on object
    tests: List[str] = field(default_factory=list)       # on only: the tests' code
    diffs: Dict[str, List[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.same > 0 and not self.differ and not self.missing


def compare(arch: str, off: Dict[str, List[str]], on: Dict[str, List[str]]) -> Comparison:
    """Each function of OFF against ON's of the same name, or of the same
    name but for GCC's clone suffix (foo.constprop.0 and foo: a change)."""
    c = Comparison(arch)
    unmatched = set(on) - set(off)
    for name, code in off.items():
        other = name if name in on else next(
            (n for n in sorted(unmatched) if _CLONE.sub("", n) == _CLONE.sub("", name)), None)
        if other is None:
            c.missing.append(name)
            continue
        unmatched.discard(other)
        label = name if other == name else f"{name} (with the option on: {other})"
        if on[other] != code:
            c.differ.append(label)
            c.diffs[label] = list(difflib.unified_diff(code, on[other], "off", "on",
                                                       lineterm="", n=1))
        else:
            c.same += 1
    c.tests = sorted(unmatched)
    return c


def report(c: Comparison, most: int = 12) -> str:
    head = (f"{c.arch}: {c.same} of {c.same + len(c.differ) + len(c.missing)} production "
            f"functions the same with the option on; {len(c.differ)} differ, "
            f"{len(c.missing)} missing; {len(c.tests)} functions only with the option on "
            "(the tests', and production functions no longer inlined)")
    lines = [head]
    for name in c.differ[:most]:
        lines.append(f"  differs: {name} ({sum(1 for d in c.diffs[name] if d[:1] in '+-')} "
                     "changed lines)")
    if len(c.differ) > most:
        lines.append(f"  ... and {len(c.differ) - most} more")
    lines += [f"  missing with the option on: {n}" for n in c.missing[:most]]
    if len(c.missing) > most:
        lines.append(f"  ... and {len(c.missing) - most} more missing")
    return "\n".join(lines)


def out_dir() -> Path:
    return work_dir() / "objdiff"


def _objdump(arch: buildmod.Arch, obj: Path, *what: str) -> str:
    """objdump WHAT (default: the disassembly with relocations) of OBJ."""
    tool = f"{arch.cross_compile}objdump" if arch.cross_compile else "objdump"
    args = list(what) or ["-dr", "--no-show-raw-insn", "-w"]
    return run([tool, *args, str(obj)], capture=True).stdout


def _arch(name: str) -> buildmod.Arch:
    """The arch's build settings, the series check's distribution-like
    start for cross targets, and both configs from the lab fragments."""
    arch = buildmod.get_arch(name)
    if not arch.cross_compile:
        return arch
    return dataclasses.replace(arch, start=arch.check_start or arch.start,
                               configs={"lab": ["lab"], "probe": ["lab", "probe"]})


# ppc64le reaches static data through section anchors, an offset in the
# instruction that moves with the tests' data; without them each static
# has a relocation of its own, as on x86_64.
EXTRA_CFLAGS = {"ppc64le": ["KCFLAGS=-fno-section-anchors"]}


def check_option(config_text: str, option: str) -> List[str]:
    """What is wrong with a build's .config for the comparison: KUNIT=y
    both times, the test option as OPTION says."""
    cfg = buildmod.parse_config(config_text)
    want = "y" if option == "on" else "n"
    problems = []
    if cfg.get("CONFIG_KUNIT", "n") != "y":
        problems.append("CONFIG_KUNIT is not y")
    if cfg.get(KUNIT_OPTION, "n") != want:
        problems.append(f"{KUNIT_OPTION} is not {want}")
    return problems


def run_arch(tree: Tree, commit: str, name: str) -> Comparison:
    arch = _arch(name)
    log = log_dir() / f"objdiff-{name}.log"
    log.write_text("")
    code: Dict[str, Dict[str, List[str]]] = {}
    for option, config in CONFIGS.items():
        bdir = work_dir() / "build" / tree.key / f"objdiff-{option}{arch.suffix}"
        tree.checkout(commit)
        say(f"  {name}: {OBJECT} with the option {option} ({config} config) in {bdir}")
        buildmod.prepare(tree, bdir, config, arch, log)
        wrong = check_option((bdir / ".config").read_text(), option)
        if wrong:
            raise LabError(f"{bdir}/.config: {'; '.join(wrong)}: nothing to compare")
        buildmod.compile_objects(tree, bdir, [OBJECT], arch, log, w1=False,
                                 extra=EXTRA_CFLAGS.get(name, []))
        text = _objdump(arch, bdir / OBJECT)
        syms = symbols(_objdump(arch, bdir / OBJECT, "-t"))
        if name == "ppc64le":
            syms.update(toc_entries(_objdump(arch, bdir / OBJECT, "-r", "-j", ".toc"), syms))
        out = out_dir() / f"fair-{name}-{option}.dis"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        code[option] = split_functions(text, syms)
    return compare(name, code["off"], code["on"])


# The comparison of two commits: the probe config with JUMP_LABEL on, the
# static keys patched branches as in distribution kernels.
BETWEEN_CONFIG = "icount"


def run_between(tree: Tree, first: str, second: str,
                name: str = "x86_64") -> Tuple[Comparison, Dict[str, Tuple[int, int]]]:
    """fair.o at FIRST against fair.o at SECOND (BETWEEN_CONFIG): the
    comparison (FIRST's functions as "off", SECOND's as "on") and, for each
    function that differs, its instruction counts at each."""
    arch = _arch(name)
    log = log_dir() / f"objdiff-between-{name}.log"
    log.write_text("")
    code: Dict[str, Dict[str, List[str]]] = {}
    for side, rev in (("first", first), ("second", second)):
        bdir = work_dir() / "build" / tree.key / f"objdiff-{side}{arch.suffix}"
        tree.checkout(rev)
        say(f"  {name}: {OBJECT} at {rev[:12]} ({BETWEEN_CONFIG} config) in {bdir}")
        buildmod.prepare(tree, bdir, BETWEEN_CONFIG, arch, log)
        buildmod.compile_objects(tree, bdir, [OBJECT], arch, log, w1=False,
                                 extra=EXTRA_CFLAGS.get(name, []))
        text = _objdump(arch, bdir / OBJECT)
        syms = symbols(_objdump(arch, bdir / OBJECT, "-t"))
        out = out_dir() / f"fair-{name}-{side}.dis"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        code[side] = split_functions(text, syms)
    c = compare(name, code["first"], code["second"])
    sizes = {}
    for label in c.differ:
        fn = label.split(" ")[0]
        other = label.rsplit(": ", 1)[1].rstrip(")") if " (with the option on: " in label else fn
        sizes[label] = (len(code["first"][fn]), len(code["second"][other]))
    return c, sizes


def between_report(c: Comparison, sizes: Dict[str, Tuple[int, int]], first: str,
                   second: str) -> str:
    """What differs between two commits' fair.o: each function that does,
    with its instructions (padding left out) at each commit."""
    lines = [f"{c.arch}: fair.o at {first[:12]} against {second[:12]} ({BETWEEN_CONFIG} "
             f"config): {c.same} functions the same, {len(c.differ)} differ, "
             f"{len(c.missing)} only at the first, {len(c.tests)} only at the second"]
    for label in c.differ:
        a, b = sizes[label]
        lines.append(f"  differs: {label}: {a} -> {b} instructions")
    lines += [f"  only at the first: {n}" for n in c.missing]
    lines += [f"  only at the second: {n}" for n in c.tests]
    return "\n".join(lines)


def run_all(tree: Tree, arches: Tuple[str, ...] = ARCHES) -> Tuple[str, bool]:
    """Both arches at the series tip: the report and the verdict; the
    per-function diffs go to work/objdiff/ARCH.diff."""
    for a in arches:
        if a not in ARCHES:
            raise LabError(f"unknown arch {a!r}; known: {', '.join(ARCHES)}")
    tip = ensure_variant(tree, "posted")
    texts, ok = [], True
    with tree.locked("objdiff"):
        for a in arches:
            c = run_arch(tree, tip, a)
            (out_dir() / f"{a}.diff").write_text(
                "".join(f"== {n}\n" + "\n".join(d) + "\n" for n, d in c.diffs.items()))
            texts.append(report(c))
            ok &= c.ok
    return "\n".join(texts), ok
