"""Simulated topologies: presets, qemu arguments and the guest topology check.

A topology is sockets x cores x threads, optionally with one NUMA node per
socket.  QEMU numbers x86 vCPUs socket-major, then core, then thread, so the
SMT siblings of CPU n are the CPUs n - n % threads ... (consecutive numbering).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from schedlab.core.util import LabError, package_file


@dataclass(frozen=True)
class Topology:
    sockets: int
    cores: int
    threads: int
    numa: bool = False
    name: str = ""

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores * self.threads

    @property
    def nodes(self) -> int:
        return self.sockets if self.numa else 1

    def spec(self) -> str:
        return f"{self.sockets}x{self.cores}x{self.threads}" + (":numa" if self.numa else "")

    def describe(self) -> str:
        numa = f", {self.nodes} NUMA nodes" if self.numa else ""
        return (f"{self.sockets} socket(s) x {self.cores} core(s) x {self.threads} "
                f"thread(s) = {self.cpus} CPUs{numa}")

    # --- what the guest should see --------------------------------------

    def core_of(self, cpu: int) -> int:
        return (cpu // self.threads) % self.cores

    def package_of(self, cpu: int) -> int:
        return cpu // (self.cores * self.threads)

    def siblings_of(self, cpu: int) -> List[int]:
        first = cpu - cpu % self.threads
        return list(range(first, first + self.threads))

    def node_cpus(self, node: int) -> List[int]:
        per = self.cpus // self.nodes
        return list(range(node * per, (node + 1) * per))

    def expected_domains(self, mc_level: bool = True) -> List[str]:
        """Sched domain names of a CPU after degenerate levels are removed.

        SMT spans the core, MC the LLC, PKG all CPUs of a node, NUMA all
        nodes.  QEMU gives an x86 guest one LLC per socket; a pseries guest
        has its LLC in the core and no MC level (mc_level: the boot target's,
        targets.py).  A level whose span equals the level below it is removed
        by the kernel (sd_degenerate/sd_parent_degenerate).
        """
        names = []
        spans = []  # number of CPUs each level spans
        if self.threads > 1:
            names.append("SMT")
            spans.append(self.threads)
        mc = self.cores * self.threads
        if mc_level and (not spans or mc > spans[-1]):
            names.append("MC")
            spans.append(mc)
        pkg = self.cpus // self.nodes
        if pkg > (spans[-1] if spans else 1):
            names.append("PKG")
            spans.append(pkg)
        if self.nodes > 1:
            names.append("NUMA")
            spans.append(self.cpus)
        return names


# The lab's presets: data, not code paths.
PRESETS: Dict[str, Topology] = {
    "smt2": Topology(2, 4, 2, name="smt2"),
    "smt4": Topology(1, 2, 4, name="smt4"),
    "smt8": Topology(1, 2, 8, name="smt8"),
    "smt4-numa": Topology(2, 2, 4, numa=True, name="smt4-numa"),
    "smt8-numa": Topology(2, 2, 8, numa=True, name="smt8-numa"),
    # The large guest of the instruction counts (--accel icount): 64 vCPUs.
    "smt8-64": Topology(2, 4, 8, numa=True, name="smt8-64"),
    "smt2-numa": Topology(2, 4, 2, numa=True, name="smt2-numa"),
}

_FREE_FORM = re.compile(r"^(\d+)x(\d+)x(\d+)(:numa)?$")
MAX_CPUS = 256  # the lab config's NR_CPUS


def presets_help() -> str:
    rows = [f"  {name:<10} {t.spec():<12} {t.describe()}" for name, t in PRESETS.items()]
    return "\n".join(rows + ["  SxCxT[:numa]  free form, e.g. 2x4x8:numa (one node per socket)"])


def parse_topology(text: str) -> Topology:
    if text in PRESETS:
        return PRESETS[text]
    m = _FREE_FORM.match(text.strip().lower())
    if not m:
        raise LabError(f"unknown topology {text!r}; presets:\n{presets_help()}")
    s, c, t = (int(m.group(i)) for i in (1, 2, 3))
    if min(s, c, t) < 1:
        raise LabError(f"topology {text!r}: sockets, cores and threads must be >= 1")
    topo = Topology(s, c, t, numa=bool(m.group(4)), name=text)
    if topo.cpus > MAX_CPUS:
        raise LabError(f"topology {text!r} has {topo.cpus} CPUs; the lab kernel has "
                       f"NR_CPUS={MAX_CPUS}")
    return topo


def smp_arg(topo: Topology, present: Optional[int] = None) -> str:
    """Value of qemu's -smp for this topology.  present: only that many CPUs
    at boot, the topology's CPUs being the possible ones (maxcpus)."""
    shape = f"sockets={topo.sockets},cores={topo.cores},threads={topo.threads}"
    if present is None or present >= topo.cpus:
        return f"{topo.cpus},{shape}"
    if present < 1:
        raise LabError("at least one CPU must be present at boot")
    return f"{present},maxcpus={topo.cpus},{shape}"


