"""'ab' arms and pairs; the kselftest verdict."""

import pytest

from schedlab import ab, kselftest
from schedlab.util import LabError


def test_ab_arms_parse_and_pair():
    assert ab.parse_arms(None) == list(ab.DEFAULT_ARMS)
    arms = ab.parse_arms(["base=base", "default=patched",
                          "500us=patched:newidle_min_avg_idle_ns=500000",
                          "never=patched:newidle_min_avg_idle_ns=never"])
    assert arms[2] == ab.Arm("500us", "patched", (("newidle_min_avg_idle_ns", "500000"),))
    pairs = [(a.name, b.name) for a, b in ab.arm_pairs(arms)]
    assert pairs == [("base", "default"), ("base", "500us"), ("base", "never"),
                     ("default", "500us"), ("default", "never")]
    two = ab.parse_arms(["a=base", "b=patched:x=1"])
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
