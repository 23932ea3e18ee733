"""The lines probe's proof: which programs a topology holds, and how their
counts are checked (measuring/lineproof.py)."""

import pytest

from schedlab.core import topology as topomod
from schedlab.core.util import LabError
from schedlab.measuring import linecount as lc
from schedlab.measuring import lineproof as lp


def _call(vcpu, **counts):
    base = {f: 0 for f in lc.FIELDS}
    base.update(counts)
    return lc.Call(0, -1, vcpu, 1, base)


def test_the_default_topologies_reach_every_distance():
    dists = {p.distance for t in lp.TOPOLOGIES
             for p in lp.proofs(topomod.parse_topology(t)) if p.mode == "pingpong"}
    assert dists == set(lc.DISTANCES)
    numa = lp.proofs(topomod.PRESETS["smt4-numa"])
    assert [p.cpus for p in numa if p.mode == "pingpong"] == [(0, 1), (0, 4), (0, 8)]
    assert {p.mode for p in numa} == {"pingpong", "own", "false", "padded", "atomic"}
    # The main thread waits on a CPU of neither thread (the plugin counts by vCPU).
    assert [p.args(100) for p in numa][:2] == ["100 0 1 15", "100 0 4 15"]
    assert lp.proofs(topomod.parse_topology("2x1x1"))[0].args(10) == "10 0 1"
    # Two sockets without NUMA: two LLCs of one node.
    assert [p.distance for p in lp.proofs(topomod.parse_topology("2x1x1"))] == [
        "xllc", "", "xllc", "xllc", "xllc"]


def test_a_ping_pong_passes_within_the_slack_only():
    p = lp.Proof("pingpong llc", "pingpong", (0, 4), "llc", lines=2)
    ok = lp.check(p, 100, [_call(0, xfer_llc=99, inval_llc=99),
                           _call(4, xfer_llc=101, inval_llc=100, xfer_smt=1)])
    assert ok.passed, ok.problems
    assert ok.expected["xfer_llc"] == 200 and ok.counts["xfer_llc"] == 200
    short = lp.check(p, 100, [_call(0, xfer_llc=90, inval_llc=99),
                              _call(4, xfer_llc=100, inval_llc=100)])
    assert short.problems == ["xfer_llc 190, expected 200 (+-3)"]
    wrong_place = lp.check(p, 100, [_call(0, xfer_node=100, inval_llc=100),
                                    _call(4, xfer_llc=100, inval_llc=100)])
    assert not wrong_place.passed
    assert lp.check(p, 100, [_call(0, xfer_llc=200, inval_llc=200)]).problems == [
        "1 call(s) counted, 2 expected"]


def test_own_lines_must_move_nothing_at_all_once_warm():
    p = lp.Proof("own lines", "own", (0,), "", warm=True)
    # The first call meets what the thread's start left elsewhere.
    assert lp.check(p, 1000, [_call(0, xfer_smt=1), _call(0)]).passed
    assert lp.check(p, 1000, [_call(0), _call(0, xfer_smt=1)]).problems == [
        "xfer_smt 1, expected 0"]
    assert lp.check(p, 1000, [_call(0, xfer_node=4), _call(0)]).problems == [
        "the warm-up call moved 4 lines, more than 3"]
    assert lp.check(p, 1000, [_call(0)]).problems == ["1 call(s) counted, 2 expected"]


def test_the_atomic_counter_makes_two_atomics_a_round_a_thread_exactly():
    p = lp.Proof("atomic counter smt", "atomic", (0, 1), "smt", lines=None, atomics=2)
    # Its threads run free: what lines they move is not checked.
    assert lp.check(p, 50, [_call(0, atomics=100, xfer_smt=7),
                            _call(1, atomics=100, inval_smt=5)]).passed
    off = lp.check(p, 50, [_call(0, atomics=100), _call(1, atomics=99)])
    assert off.problems == ["atomics 199, expected 200"]


def test_bad_requests_are_refused_before_any_build():
    req = lp.ProofRequest(None, ("smt4",), 5, None)
    with pytest.raises(LabError, match="at least 10"):
        req.checked()
    for topo, why in (("4x4x8", "at most 64"), ("1x1x1", "one CPU")):
        with pytest.raises(LabError, match=why):
            lp.ProofRequest(None, (topo,), 100, None).checked()
    assert [t.cpus for t in lp.ProofRequest(None, lp.TOPOLOGIES, 100, None).checked()] == [
        16, 8]
