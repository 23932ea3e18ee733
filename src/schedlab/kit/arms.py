"""The kit's arms: the states of the running kernel it compares, and the
writes under /sys/kernel/debug/sched/ that make each.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Sequence, Tuple

from schedlab.core.util import LabError


@dataclass(frozen=True)
class KitArm:
    """One state of the running kernel the kit measures: the writes under
    /sys/kernel/debug/sched/ that make it, and the piece of the kernel it
    needs (a machine.KernelNeed name; "" for none beyond the series)."""
    name: str
    what: str
    knobs: Tuple[Tuple[str, str], ...] = ()
    needs: str = ""
    before: str = ""    # the arm of the patch before this one: the patch's own effect
    baseline: str = ""  # the stock kernel's arm: compared with it too
    kernel: str = "kit"     # the kernel it runs on: KIT or STOCK
    # Writes made only where their switch is present (SWITCHES' names): off
    # what would hide the arm's own effect on this machine.
    where_present: Tuple[Tuple[str, str], ...] = ()


# The arms by default, the first the reference: its repeat, the
# should_we_balance() topic's states before the series' (the kit's
# swb_state: each patch's function, patches/kit/), then patches 8-10's knobs.
# Every round runs each arm once, in an order shuffled anew each round.
KIT = "kit"
STOCK = "stock"
# The switch that is present where cache aware scheduling is active (the
# machine's llc_balancing/enabled on, several LLCs): SG_STATS_REUSE keeps no
# sums then, so the lbstats arm and its reference turn it off.
LLC_ACTIVE = "cache aware scheduling"
LLC_OFF = (("llc_balancing/enabled", "0"),)
KIT_ARMS = (
    KitArm("series", "the series, every experimental feature off: the reference",
           before="swb-one-core", baseline=STOCK),
    KitArm("series-again", "the same state again: the A/A margin"),
    KitArm(STOCK, "the kernel users run: the same tree and config without the series, "
           "booted apart (against it the series carries the measurement series and the "
           "kit's switch too, and boot-to-boot noise the A/A margin does not hold)",
           kernel=STOCK),
    KitArm("swb-v7.3", "should_we_balance() of v7.3 (swb_state 0)", (("swb_state", "0"),),
           "swb_state"),
    KitArm("swb-busy", "should_we_balance() up to 'Skip the should_we_balance() scan on a busy "
           "CPU' (swb_state 1)", (("swb_state", "1"),), "swb_state", "swb-v7.3"),
    KitArm("swb-one-cpu", "should_we_balance() up to 'Skip the should_we_balance() probes for a "
           "group of one CPU' (swb_state 2)", (("swb_state", "2"),), "swb_state", "swb-busy"),
    KitArm("swb-one-core", "should_we_balance() up to 'Scan for the first idle CPU directly "
           "where cores do not matter' (swb_state 3)", (("swb_state", "3"),), "swb_state",
           "swb-one-cpu"),
    KitArm("newidle-400", "patch 8: newidle_cost_pct=400", (("newidle_cost_pct", "400"),),
           "newidle_cost_pct"),
    KitArm("wake-tg", "patch 9: SIS_GROUP_IDLE on", (("features", "SIS_GROUP_IDLE"),),
           "SIS_GROUP_IDLE"),
    KitArm("lbstats", "patch 10: SG_STATS_REUSE on; where cache aware scheduling is "
           "active, with it off (llc_balancing/enabled 0), as in llc-off",
           (("features", "SG_STATS_REUSE"),), "SG_STATS_REUSE", "llc-off",
           where_present=LLC_OFF),
    KitArm("llc-off", "the series with cache aware scheduling off (llc_balancing/enabled "
           "0): lbstats' reference, run only where cache aware scheduling is active",
           needs=LLC_ACTIVE, where_present=LLC_OFF),
)

# Every switch of the kit's kernel (a machine.KernelNeed name), the file
# under /sys/kernel/debug/sched/ that sets it and its value in the series as
# posted.  Each arm writes every switch this kernel has, its own values over
# these, so that no arm runs in a state another arm, or the user, left.
SWITCHES: Tuple[Tuple[str, str, str], ...] = (
    ("swb_state", "swb_state", "4"),
    ("newidle_cost_pct", "newidle_cost_pct", "100"),
    ("SIS_GROUP_IDLE", "features", "NO_SIS_GROUP_IDLE"),
    ("SG_STATS_REUSE", "features", "NO_SG_STATS_REUSE"),
    (LLC_ACTIVE, "llc_balancing/enabled", "1"),
)
# A comparison needs a spread: fewer rounds are refused, except in the
# rehearsal's guest (it sets REHEARSAL_ENV), which checks the kit, not the
# series.
MIN_ROUNDS = 3
REHEARSAL_ENV = "SCHEDLAB_REHEARSAL"


def arms_here(present: Sequence[str]) -> Tuple[List[KitArm], List[KitArm]]:
    """The arms the kit kernel can run, and those it cannot (what they need
    is not in PRESENT, the names of the KernelNeeds found, with LLC_ACTIVE
    where cache aware scheduling is); the stock kernel's arm is among the
    first, run on that kernel."""
    ok = [a for a in KIT_ARMS if not a.needs or a.needs in present]
    # llc-off is for machines where cache aware scheduling is active: not
    # a piece the kernel lacks elsewhere.
    return ok, [a for a in KIT_ARMS if a not in ok and a.needs != LLC_ACTIVE]


def arm_knobs(arm: KitArm, present: Sequence[str]) -> Tuple[Tuple[str, str], ...]:
    """ARM's writes: its own, and every other switch in PRESENT (SWITCHES'
    names) as the series posts it; the features in one write of several
    words (guest/run-plan.sh writes each)."""
    if arm.kernel == STOCK:         # none of the switches: the tree without the series
        return ()
    own = dict(arm.knobs)
    own.update((k, v) for k, v in arm.where_present
               if any(k == knob and need in present for need, knob, _ in SWITCHES))
    mine = {v.removeprefix("NO_"): v for k, v in arm.knobs if k == "features"}
    knobs: List[Tuple[str, str]] = []
    features: List[str] = []
    for need, knob, value in SWITCHES:
        if knob == "features":
            if need in mine or need in present:
                features.append(mine.get(need, value))
        elif knob in own or need in present:
            knobs.append((knob, own.get(knob, value)))
    return tuple(knobs) + ((("features", " ".join(features)),) if features else ())


def check_rounds(rounds: int) -> None:
    """Refuse fewer than MIN_ROUNDS rounds, but in the rehearsal's guest."""
    if rounds < MIN_ROUNDS and not os.environ.get(REHEARSAL_ENV):
        raise LabError(f"hw: --rounds {rounds}: a comparison needs at least {MIN_ROUNDS} "
                       "rounds (each arm's spread comes from them)")


def patch_pairs(arms: Sequence[KitArm]) -> Tuple[Tuple[str, str], ...]:
    """Each arm against the stock kernel's arm and against the arm of the
    patch before it, where both run: the series against the kernel users
    run, the should_we_balance() topic patch by patch."""
    names = {a.name for a in arms}
    return tuple((a.baseline, a.name) for a in arms if a.baseline in names) + \
        tuple((a.before, a.name) for a in arms if a.before in names)