def numa_node_specs(topo: Topology, memory_mib: int) -> List[str]:
    """virtme-ng --numa values (SIZE,cpus=A-B), one node per socket."""
    if topo.nodes <= 1:
        return []
    per_node = memory_mib // topo.nodes
    out = []
    for node in range(topo.nodes):
        cpus = topo.node_cpus(node)
        out.append(f"{per_node}M,cpus={cpus[0]}-{cpus[-1]}")
    return out


def qemu_numa_args(topo: Topology, memory_mib: int) -> List[str]:
    """qemu's own -object/-numa arguments for numa_node_specs() (no virtme-ng)."""
    args: List[str] = []
    for node, spec in enumerate(numa_node_specs(topo, memory_mib)):
        size, cpus = spec.split(",cpus=")
        args += ["-object", f"memory-backend-ram,id=mem{node},size={size}",
                 "-numa", f"node,nodeid={node},cpus={cpus},memdev=mem{node}"]
    return args


def kernel_cpu_args(topo: Topology, online: Optional[int]) -> List[str]:
    """Kernel arguments: maxcpus=K boots K CPUs of the topology's N possible."""
    if online is None or online >= topo.cpus:
        return []
    if online < 1:
        raise LabError("--online must be at least 1")
    return [f"maxcpus={online}"]


# ------------------------------------------------------------ topology check

# Runs in the guest (bash FILE); prints one 'key value' line per fact.
GUEST_PROBE_FILE = "guest/topology-probe.sh"


def guest_probe() -> Path:
    """The guest topology probe shipped in the package (the guest shares the
    host's root filesystem, so it runs it in place)."""
    return package_file(GUEST_PROBE_FILE)


def parse_cpulist(text: str) -> List[int]:
    out: List[int] = []
    text = text.strip()
    if not text:
        return out
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


@dataclass
class GuestView:
    nproc: int
    possible: List[int]
    online: List[int]
    cpus: Dict[int, tuple]          # cpu -> (siblings, core_id, package_id)
    nodes: Dict[int, List[int]]
    domains: List[str]


def parse_guest_report(text: str) -> GuestView:
    view = GuestView(0, [], [], {}, {}, [])
    doms: Dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        try:
            if parts[0] == "nproc" and len(parts) == 2:
                view.nproc = int(parts[1])
            elif parts[0] == "possible" and len(parts) == 2:
                view.possible = parse_cpulist(parts[1])
            elif parts[0] == "online" and len(parts) == 2:
                view.online = parse_cpulist(parts[1])
            elif parts[0] == "cpu" and len(parts) == 5:
                view.cpus[int(parts[1])] = (tuple(parse_cpulist(parts[2])), int(parts[3]),
                                            int(parts[4]))
            elif parts[0] == "node" and len(parts) in (2, 3):
                view.nodes[int(parts[1])] = parse_cpulist(parts[2] if len(parts) == 3 else "")
            elif parts[0] == "domain" and len(parts) == 3:
                doms[int(parts[1])] = parts[2]
        except ValueError:
            continue
    view.domains = [doms[k] for k in sorted(doms)]
    return view


