"""A cost model, labelled as one: the lines probe's transfers per call by
distance, priced at published core-to-core latencies of a CPU family, plus
the call's instructions at one cycle each.  docs/results/cacheline-cost.md
shows its predictions; the kit's probe pass prints them beside funclatency
(kit/reporttext.py), so that a run on hardware tests the model.

Every latency is a published figure with its source; a distance with no
published figure for a family is left unpriced and the prediction says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from schedlab.core.util import LabError, repo_dir
from schedlab.measuring import linecount
from schedlab.measuring import tables as tablemod

# The sources, as docs/results/cacheline-cost.md lists them.  Every figure
# is one-way: a round trip of a compare-and-swap (or increment) ping-pong on
# one line, halved, as the tools measure it.
SOURCES: Dict[str, str] = {
    "C&C large systems": "Chester Lam, 'Core to Core Latency Data on Large Systems', Chips "
                         "and Cheese, 2023-11-07, section 'Intel's Sapphire Rapids'",
    "C&C Bergamo": "Chester Lam, 'Testing AMD's Bergamo: Zen 4c Spam', Chips and Cheese, "
                   "2024-06-22, section 'Core to Core Latency'",
    "C&C Turin": "George Cozma, 'AMD's Turin: 5th Gen EPYC Launched', Chips and Cheese, "
                 "2024-10-11 (values read off the article's chart by its author)",
    "c2c #132": "nviennot/core-to-core-latency, issue 132: a user's run on two EPYC 9274F",
}


@dataclass(frozen=True)
class Figure:
    """A published one-way latency in ns: LOW to HIGH over the pairs the
    source gives (equal when it gives one number), and what it is."""
    low: float
    high: float
    what: str
    source: str


@dataclass(frozen=True)
class Family:
    """A CPU family: the model names it covers (a pattern on lscpu's "Model
    name"), the part its figures come from, and a figure per lines-probe
    distance (smt, llc: another core of the LLC, xllc: another LLC of the
    socket, node: another socket)."""
    name: str
    model: str
    part: str
    ns: Dict[str, Figure] = field(default_factory=dict)


FAMILIES: Tuple[Family, ...] = (
    Family("IBM POWER10", r"POWER10", "none: no published core-to-core latency found"),
    Family("AMD EPYC Zen 4c (Bergamo)", r"AMD EPYC 97\d4", "2-socket Bergamo (model not named)", {
        "llc": Figure(30, 40, "typical, same CCX", "C&C Bergamo"),
        "xllc": Figure(100, 120, "typical, another CCX", "C&C Bergamo"),
        "node": Figure(200, 212, "average about 200, worst just over 212", "C&C Bergamo")}),
    Family("AMD EPYC Zen 4 (Genoa)", r"AMD EPYC 9\d\d4", "2 x EPYC 9274F", {
        "smt": Figure(9, 9, "SMT siblings", "c2c #132"),
        "llc": Figure(22, 24, "same CCX, per pair", "c2c #132"),
        "xllc": Figure(97, 104, "another CCD, per pair", "c2c #132"),
        "node": Figure(193, 202, "another socket, per pair", "c2c #132")}),
    Family("AMD EPYC Zen 5 (Turin)", r"AMD EPYC 9\d\d5",
           "2 x EPYC 9575F (Zen 5; Zen 5c parts match too)", {
        "llc": Figure(45, 45, "about 45, within a CCD", "C&C Turin"),
        "xllc": Figure(150, 150, "about 150, another CCD", "C&C Turin"),
        "node": Figure(260, 260, "about 260, another socket", "C&C Turin")}),
    Family("Intel Xeon Sapphire Rapids", r"Xeon\(R\) (Platinum|Gold|Silver|Bronze) \d4\d\d",
           "2-socket Sapphire Rapids (model not named)", {
               "llc": Figure(59, 81, "within a socket: average 59, worst 81",
                             "C&C large systems"),
               "node": Figure(138, 138, "across sockets, average", "C&C large systems")}),
)
# Instructions at one cycle each, at this clock: the model's own assumption,
# not a figure of any part.
GHZ = 3.0
# The VM's counts the model prices: should_we_balance() per call under the
# per-patch run of docs/results/cacheline-cost.md (smt8), v7.3 and the topic.
FUNC = "should_we_balance"
VM_RUNS: Dict[str, str] = {"v7.3": "lines-pp-swb-smt8-base", "series": "lines-pp-swb-smt8-swb"}


def family_of(model: str) -> Optional[Family]:
    """The family whose pattern MODEL (a CPU model name) matches, if any."""
    return next((f for f in FAMILIES if re.search(f.model, model)), None)


@dataclass(frozen=True)
class Counts:
    """A function's calls in a VM run (at one level, or over every level):
    lines moved per call by distance, instructions per call, calls; RUNS:
    how many runs these are the mean of."""
    moved: Dict[str, float]
    insns: float
    calls: float
    runs: int = 1


def levels(run: dict, func: str = FUNC) -> List[str]:
    """The levels RUN has FUNC's lines metrics for ('MC', 'MC, idle', ...)."""
    pre = f"{func} calls (lines) ("
    return [k[len(pre):-1] for k in run.get("metrics", {}) if k.startswith(pre)]


def counts(run: dict, func: str = FUNC, level: Optional[str] = None) -> Counts:
    """FUNC's per-call means in RUN (a run-*.json): at LEVEL ('NUMA' or
    'NUMA, idle'), or over every level, each weighted by its calls (the
    idle-type splits not added again)."""
    m = run.get("metrics", {})
    lvs = [level] if level else [lv for lv in levels(run, func) if "," not in lv]
    calls = {lv: m.get(f"{func} calls (lines) ({lv})", {}).get("value", 0) for lv in lvs}
    total = sum(calls.values())
    if not total:
        raise LabError(f"cost model: no calls of {func}" + (f" at {level}" if level else "")
                       + " in the run's lines metrics")

    def mean(name: str) -> float:
        try:
            return sum(calls[lv] * m[f"{func} {name} ({lv})"]["value"]
                       for lv in lvs if calls[lv]) / total
        except KeyError as e:
            raise LabError(f"cost model: the run has calls of {func} but no metric {e}") from e
    return Counts({d: mean(f"lines moved per call at distance {d}, mean")
                   for d in linecount.DISTANCES},
                  mean("instructions per call (lines), mean"), total)


def vm_counts(folder: Path, func: str = FUNC, level: Optional[str] = None) -> Dict[str, Counts]:
    """Per workload, FUNC's counts (at LEVEL, or over every level) over the
    runs of a result set: each run's means, averaged over the runs that
    have a call there."""
    out: Dict[str, List[Counts]] = {}
    for run in tablemod.load_runs(folder):
        cs = out.setdefault(run["workload"], [])
        at = run.get("metrics", {}).get(f"{func} calls (lines) ({level})", {})
        if level is not None and not at.get("value"):
            continue                    # no call at LEVEL in this run
        try:
            cs.append(counts(run, func, level))
        except LabError as e:
            raise LabError(f"{folder.name}, {run.get('workload')}: {e}") from e

    def avg(cs: List[Counts]) -> Counts:
        return Counts({d: sum(c.moved[d] for c in cs) / len(cs) for d in linecount.DISTANCES},
                      sum(c.insns for c in cs) / len(cs), sum(c.calls for c in cs) / len(cs),
                      len(cs))
    return {w: avg(cs) for w, cs in out.items() if cs}


@dataclass(frozen=True)
class Prediction:
    """ns per call, from the low and the high figures; the lines moved at
    distances the family has no figure for (not in the sum)."""
    low: float
    high: float
    unpriced: Dict[str, float]

    def ns(self) -> str:
        """'78', or '59-81' where the figures' range spans 1 ns or more."""
        lo, hi = sorted((self.low, self.high))
        return f"{lo:.0f}" if hi - lo < 1 else f"{lo:.0f}-{hi:.0f}"

    def text(self) -> str:
        """'78 ns', or '59-81 ns', and the unpriced lines."""
        gaps = ", ".join(f"{v:.2f} at {d}" for d, v in self.unpriced.items())
        return f"{self.ns()} ns" + (f" + unpriced lines ({gaps})" if gaps else "")

    def minus(self, other: "Prediction") -> "Prediction":
        """This prediction less OTHER, bound by bound, unpriced lines too."""
        return Prediction(self.low - other.low, self.high - other.high,
                          {d: self.unpriced.get(d, 0.0) - other.unpriced.get(d, 0.0)
                           for d in linecount.DISTANCES
                           if d in self.unpriced or d in other.unpriced})


def predict(c: Counts, fam: Family, ghz: float = GHZ) -> Prediction:
    """C's lines priced at FAM's figures, plus its instructions at GHZ."""
    base = c.insns / ghz
    low = base + sum(c.moved[d] * f.low for d, f in fam.ns.items())
    high = base + sum(c.moved[d] * f.high for d, f in fam.ns.items())
    return Prediction(low, high, {d: v for d, v in c.moved.items()
                                  if v > 0 and d not in fam.ns})


def model_counts() -> Dict[str, Dict[str, Counts]]:
    """The committed VM counts the model prices, by arm and workload."""
    return {arm: vm_counts(repo_dir() / "results" / label) for arm, label in VM_RUNS.items()}
