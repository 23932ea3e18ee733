"""'ab' arms and pairs; the kselftest verdict."""

import pytest

from schedlab.core.util import LabError
from schedlab.measuring import ab
from schedlab.series import kselftest, topics


def test_ab_arms_parse_and_pair():
    assert ab.parse_arms(None) == list(ab.DEFAULT_ARMS)
    arms = ab.parse_arms(["base=base", "default=patched",
                          "x4=patched:newidle_cost_pct=400",
                          "x10=patched:newidle_cost_pct=1000"])
    assert arms[2] == ab.Arm("x4", "patched", (("newidle_cost_pct", "400"),))
    pairs = [(a.name, b.name) for a, b in ab.arm_pairs(arms)]
    assert pairs == [("base", "default"), ("base", "x4"), ("base", "x10"),
                     ("default", "x4"), ("default", "x10")]
    two = ab.parse_arms(["a=base", "b=patched:verbose=1"])
    assert [(a.name, b.name) for a, b in ab.arm_pairs(two)] == [("a", "b")]
    for bad in (["x=nope"], ["x"], ["x=base"], ["x=base", "x=patched"],
                ["a=base", "-b=patched"], ["a=base", "b=patched:novalue"]):
        with pytest.raises(LabError):
            ab.parse_arms(bad)


def test_selftest_verdict():
    tap = "# Totals: pass:3 fail:0 xfail:0 xpass:0 skip:0 error:0\n"
    assert kselftest.verdict(tap, "0") == (True, "3 passed, 0 failed, 0 skipped, 0 errors")
    skipped = "# Totals: pass:0 fail:0 xfail:0 xpass:0 skip:3 error:0\n"
    assert not kselftest.verdict(skipped, "0")[0]
    assert not kselftest.verdict(tap, "1")[0]
    assert "no kselftest totals" in kselftest.verdict("Kernel panic", "")[1]


def test_selftest_report_lines():
    # A failure of v7's test (a run here; CI printed neither the counts
    # nor the failed expectation).
    tap = """TAP version 13
1..1
# Starting 1 tests from 1 test cases.
#  RUN           knob.large_factor_cuts_newidle_balancing ...
# newidle_gate_test.c:270:large_factor_cuts_newidle_balancing:at 100%: 769, at 100000%: 2, at 100% again: 158
# newidle_gate_test.c:283:large_factor_cuts_newidle_balancing:Expected 4 * again (632) > dflt (769)
# large_factor_cuts_newidle_balancing: Test failed
#          FAIL  knob.large_factor_cuts_newidle_balancing
not ok 1 knob.large_factor_cuts_newidle_balancing
# FAILED: 0 / 1 tests passed.
"""
    lines = kselftest.report_lines(tap, "newidle_gate_test")
    assert [line.split(":")[1] if ".c:" in line else line for line in lines] == [
        "270", "283", "# large_factor_cuts_newidle_balancing: Test failed",
        "#          FAIL  knob.large_factor_cuts_newidle_balancing",
        "not ok 1 knob.large_factor_cuts_newidle_balancing"]
    assert kselftest.report_lines(tap, "other_test")[0].endswith("Test failed")
    hung = ("#  RUN           knob.round_trip ...\n"
            "# round_trip: Test terminated by timeout\n"
            "# ERROR SPAWNING TEST CHILD\n"
            "#          FAIL  knob.round_trip\n")
    assert kselftest.report_lines(hung, "newidle_gate_test") == hung.splitlines()[1:]


def test_ab_arms_of_a_topic():
    """--topic NAME: base against the base plus the KUnit series and NAME;
    arms may name topic variants; --topic with --arm is refused."""
    assert ab.parse_arms(None, "swb") == [ab.Arm("base", "base"), ab.Arm("swb", "topic-swb")]
    arms = ab.parse_arms(["ref=topic-kunit", "swb=topic-swb"])
    assert [a.variant for a in arms] == ["topic-kunit", "topic-swb"]
    for bad, topic in ((["a=base", "b=patched"], "swb"), (["a=base", "b=topic-nope"], None)):
        with pytest.raises(LabError):
            ab.parse_arms(bad, topic)


def test_ab_arms_patch_by_patch():
    """--topic swb --per-patch: base, then the topic's first 1, 2, 3 patches;
    each patch compared with base and with the patch before it (its own
    effect); --per-patch without --topic is refused."""
    arms = ab.parse_arms(None, "swb", per_patch=True)
    swb = topics.get_topic("swb")
    n = swb.last - swb.first + 1
    assert n >= 3
    names = [f"swb.{k}" for k in range(1, n)] + ["swb"]
    assert [(a.name, a.variant) for a in arms] == [("base", "base")] + [
        (f"swb.{k}", f"topic-swb@{k}") for k in range(1, n)] + [("swb", "topic-swb")]
    pairs = [(a.name, b.name) for a, b in ab.arm_pairs(arms)]
    assert pairs == [("base", x) for x in names] + list(zip(names, names[1:]))
    assert ab.parse_arms(None, "newidle", per_patch=True) == [
        ab.Arm("base", "base"), ab.Arm("newidle", "topic-newidle")]
    with pytest.raises(LabError, match="needs --topic"):
        ab.parse_arms(None, None, per_patch=True)


def test_the_arms_are_shuffled_every_round_with_the_seed_recorded():
    from schedlab.measuring import ab, plan as planmod
    arms = tuple(ab.Arm(n, "host") for n in ("a", "b", "c", "d", "e"))
    plan = planmod.make_plan("stress-100", "", runs=1, seconds=5)
    req = ab.AbRequest(None, plan, "host", arms, "hw", boots=4, host=True, order_seed=7)
    units = req.units()
    rounds = [[a.name for b, a in units if b == r] for r in range(4)]
    assert all(sorted(r) == ["a", "b", "c", "d", "e"] for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1         # not one order every round
    assert rounds == ab.round_orders(["a", "b", "c", "d", "e"], 7, 4)
    assert ab.round_orders(["a", "b", "c", "d", "e"], 8, 4) != rounds
    assert req.record()["order_seed"] == 7
    plain = ab.AbRequest(None, plan, "host", arms, "hw", boots=2, host=True)
    assert [(b, a.name) for b, a in plain.units()] == [
        (b, n) for b in range(2) for n in "abcde"]
