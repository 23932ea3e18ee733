"""The lines probe's proof: guest programs whose cache-line traffic is known,
counted by the plugin, each count checked against what the program must
move ('lines-proof').  Detail: docs/modules.md, section measuring/lineproof.py.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from schedlab.core import topology as topomod
from schedlab.core import vm
from schedlab.core.util import LabError, package_file, say, work_dir
from schedlab.measuring import linecount as lc
from schedlab.measuring.measure import probe_build
from schedlab.series.topics import built

# Each thread's first round and its start (the round count, its stack and
# the turn line written by the first thread's CPU) may move a line or two
# beyond the protocol's own; no more than this many.
SLACK = 3
SCRIPT = "guest/lines-proof.sh"
# Together every distance the plugin tells apart: SMT siblings, another core
# of the LLC, another node (smt4-numa); another LLC of the node (2x2x2: QEMU
# gives each socket an LLC of its own).
TOPOLOGIES = ("smt4-numa", "2x2x2")
# The kernel's check: the measurement series' function (patches/measure)
# that calls idle_cpu() of a CPU the guest names, and how many calls a run.
IDLE_FUNC = "sched_lab_idle_cpu"
IDLE_CALLS = 20


@dataclass(frozen=True)
class Proof:
    """One run of cohproof: MODE on CPUS, two CPUs at DISTANCE.  Each round,
    all threads together must fetch LINES lines the other wrote and
    invalidate as many copies, none at another distance (None: not checked,
    the threads run free), and each thread make ATOMICS atomic
    read-modify-writes.  HOME: where the main thread waits, a CPU of neither.
    WARM: the thread calls its part twice; the first call, which meets the
    lines the thread's start left elsewhere, only within the slack, the
    second exactly."""
    name: str
    mode: str
    cpus: Tuple[int, ...]
    distance: str
    lines: Optional[int] = 0
    atomics: int = 0
    home: Optional[int] = None
    warm: bool = False

    def args(self, rounds: int) -> str:
        """cohproof's arguments after the mode."""
        return " ".join(map(str, (rounds, *self.cpus)
                            + (() if self.home is None else (self.home,))))


def proofs(topo: topomod.Topology) -> List[Proof]:
    """The proofs a topology can hold: the ping-pong at every distance it
    has, the rest between SMT siblings (or the nearest pair)."""
    out: List[Proof] = []
    pairs: List[Tuple[str, int]] = []
    if topo.threads > 1:
        pairs.append(("smt", 1))
    if topo.cores > 1:
        pairs.append(("llc", topo.threads))
    if topo.sockets > 1:
        pairs.append(("node" if topo.numa else "xllc", topo.cores * topo.threads))
    if not pairs:
        raise LabError(f"lines-proof: topology {topo.spec()} has one CPU")
    def home(*cpus: int) -> Optional[int]:
        return next((c for c in range(topo.cpus - 1, -1, -1) if c not in cpus), None)
    for dist, other in pairs:
        out.append(Proof(f"pingpong {dist}", "pingpong", (0, other), dist, lines=2,
                         home=home(0, other)))
    dist, other = pairs[0]
    h = home(0, other)
    out += [Proof("own lines", "own", (0,), "", home=home(0), warm=True),
            Proof(f"false sharing {dist}", "false", (0, other), dist, lines=4, home=h),
            Proof(f"padded {dist}", "padded", (0, other), dist, lines=2, home=h),
            Proof(f"atomic counter {dist}", "atomic", (0, other), dist, lines=None,
                  atomics=2, home=h)]
    return out


@dataclass(frozen=True)
class IdleCheck:
    """CPU WRITER calls idle_cpu() of CPU TARGET through the kernel, IDLE_CALLS
    times 10 ms apart, while TARGET runs TASK: 'sleep', a task that sleeps
    and wakes each millisecond, so that TARGET writes its runqueue's first
    line (curr, nr_running) between two checks; 'spin', one task that never
    leaves its CPU; 'none', TARGET is WRITER itself.  Expected: after a
    'sleep' TARGET, at least nine calls in ten fetch a line at DISTANCE; for
    itself, at most one call in ten moves a line.  One call in ten either
    way: the writer's own kernel work between two checks (a tick, a balance)
    may read TARGET's line after TARGET last wrote it, and a CPU's own line
    may have been written by a waker.  'spin' is reported, not
    checked: its line moves only if something writes it between two
    checks, which a quiet guest does not promise either way."""
    name: str
    writer: int
    target: int
    task: str
    distance: str

    def line(self) -> str:
        """The guest script's line: cohproof's mode and arguments."""
        return f"idle {IDLE_CALLS} {self.writer} {self.target} {self.task}"