def check_view(topo: Topology, view: GuestView, online: Optional[int] = None,
               mc_level: bool = True) -> List[str]:
    """Differences between the guest's view and the topology; empty when they
    agree (mc_level: whether the boot target's guests have an MC level)."""
    problems = []
    want_online = topo.cpus if online is None else min(online, topo.cpus)
    if view.nproc != want_online:
        problems.append(f"nproc is {view.nproc}, expected {want_online}")
    if view.possible and len(view.possible) != topo.cpus:
        problems.append(f"{len(view.possible)} possible CPUs, expected {topo.cpus}")
    for cpu in view.online:
        if cpu not in view.cpus:
            problems.append(f"cpu{cpu}: no topology in sysfs")
            continue
        siblings, _core, pkg = view.cpus[cpu]
        want_sib = [c for c in topo.siblings_of(cpu) if c in view.online]
        if list(siblings) != want_sib:
            problems.append(f"cpu{cpu}: thread siblings {list(siblings)}, expected {want_sib}")
        if pkg != topo.package_of(cpu):
            problems.append(f"cpu{cpu}: package {pkg}, expected {topo.package_of(cpu)}")
    # Core ids: two online CPUs of one package share a core id exactly when
    # the topology puts them on the same core.
    ids: Dict[tuple, set] = {}
    for cpu in view.online:
        if cpu in view.cpus:
            ids.setdefault((topo.package_of(cpu), topo.core_of(cpu)), set()).add(
                view.cpus[cpu][1])
    for (pkg, core), got in sorted(ids.items()):
        if len(got) != 1:
            problems.append(f"package {pkg} core {core}: its threads have core ids {sorted(got)}")
    per_pkg: Dict[int, list] = {}
    for (pkg, _core), core_ids in ids.items():
        per_pkg.setdefault(pkg, []).extend(core_ids)
    for pkg, pkg_ids in sorted(per_pkg.items()):
        if len(set(pkg_ids)) != len(pkg_ids):
            problems.append(f"package {pkg}: two cores share a core id")
    nodes = {n: c for n, c in view.nodes.items()}
    if len(nodes) != topo.nodes:
        problems.append(f"{len(nodes)} NUMA node(s), expected {topo.nodes}")
    elif topo.nodes > 1:
        for node in range(topo.nodes):
            want = [c for c in topo.node_cpus(node) if c in view.online]
            if nodes.get(node) != want:
                problems.append(f"node{node}: cpus {nodes.get(node)}, expected {want}")
    if want_online == topo.cpus:
        want_doms = topo.expected_domains(mc_level)
        if not view.domains:
            problems.append("no sched domains in /sys/kernel/debug/sched/domains/cpu0")
        elif view.domains != want_doms:
            problems.append(f"cpu0 sched domains {view.domains}, expected {want_doms}")
    return problems


def format_cpulist(cpus: List[int]) -> str:
    """The kernel's cpulist form: 0-3,8-11."""
    out = []
    cpus = sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


def format_view(topo: Topology, view: GuestView, mc_level: bool = True) -> str:
    """What the guest reports, and what the topology expects, for the user."""
    lines = [f"  guest: {view.nproc} CPUs online of {len(view.possible)} possible, "
             f"{len(view.nodes)} NUMA node(s), cpu0 domains: {' '.join(view.domains) or '-'}"]
    sib_lists = sorted({sib for sib, _c, _p in view.cpus.values()})
    shown = ", ".join("{" + ",".join(map(str, s)) + "}" for s in sib_lists[:8])
    more = f" ... ({len(sib_lists)} cores)" if len(sib_lists) > 8 else ""
    lines.append(f"  SMT sibling sets: {shown}{more}")
    for node, cpus in sorted(view.nodes.items()):
        lines.append(f"  node{node}: {format_cpulist(cpus)}")
    lines.append(f"  expected: {topo.describe()}, domains "
                 f"{' '.join(topo.expected_domains(mc_level))}")
    return "\n".join(lines)
