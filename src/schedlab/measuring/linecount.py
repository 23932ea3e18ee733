"""Cache lines moved between vCPUs per call: the lines probe.

A qemu TCG plugin (qemu/linecount.c over qemu/coherence.c) keeps a
coherence directory of every 64-byte line the guest touches and writes one
record per call of the counted functions; this module builds it, gives qemu
its options, and turns the records of each run's window into lines.json.
Detail: docs/modules.md, section measuring/linecount.py.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Tuple

from schedlab.core import topology as topomod
from schedlab.core.util import LabError, package_file, run, work_dir
from schedlab.measuring.parsers import IDLE_TYPES, Metric

if TYPE_CHECKING:
    from schedlab.measuring.probe_parsers import Parsed

# The functions counted (clones such as NAME.constprop.0 too), and whether
# their calls are keyed by the sched domain level marked before each balance.
FUNCTIONS: Tuple[Tuple[str, bool], ...] = (
    ("should_we_balance", True),
    ("sched_balance_rq", True),
    ("update_sd_lb_stats", True),
    ("update_sd_lb_stats_reuse", True),
    ("sched_balance_find_src_group", True),
    ("select_task_rq_fair", False),
)
# The measurement series' marker (patches/measure): a 64-byte row per CPU,
# each row a line; a store to byte 4 * level + idle type of the CPU's row
# before it balances a domain of that level.
LEVEL_SYMBOL = "sched_lab_level_mark"
# Where BPF programs and trampolines live on x86-64: above the kernel image,
# below the fixmap (the module space).
APART_END = 0xffffffffff000000
KERNEL_ARGS = ("nokaslr",)
RECORDS = "lines-records.txt"     # per boot, the plugin's output
OUT = "lines.json"                # per run
EPOCH = "lines-epoch.txt"         # per run: the epoch of its window (the runner)
DISTANCES = ("smt", "llc", "xllc", "node")
MAX_VCPUS = 64                    # the plugin's holder masks
# The proof program's code sits here, where no other guest program's does,
# so that its marker's address means the same in every process.
PROOF_TEXT = 0x30000000

# A record's fields after func, level, vcpu, epoch (coherence.c's emit()).
FIELDS = ("insns", "loads", "stores", "atomics", "lines",
          *(f"xfer_{d}" for d in DISTANCES), *(f"inval_{d}" for d in DISTANCES),
          "copies", "cold", "apart")

_CFLAGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"]


# The last qemu that loads plugins of API version 1 (qemu 5.2 to 8.1).
QEMU_LAST_V1 = (8, 1)
QEMU = "qemu-system-x86_64"


def qemu_version() -> Optional[Tuple[int, int]]:
    """This machine's qemu-system-x86_64 as (major, minor), None without one."""
    try:
        out = subprocess.run([QEMU, "--version"], capture_output=True, text=True,
                             timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"version (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def check_request(topology: str, host: bool = False) -> topomod.Topology:
    """The lines probe's refusals, before anything is fetched or built."""
    if host:
        raise LabError("the lines probe runs only in the VM: a qemu plugin counts it, "
                       "outside the guest (no --host)")
    topo = topomod.parse_topology(topology)
    if topo.cpus > MAX_VCPUS:
        raise LabError(f"the lines probe: {topo.spec()} has {topo.cpus} CPUs; the plugin "
                       f"holds at most {MAX_VCPUS} (a 64-bit mask of holders per line)")
    version = qemu_version()
    if version is None:
        raise LabError(f"the lines probe needs {QEMU} (Debian: qemu-system-x86)")
    if version > QEMU_LAST_V1:
        raise LabError(f"the lines probe: qemu {version[0]}.{version[1]} loads only plugins "
                       "of API version 2 or later; its plugin is version 1 (qemu 5.2 to "
                       "8.1, Debian 12's 7.2)")
    return topo


# ------------------------------------------------------------------ the programs


def _compile(name: str, sources: Sequence[str], flags: Sequence[str],
             dest: Optional[Path] = None) -> Path:
    srcs = [package_file(s) for s in sources]
    deps = srcs + [package_file(f"qemu/{h}") for h in ("coherence.h", "x86insn.h",
                                                       "qemu_plugin_v1.h")]
    out = dest or work_dir() / "tools" / name
    if out.is_file() and all(out.stat().st_mtime >= s.stat().st_mtime for s in deps):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["gcc", *_CFLAGS, *flags, "-o", str(out), *map(str, srcs)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise LabError(f"compiling {name} failed: {proc.stderr.strip()[-400:]}")
    return out


def plugin(dest: Optional[Path] = None) -> Path:
    """The plugin, compiled into work/tools/ when a source is newer."""
    return _compile("linecount.so", ("qemu/linecount.c", "qemu/coherence.c", "qemu/x86insn.c"),
                    ("-fPIC", "-shared", "-fvisibility=hidden"), dest)


def replay_tool(dest: Optional[Path] = None) -> Path:
    """cohreplay: the directory on a recorded trace (the tests)."""
    return _compile("cohreplay", ("qemu/cohreplay.c", "qemu/coherence.c", "qemu/x86insn.c"), (),
                    dest)


def proof_program(dest: Optional[Path] = None) -> Path:
    """cohproof, static, its code at PROOF_TEXT."""
    return _compile("cohproof", ("guest/cohproof.c",),
                    ("-static", "-pthread", f"-Wl,-Ttext-segment={PROOF_TEXT:#x}"), dest)


def symbols(binary: Path) -> Dict[str, Tuple[int, int]]:
    """The symbols of BINARY with a size: name -> (address, size)."""
    out: Dict[str, Tuple[int, int]] = {}
    for line in run(["nm", "-S", str(binary)], capture=True).stdout.splitlines():
        p = line.split()
        if len(p) == 4:
            out.setdefault(p[3], (int(p[0], 16), int(p[1], 16)))
    return out


# ------------------------------------------------------------------ qemu's options


def places(topo: topomod.Topology) -> List[Tuple[int, int, int]]:
    """Each vCPU's (core, LLC, node): qemu numbers x86 vCPUs socket by socket,
    core by core, and gives each socket one LLC."""
    return [(cpu // topo.threads, topo.package_of(cpu),
             topo.package_of(cpu) if topo.numa else 0) for cpu in range(topo.cpus)]


def write_topo(topo: topomod.Topology, path: Path) -> Path:
    path.write_text("".join(f"{v} {c} {l} {n}\n" for v, (c, l, n) in enumerate(places(topo))))
    return path


@dataclass(frozen=True)
class Counted:
    """What the plugin counts in a boot: functions by id, and the markers."""
    funcs: Tuple[Tuple[int, str, bool], ...]    # (entry, name, keyed by level)
    level: Tuple[int, int] = (0, 0)             # the level marker's rows, or none
    mark: int = 0                               # the epoch marker, 0: none
    apart: Tuple[int, int] = (0, 0)

    def names(self) -> List[str]:
        return [name for _, name, _ in self.funcs]


def kernel_counted(vmlinux: Path, mark: int) -> Counted:
    """FUNCTIONS in VMLINUX (each symbol, clones apart), its level marker if
    the measurement series is in, and the proof program's marker MARK."""
    syms = symbols(vmlinux)
    wanted = dict(FUNCTIONS)
    funcs = tuple(sorted((a, n, wanted[n.split(".", 1)[0]]) for n, (a, _) in syms.items()
                         if n.split(".", 1)[0] in wanted))
    if not any(n.split(".", 1)[0] == "should_we_balance" for _, n, _ in funcs):
        raise LabError("lines: should_we_balance is not out of line in this vmlinux "
                       "(the measurement series keeps it so)")
    level = syms.get(LEVEL_SYMBOL, (0, 0))
    if not level[1]:
        raise LabError(f"lines: no {LEVEL_SYMBOL} in {vmlinux}: a build without the "
                       "measurement series' marker (patches/measure) keys no balance")
    if level[0] % 64 or level[1] % 64:
        raise LabError(f"lines: {LEVEL_SYMBOL} is not rows of 64-byte lines in {vmlinux}")
    end = run(["nm", str(vmlinux)], capture=True).stdout
    top = next((int(p[0], 16) for p in map(str.split, end.splitlines())
                if len(p) == 3 and p[2] == "_end"), 0)
    return Counted(funcs, level, mark, (top, APART_END) if top else (0, 0))


def qemu_opts(plugin_so: Path, counted: Counted, topo_file: Path, out: Path) -> str:
    if not counted.funcs or len(counted.funcs) > 64:
        raise LabError(f"lines: {len(counted.funcs)} functions (1 to 64)")
    parts = [f"func={a:x}:{i}" + (":L" if leveled else "")
             for i, (a, _, leveled) in enumerate(counted.funcs)]
    if counted.level[1]:
        parts.append(f"level={counted.level[0]:x}:{counted.level[1]:x}")
    if counted.mark:
        parts.append(f"mark={counted.mark:x}")
    if counted.apart[1] > counted.apart[0]:
        parts.append(f"apart={counted.apart[0]:x}:{counted.apart[1]:x}")
    return f"-plugin {plugin_so},{','.join(parts)},topo={topo_file},out={out}"


# ------------------------------------------------------------------ the records


@dataclass(frozen=True)
class Call:
    """One call's record.  KEY: the marker's byte when the call returned
    (4 * level + idle type), -1 for a function not keyed, -2 before the
    vCPU's first balance; EPOCH: the window it returned in."""
    func: int
    key: int
    vcpu: int
    epoch: int
    counts: Dict[str, int]
    full: bool = False          # more distinct lines than the plugin tells apart

    def transfers(self) -> int:
        return sum(self.counts[f"xfer_{d}"] + self.counts[f"inval_{d}"] for d in DISTANCES)


def parse_records(text: str) -> Tuple[List[Call], Dict[str, int]]:
    """The plugin's records, and its totals (calls, lost, deep, epochs, skipped...)."""
    calls: List[Call] = []
    totals: Dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            p = line[1:].split()
            totals.update({p[i]: int(p[i + 1]) for i in range(0, len(p) - 1, 2)})
            continue
        p = line.split()
        if len(p) != 4 + len(FIELDS):
            continue
        full = p[8].endswith("+")
        vals = [int(x.rstrip("+")) for x in p]
        calls.append(Call(vals[0], vals[1], vals[2], vals[3], dict(zip(FIELDS, vals[4:])), full))
    return calls, totals


def _stats(values: List[float]) -> Dict[str, float]:
    return {"mean": statistics.fmean(values), "median": float(statistics.median(values))}


def keys_of(mark: int, levels: Dict[int, str]) -> Tuple[str, ...]:
    """The keys a call is summarized under, from its key: its domain
    ("MC") and its domain with the balance's idle type ("MC, busy"); "all"
    for a function whose calls are not keyed."""
    if mark == -1:
        return ("all",)
    if mark < 0:
        return ("unmarked",)        # keyed, but before the vCPU's first balance
    name = levels.get(mark // 4, f"level {mark // 4}")
    idle = mark % 4
    return (name, f"{name}, {IDLE_TYPES[idle] if idle < len(IDLE_TYPES) else idle}")


def summary(calls: Iterable[Call], names: Sequence[str],
            levels: Dict[int, str]) -> Dict[str, Dict[str, dict]]:
    """{function: {key: {"calls": N, QUANTITY: {"mean", "median"}}}}, keys
    as keys_of() gives them; clones go under their base name."""
    groups: Dict[Tuple[str, str], List[Call]] = {}
    for c in calls:
        base = names[c.func].split(".", 1)[0]
        for key in keys_of(c.key, levels):
            groups.setdefault((base, key), []).append(c)
    out: Dict[str, Dict[str, dict]] = {}
    for (func, level), cs in sorted(groups.items()):
        row: Dict[str, object] = {"calls": len(cs), "full": sum(c.full for c in cs)}
        row["transfers"] = _stats([c.transfers() for c in cs])
        row["transfers in"] = _stats([sum(c.counts[f"xfer_{d}"] for d in DISTANCES) for c in cs])
        row["invalidations"] = _stats([sum(c.counts[f"inval_{d}"] for d in DISTANCES)
                                       for c in cs])
        for d in DISTANCES:
            row[f"transfers {d}"] = _stats([c.counts[f"xfer_{d}"] + c.counts[f"inval_{d}"]
                                            for c in cs])
        for q in ("insns", "loads", "stores", "atomics", "lines", "apart"):
            row[q] = _stats([c.counts[q] for c in cs])
        out.setdefault(func, {})[level] = row
    return out


def parse_levels(text: str) -> Dict[int, str]:
    """The runner's domains.txt ("LEVEL NAME" per domain of CPU 0)."""
    out = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) == 2 and p[0].isdigit():
            out[int(p[0])] = p[1]
    return out


def summarize(raw: Path, records: Path, counted: Counted) -> int:
    """lines.json into each run folder of RAW that has its window's epoch:
    the records of that epoch.  The number of runs summarized."""
    calls, totals = parse_records(records.read_text())
    levels = parse_levels((raw / "domains.txt").read_text()) \
        if (raw / "domains.txt").is_file() else {}
    by_epoch: Dict[int, List[Call]] = {}
    for c in calls:
        by_epoch.setdefault(c.epoch, []).append(c)
    done = 0
    for ep in sorted(raw.glob(f"*/{EPOCH}")):
        try:
            epoch = int(ep.read_text().split()[0])
        except (ValueError, IndexError):
            continue
        data = {"epoch": epoch, "plugin": totals,
                "functions": summary(by_epoch.get(epoch, []), counted.names(), levels)}
        (ep.parent / OUT).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        done += 1
    return done


# ------------------------------------------------------------------ as metrics

# (quantity of summary(), statistic, metric name after the function's, unit,
# headline).  Each is per domain, "NAME (MC)", and per domain and idle type,
# "NAME (MC, busy)"; "NAME (all)" for a function without domains.
METRICS: Tuple[Tuple[str, str, str, str, bool], ...] = (
    ("transfers", "mean", "lines moved per call, mean", "lines", True),
    ("transfers", "median", "lines moved per call, median", "lines", True),
    ("transfers in", "mean", "lines fetched from another CPU per call, mean", "lines", False),
    ("invalidations", "mean", "stores invalidating another CPU's copy per call, mean",
     "stores", False),
    *((f"transfers {d}", "mean", f"lines moved per call at distance {d}, mean", "lines",
       False) for d in DISTANCES),
    ("lines", "mean", "distinct lines per call, mean", "lines", False),
    ("loads", "mean", "loads per call, mean", "loads", False),
    ("atomics", "mean", "atomic read-modify-writes per call, mean", "atomics", False),
    ("insns", "mean", "instructions per call (lines), mean", "instructions", False),
)
COUNTED_NAMES = tuple(name for name, _ in FUNCTIONS if not name.endswith("_reuse"))


def metric_values(data: dict) -> Dict[str, Tuple[float, str]]:
    """lines.json's functions as metrics: name -> (value, unit)."""
    out: Dict[str, Tuple[float, str]] = {}
    for func, levels in data.get("functions", {}).items():
        for level, row in levels.items():
            tag = f" ({level})"
            out[f"{func} calls (lines){tag}"] = (float(row["calls"]), "calls")
            for qty, stat, name, unit, _ in METRICS:
                if qty in row:
                    out[f"{func} {name}{tag}"] = (float(row[qty][stat]), unit)
    return out


def parse_probe(p: "Parsed") -> None:
    """The lines probe's parser (probes.py): lines moved per call, by
    function and domain, over the run's window (lines.json)."""
    try:
        data = json.loads(p.lines_out) if p.lines_out else {}
    except ValueError:
        data = {}
    if not data:
        p.problems.append("lines: no lines.json (no window marked, or the plugin's records "
                          "were not summarized)")
        return
    if not data.get("functions"):
        p.problems.append(f"lines: no counted call in the window (epoch {data.get('epoch')})")
    for name, (value, unit) in metric_values(data).items():
        p.metrics[name] = Metric(value, unit, "count", False)
    lost = data.get("plugin", {}).get("lost", 0)
    if lost:
        p.notes.append(f"lines: {lost} call(s) of the whole boot left without their return "
                       "seen")
    full = sum(row.get("full", 0) for levels in data.get("functions", {}).values()
               for key, row in levels.items() if ", " not in key)
    if full:
        p.notes.append(f"lines: {full} call(s) of the window touched more distinct lines than "
                       "the plugin tells apart (2048): their distinct lines are a floor")