def idle_checks(topo: topomod.Topology) -> List[IdleCheck]:
    """A 'sleep' target at every distance the ping-pong reaches, a 'spin'
    target at the nearest, and CPU 0 checking itself."""
    out = [IdleCheck(f"idle_cpu() of a switching CPU, {p.distance}", 0, p.cpus[1], "sleep",
                     p.distance) for p in proofs(topo) if p.mode == "pingpong"]
    near = out[0]
    return out + [IdleCheck(f"idle_cpu() of a spinning CPU, {near.distance}", 0,
                            near.target, "spin", near.distance),
                  IdleCheck("idle_cpu() of itself", 0, 0, "none", "")]


@dataclass
class Outcome:
    proof: str
    counts: Dict[str, int]      # summed over the proof's threads
    expected: Dict[str, int]
    problems: List[str]

    @property
    def passed(self) -> bool:
        return not self.problems


def check(proof: Proof, rounds: int, calls: Sequence[lc.Call]) -> Outcome:
    """The counts of a proof's calls (its epoch's, in the order they
    returned) against what it must move."""
    keys = [f"{k}_{d}" for k in ("xfer", "inval") for d in lc.DISTANCES] + ["atomics"]
    problems = []
    want = {"calls": len(proof.cpus) * (2 if proof.warm else 1)}
    if len(calls) != want["calls"]:
        problems.append(f"{len(calls)} call(s) counted, {want['calls']} expected")
    counted = len(calls)
    if proof.warm and calls:
        moved = calls[0].transfers()
        if moved > SLACK:
            problems.append(f"the warm-up call moved {moved} lines, more than {SLACK}")
        calls = calls[1:]
    # Counts of the calls checked (after the warm-up), "calls" of all.
    counts = {k: sum(c.counts[k] for c in calls) for k in keys}
    counts["calls"] = counted
    for kind in ("xfer", "inval"):
        for d in lc.DISTANCES:
            if proof.lines is None:
                continue
            key = f"{kind}_{d}"
            exp = proof.lines * rounds if d == proof.distance else 0
            want[key] = exp
            slack = 0 if not proof.lines else SLACK
            if abs(counts[key] - exp) > slack:
                problems.append(f"{key} {counts[key]}, expected {exp}"
                                + (f" (+-{slack})" if slack else ""))
    want["atomics"] = proof.atomics * rounds * len(proof.cpus)
    if counts["atomics"] != want["atomics"]:
        problems.append(f"atomics {counts['atomics']}, expected {want['atomics']}")
    return Outcome(proof.name, counts, want, problems)


def check_idle(chk: IdleCheck, calls: Sequence[lc.Call]) -> Outcome:
    """The counts of an idle_cpu() check's calls against its expectation."""
    keys = [f"{k}_{d}" for k in ("xfer", "inval") for d in lc.DISTANCES]
    counts = {k: sum(c.counts[k] for c in calls) for k in keys + ["insns", "loads", "lines"]}
    counts["calls"] = len(calls)
    counts["calls moving a line"] = sum(c.transfers() > 0 for c in calls)
    want: Dict[str, int] = {"calls": IDLE_CALLS}
    problems = []
    if len(calls) != IDLE_CALLS:
        problems.append(f"{len(calls)} call(s) counted, {IDLE_CALLS} expected"
                        + (" (cohproof's output is in the boot's console.txt)"
                           if not calls else ""))
    if chk.task == "sleep":
        least = IDLE_CALLS - IDLE_CALLS // 10
        want[f"calls fetching at {chk.distance}"] = least       # at least
        dry = sum(c.counts[f"xfer_{chk.distance}"] < 1 for c in calls)
        counts[f"calls fetching at {chk.distance}"] = len(calls) - dry
        if len(calls) - dry < least:
            problems.append(f"{len(calls) - dry} call(s) fetched a line at {chk.distance}, "
                            f"at least {least} expected")
    elif chk.task == "none":
        most = IDLE_CALLS // 10
        want["calls moving a line"] = most      # at most
        if counts["calls moving a line"] > most:
            problems.append(f"{counts['calls moving a line']} call(s) moved a line, "
                            f"at most {most} expected")
    return Outcome(chk.name, counts, want, problems)


@dataclass(frozen=True)
class ProofRequest:
    tree: object                # a TreeSpec: the lab's icount build of its base is booted
    topologies: Tuple[str, ...]
    rounds: int
    out: Path

    def checked(self) -> List[topomod.Topology]:
        """The topologies, or a refusal: before anything is fetched or built."""
        if self.rounds < 10:
            raise LabError(f"lines-proof: --rounds {self.rounds}: at least 10 (a proof may "
                           f"be off by {SLACK} lines)")
        topos = [lc.check_request(t) for t in self.topologies]
        for t in topos:
            if t.cpus < 2:
                raise LabError(f"lines-proof: {t.spec()} has one CPU: nothing can move")
        return topos


