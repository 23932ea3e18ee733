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
    if proof.warm and calls:
        moved = calls[0].transfers()
        if moved > SLACK:
            problems.append(f"the warm-up call moved {moved} lines, more than {SLACK}")
        calls = calls[1:]
    counts = {k: sum(c.counts[k] for c in calls) for k in keys}
    counts["calls"] = len(calls)
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


def run_one(req: ProofRequest, image: Path, topo: topomod.Topology,
            folder: Path) -> List[Outcome]:
    """One boot: every proof of TOPO, each in an epoch of its own."""
    plist = proofs(topo)
    proof_bin = lc.proof_program()
    syms = lc.symbols(proof_bin)
    funcs = tuple(sorted({(syms[f"proof_{p.mode}"][0], f"proof_{p.mode}", False)
                          for p in plist}))
    counted = lc.Counted(funcs, mark=syms["lines_mark"][0])
    records = folder / lc.RECORDS
    opts = lc.qemu_opts(lc.plugin(), counted, lc.write_topo(topo, folder / "lines-topo.txt"),
                        records)
    lines = [f"{p.mode} {p.args(req.rounds)}" for p in plist]
    (folder / "proofs.txt").write_text("".join(ln + "\n" for ln in lines))
    cmd = f"bash {package_file(SCRIPT)} {proof_bin} {folder / 'proofs.txt'}"
    start = time.monotonic()
    res = vm.boot(image, topo, cmd, icount=True, tcg_single=True, qemu_extra=opts,
                  timeout=1800, rwdirs=[folder], log=folder / "console.txt")
    say(f"  {topo.name or topo.spec()}: booted and ran {len(plist)} proofs in "
        f"{time.monotonic() - start:.0f} s (exit {res.returncode})")
    if not records.is_file():
        raise LabError(f"lines-proof: the plugin wrote no records ({folder / 'console.txt'})")
    calls, totals = lc.parse_records(records.read_text())
    names = counted.names()
    out = []
    for epoch, proof in enumerate(plist, 1):
        mine = [c for c in calls if c.epoch == epoch and names[c.func] == f"proof_{proof.mode}"]
        out.append(check(proof, req.rounds, mine))
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
        outcomes = run_one(req, result.image, t, folder)
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
