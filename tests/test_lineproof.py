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


def test_the_idle_cpu_checks_reach_every_distance_and_the_cpu_itself():
    numa = lp.idle_checks(topomod.PRESETS["smt4-numa"])
    assert [(c.target, c.task, c.distance) for c in numa] == [
        (1, "sleep", "smt"), (4, "sleep", "llc"), (8, "sleep", "node"),
        (1, "spin", "smt"), (0, "none", "")]
    assert numa[0].line() == f"idle {lp.IDLE_CALLS} 0 1 sleep"


def _idle(n, **counts):
    return [_call(0, **counts) for _ in range(n)]


def test_a_switching_cpu_must_cost_a_line_at_its_distance_nine_calls_in_ten():
    chk = lp.IdleCheck("switching", 0, 4, "sleep", "llc")
    assert lp.check_idle(chk, _idle(lp.IDLE_CALLS, xfer_llc=1)).passed
    least = lp.IDLE_CALLS - lp.IDLE_CALLS // 10
    # A call in ten may find the line still here; one more fails it, as
    # does the wrong distance.
    ok = _idle(least, xfer_llc=1) + _idle(lp.IDLE_CALLS - least)
    assert lp.check_idle(chk, ok).passed
    short = _idle(least - 1, xfer_llc=1) + _idle(lp.IDLE_CALLS - least + 1)
    assert lp.check_idle(chk, short).problems == [
        f"{least - 1} call(s) fetched a line at llc, at least {least} expected"]
    assert not lp.check_idle(chk, _idle(lp.IDLE_CALLS, xfer_node=1)).passed
    assert lp.check_idle(chk, _idle(3, xfer_llc=1)).problems == [
        f"3 call(s) counted, {lp.IDLE_CALLS} expected",
        f"3 call(s) fetched a line at llc, at least {least} expected"]


def test_a_cpu_checking_itself_moves_a_line_in_at_most_one_call_in_ten():
    chk = lp.IdleCheck("itself", 0, 0, "none", "")
    most = lp.IDLE_CALLS // 10
    quiet = _idle(lp.IDLE_CALLS - most) + _idle(most, xfer_smt=1)
    assert lp.check_idle(chk, quiet).passed
    noisy = _idle(lp.IDLE_CALLS - most - 1) + _idle(most + 1, inval_llc=1)
    assert lp.check_idle(chk, noisy).problems == [
        f"{most + 1} call(s) moved a line, at most {most} expected"]
    # A spinning target is reported, not checked.
    spin = lp.IdleCheck("spinning", 0, 1, "spin", "smt")
    out = lp.check_idle(spin, _idle(lp.IDLE_CALLS))
    assert out.passed and out.counts["calls moving a line"] == 0


def test_a_kernel_without_the_check_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(lc, "symbols", lambda _: {"idle_cpu": (0x10, 8)})
    with pytest.raises(LabError, match="0 symbols sched_lab_idle_cpu"):
        lp.idle_entry(tmp_path / "vmlinux")
    monkeypatch.setattr(lc, "symbols", lambda _: {"sched_lab_idle_cpu.isra.0": (0x20, 8)})
    assert lp.idle_entry(tmp_path / "vmlinux") == (0x20, "sched_lab_idle_cpu.isra.0", False)


def test_one_boot_runs_without_kaslr_and_gives_the_kernel_calls_to_the_checks(
        monkeypatch, tmp_path):
    topo = topomod.parse_topology("2x1x1")
    plist, checks = lp.proofs(topo), lp.idle_checks(topo)
    user = {f"proof_{p.mode}": (0x1000 + 0x100 * i, 8) for i, p in enumerate(plist)}
    user["lines_mark"] = (0x2000, 8)
    monkeypatch.setattr(lc, "proof_program", lambda: tmp_path / "cohproof")
    monkeypatch.setattr(lc, "plugin", lambda: tmp_path / "linecount.so")
    monkeypatch.setattr(lc, "symbols", lambda b: (
        user if b.name == "cohproof" else {"sched_lab_idle_cpu": (0xffffffff81000000, 8)}))
    seen = {}

    def boot(image, topo_, cmd, **kw):
        seen.update(kw)
        counted = sorted(set(user[f"proof_{p.mode}"][0] for p in plist)) + [0xffffffff81000000]
        kernel = counted.index(0xffffffff81000000)
        zero = " ".join("0" * len(lc.FIELDS))
        rows = [f"{kernel} -1 0 {len(plist) + k + 1} {zero}"
                for k in range(len(checks)) for _ in range(lp.IDLE_CALLS)]
        (tmp_path / lc.RECORDS).write_text("\n".join(rows) + "\n")
        return lp.vm.VmResult(0, "", "tcg", 1.0)

    monkeypatch.setattr(lp.vm, "boot", boot)
    req = lp.ProofRequest(None, ("2x1x1",), 10, tmp_path)
    out = lp.run_one(req, tmp_path / "bzImage", tmp_path / "vmlinux", topo, tmp_path)
    assert seen["kernel_args"] == lc.KERNEL_ARGS and "nokaslr" in lc.KERNEL_ARGS
    idle = {o.proof: o for o in out[len(plist):]}
    assert [o.counts["calls"] for o in idle.values()] == [lp.IDLE_CALLS] * len(checks)
    # No line moved: the switching CPU's check fails, the CPU's own passes.
    assert not idle["idle_cpu() of a switching CPU, xllc"].passed
    assert idle["idle_cpu() of itself"].passed