def idle_entry(vmlinux: Path) -> Tuple[int, str, bool]:
    """The kernel's idle_cpu() check in VMLINUX, as a counted function."""
    found = [(a, n) for n, (a, _) in lc.symbols(vmlinux).items()
             if n.split(".", 1)[0] == IDLE_FUNC]
    if len(found) != 1:
        raise LabError(f"lines-proof: {len(found)} symbols {IDLE_FUNC} in {vmlinux}, one "
                       "expected (the measurement series, patches/measure, adds it)")
    return (found[0][0], found[0][1], False)


def run_one(req: ProofRequest, image: Path, vmlinux: Path, topo: topomod.Topology,
            folder: Path) -> List[Outcome]:
    """One boot: every proof of TOPO, then its idle_cpu() checks, each in an
    epoch of its own."""
    plist = proofs(topo)
    checks = idle_checks(topo)
    proof_bin = lc.proof_program()
    syms = lc.symbols(proof_bin)
    kernel = idle_entry(vmlinux)
    funcs = tuple(sorted({(syms[f"proof_{p.mode}"][0], f"proof_{p.mode}", False)
                          for p in plist} | {kernel}))
    counted = lc.Counted(funcs, mark=syms["lines_mark"][0])
    records = folder / lc.RECORDS
    opts = lc.qemu_opts(lc.plugin(), counted, lc.write_topo(topo, folder / "lines-topo.txt"),
                        records)
    lines = [f"{p.mode} {p.args(req.rounds)}" for p in plist] + [c.line() for c in checks]
    (folder / "proofs.txt").write_text("".join(ln + "\n" for ln in lines))
    cmd = f"bash {package_file(SCRIPT)} {proof_bin} {folder / 'proofs.txt'}"
    start = time.monotonic()
    # The kernel's function is counted at its link address: no KASLR.
    res = vm.boot(image, topo, cmd, icount=True, tcg_single=True, qemu_extra=opts,
                  kernel_args=lc.KERNEL_ARGS,
                  timeout=1800, rwdirs=[folder], log=folder / "console.txt")
    say(f"  {topo.name or topo.spec()}: booted and ran {len(plist)} programs and "
        f"{len(checks)} idle_cpu() checks in "
        f"{time.monotonic() - start:.0f} s (exit {res.returncode})")
    if not records.is_file():
        raise LabError(f"lines-proof: the plugin wrote no records ({folder / 'console.txt'})")
    calls, totals = lc.parse_records(records.read_text())
    names = counted.names()
    out = []
    for epoch, proof in enumerate(plist, 1):
        mine = [c for c in calls if c.epoch == epoch and names[c.func] == f"proof_{proof.mode}"]
        out.append(check(proof, req.rounds, mine))
    for epoch, chk in enumerate(checks, len(plist) + 1):
        out.append(check_idle(chk, [c for c in calls if c.epoch == epoch
                                    and names[c.func] == kernel[1]]))
    if res.returncode != 0:
        out.append(Outcome("the boot", {}, {}, [f"the guest exited {res.returncode}"]))
    (folder / "plugin.json").write_text(json.dumps(totals) + "\n")
    return out


def run(req: ProofRequest) -> int:
    """Every topology's proofs; their outcomes into REQ.out/proof.json.  0 if all passed."""
    topos = req.checked()
    tree = req.tree.resolve()       # type: ignore[attr-defined]
    result = built(tree, probe_build("base", accel="icount"))
    raw = work_dir() / "lines-proof" / time.strftime("%Y%m%dT%H%M%S")
    record: Dict[str, object] = {"rounds": req.rounds, "slack": SLACK,
                                 "kernel": result.release, "tree": tree.description}
    failed = 0
    for t in topos:
        folder = raw / (t.name or t.spec().replace(":", "-"))
        folder.mkdir(parents=True)
        outcomes = run_one(req, result.image, result.build_dir / "vmlinux", t, folder)
        record[t.name or t.spec()] = [asdict(o) for o in outcomes]
        for o in outcomes:
            say(f"  {'passed' if o.passed else 'FAILED'}: {o.proof}"
                + ("" if o.passed else ": " + "; ".join(o.problems)))
            failed += not o.passed
    req.out.mkdir(parents=True, exist_ok=True)
    (req.out / "proof.json").write_text(json.dumps(record, indent=1) + "\n")
    say(f"lines-proof: {'all passed' if not failed else f'{failed} failed'}; "
        f"{req.out / 'proof.json'}, raw records in {raw}")
    return 1 if failed else 0


def default_out() -> Path:
    return work_dir() / "results" / "lines-proof"
