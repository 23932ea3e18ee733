"""The lines probe: the coherence directory on recorded traces (cohreplay),
the plugin's options, its records as metrics, and the runner's window."""

import json
import subprocess
from pathlib import Path

import pytest
from test_plan import _run_plan

from schedlab.core import topology as topomod
from schedlab.core.util import LabError
from schedlab.measuring import linecount as lc
from schedlab.measuring import parsers
from schedlab.measuring import plan as planmod
from schedlab.measuring import probes as probemod
from schedlab.measuring import results as resmod
from schedlab.measuring import workloads as workmod

# vCPUs 0,1 one core; 2,3 another core of the same LLC; 4 another LLC of
# node 0; 5 node 1.
PLACES = "P 0 0 0 0\nP 1 0 0 0\nP 2 1 0 0\nP 3 1 0 0\nP 4 2 1 0\nP 5 3 2 1\n"


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    return lc.replay_tool(tmp_path_factory.mktemp("tools") / "cohreplay")


def play(replay, events: str):
    """The calls' records and totals of a trace."""
    proc = subprocess.run([str(replay)], input=PLACES + events, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return lc.parse_records(proc.stdout)


def one(replay, events: str) -> dict:
    calls, _ = play(replay, events)
    assert len(calls) == 1, calls
    return calls[0].counts


def test_a_ping_pong_moves_two_lines_a_round_trip(replay):
    # vCPU 0 in a call, vCPU 2 (same LLC, other core) bouncing line 7.
    rounds = 5
    ev = "S 0 7\nE 0 0 -1 1000\nE 2 0 -1 2000\n"
    for _ in range(rounds):
        ev += "L 2 7\nS 2 7\nL 0 7\nS 0 7\n"
    ev += "R 0 1000\nR 2 2000\n"
    calls, totals = play(replay, ev)
    a, b = (c.counts for c in sorted(calls, key=lambda c: c.vcpu))
    # Each side: a load of the line the other wrote, and a store that
    # takes it from the other, every round (vCPU 2's first load too).
    assert (b["xfer_llc"], b["inval_llc"]) == (rounds, rounds)
    assert (a["xfer_llc"], a["inval_llc"]) == (rounds, rounds)
    assert sum(a[f"xfer_{d}"] + b[f"xfer_{d}"] for d in ("smt", "xllc", "node")) == 0
    assert totals["calls"] == 2 and totals["lost"] == 0


def test_own_lines_move_nothing(replay):
    ev = "S 1 3\nS 1 4\nE 1 0 -1 500\n" + "L 1 3\nL 1 4\n" * 10 + "S 1 3\nR 1 500\n"
    c = one(replay, ev)
    assert c["loads"] == 20 and c["stores"] == 1 and c["lines"] == 2
    assert all(c[f"xfer_{d}"] == 0 and c[f"inval_{d}"] == 0 for d in lc.DISTANCES)


def test_a_line_held_again_after_a_remote_read_only_moves_once(replay):
    # vCPU 1 reads what 0 wrote; reading it again is a hit, and 0's own
    # reads of its line are hits though 1 holds a copy.
    c = one(replay, "S 0 9\nE 1 0 -1 8\nL 1 9\nL 1 9\nL 0 9\nR 1 8\n")
    assert c["xfer_smt"] == 1 and c["loads"] == 2


def test_a_load_of_a_line_nobody_wrote_is_cold(replay):
    c = one(replay, "E 0 0 -1 8\nL 0 42\nR 0 8\n")
    assert c["cold"] == 1 and sum(c[f"xfer_{d}"] for d in lc.DISTANCES) == 0


def test_distance_follows_the_topology(replay):
    for other, dist in ((1, "smt"), (2, "llc"), (4, "xllc"), (5, "node")):
        c = one(replay, f"S {other} 5\nE 0 0 -1 8\nL 0 5\nR 0 8\n")
        assert c[f"xfer_{dist}"] == 1, (other, c)
        assert sum(c[f"xfer_{d}"] for d in lc.DISTANCES) == 1


def test_an_invalidation_is_classed_by_the_farthest_holder(replay):
    # Line 6 held by 0, 1 and 5: 1's store invalidates two copies, the
    # farthest on another node.
    c = one(replay, "S 0 6\nL 5 6\nE 1 0 -1 8\nL 1 6\nS 1 6\nR 1 8\n")
    assert c["inval_node"] == 1 and c["copies"] == 2 and c["inval_smt"] == 0
    # A store to a line only this vCPU holds invalidates nothing.
    c = one(replay, "E 3 0 -1 8\nS 3 11\nS 3 11\nR 3 8\n")
    assert c["copies"] == 0 and sum(c[f"inval_{d}"] for d in lc.DISTANCES) == 0


def test_atomics_and_apart_accesses_are_counted_for_themselves(replay):
    c = one(replay, "E 0 0 -1 8\nL 0 1 \nS 0 1 atomic\nL 0 2 apart\nS 0 2 apart\nR 0 8\n")
    assert c["atomics"] == 1 and c["stores"] == 1 and c["loads"] == 1 and c["apart"] == 2
    assert c["lines"] == 1


def test_calls_nest_and_count_their_callees(replay):
    ev = ("E 0 1 2 1000\nI 0 10\nL 0 1\nE 0 2 2 900\nI 0 5\nS 1 3\nL 0 3\nR 0 900\n"
          "I 0 3\nR 0 1000\n")
    calls, _ = play(replay, ev)
    inner, outer = calls
    assert (inner.func, inner.key, inner.counts["insns"]) == (2, 2, 5)
    assert (outer.func, outer.counts["insns"], outer.counts["loads"]) == (1, 18, 2)
    assert inner.counts["xfer_smt"] == outer.counts["xfer_smt"] == 1


def test_a_return_past_a_frame_loses_it_and_another_stack_closes_nothing(replay):
    # The frame at 900 never returns; the return to 1000 closes both.
    calls, totals = play(replay, "E 0 1 -1 1000\nE 0 2 -1 900\nR 0 1000\n")
    assert [c.func for c in calls] == [1] and totals["lost"] == 1
    # A return on a stack far above (an interrupt's) closes nothing.
    calls, totals = play(replay, "E 0 1 -1 1000\nR 0 9000000\nR 0 1000\n")
    assert len(calls) == 1 and totals["lost"] == 0
    # A return below the frame (a callee's) closes nothing either.
    calls, _ = play(replay, "E 0 1 -1 1000\nR 0 992\n")
    assert calls == []


def test_a_tail_call_returns_with_its_caller(replay):
    # update_sd_lb_stats() jumps to its reuse instance: one slot, both close.
    calls, totals = play(replay, "E 0 4 -1 1000\nE 0 2 -1 900\nE 0 3 -1 900\nR 0 900\n"
                                 "R 0 1000\n")
    assert [c.func for c in calls] == [3, 2, 4] and totals["lost"] == 0


def test_a_locked_read_modify_write_is_one_request(replay):
    # vCPU 1 takes the line vCPU 0 wrote with a locked add: one
    # invalidation, no fetch beside it; a plain load and store is two.
    c = one(replay, "S 0 5\nE 1 0 -1 8\nL 1 5 atomic\nS 1 5 atomic\nR 1 8\n")
    assert (c["xfer_smt"], c["inval_smt"], c["atomics"]) == (0, 1, 1)
    c = one(replay, "S 0 5\nE 1 0 -1 8\nL 1 5\nS 1 5\nR 1 8\n")
    assert (c["xfer_smt"], c["inval_smt"]) == (1, 1)


def test_a_user_call_counts_no_kernel_access_and_no_kernel_instruction(replay):
    c = one(replay, "E 0 0 -1 8 user\nI 0 4 user\nI 0 100\nL 0 1 user\nS 2 1\n"
                    "L 0 1\nL 0 1 user\nR 0 8\n")
    assert c["insns"] == 4 and c["loads"] == 2 and c["xfer_llc"] == 0


def test_a_mark_stored_inside_a_keyed_call_keys_it(replay):
    # sched_balance_rq() stores its mark after its own entry: it and the
    # calls after the mark are keyed by it; a call not keyed stays so.
    calls, _ = play(replay, "E 0 1 -2 1000\nK 0 9\nE 0 2 9 900\nR 0 900\nR 0 1000\n"
                            "E 0 3 -1 800\nK 0 4\nR 0 800\n")
    assert [(c.func, c.key) for c in calls] == [(2, 9), (1, 9), (3, -1)]


def test_records_carry_the_epoch(replay):
    calls, totals = play(replay, "M\nE 0 0 -1 8\nR 0 8\nM\nM\nE 1 0 -1 8\nR 1 8\n")
    assert [c.epoch for c in calls] == [1, 3] and totals["epochs"] == 3


@pytest.mark.parametrize("hexbytes,kind", [
    ("f0 48 0f c1 07", "atomic"),        # lock xadd
    ("f0 0f b1 17", "atomic"),           # lock cmpxchg
    ("48 87 07", "atomic"),              # xchg with memory: locked without a prefix
    ("48 87 c7", ""),                    # xchg of two registers
    ("0f b1 17", ""),                    # cmpxchg without lock (this_cpu_cmpxchg)
    ("e8 00 00 00 00", "call"),
    ("ff d0", "call"),                   # call *%rax
    ("ff 15 00 00 00 00", "call"),       # call *mem
    ("ff e0", ""),                       # jmp *%rax
    ("2e e8 00 00 00 00", "call"),       # a prefixed call (retpoline thunks)
    ("c3", "ret"), ("f3 c3", "ret"), ("c2 08 00", "ret"),
    ("f3 0f 1e fa", ""),                 # endbr64
    ("48 89 07", ""),                    # a plain store
])
def test_an_instructions_kind_comes_from_its_bytes(replay, hexbytes, kind):
    proc = subprocess.run([str(replay)], input=f"X {hexbytes}\n", capture_output=True,
                          text=True, check=True)
    got = int(proc.stdout.split()[1])
    assert {"": 0, "call": 1, "ret": 2, "atomic": 4}[kind] == got


def test_a_bad_event_is_refused(replay):
    proc = subprocess.run([str(replay)], input=PLACES + "L 9 1\n", capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2 and "bad event" in proc.stderr


def test_the_plugin_and_the_proof_program_compile_warning_free(tmp_path):
    so = lc.plugin(tmp_path / "linecount.so")
    syms = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True,
                          text=True, check=True).stdout
    assert "qemu_plugin_install" in syms and "qemu_plugin_version" in syms
    proof = lc.proof_program(tmp_path / "cohproof")
    s = lc.symbols(proof)
    assert s["lines_mark"][0] >= lc.PROOF_TEXT and "proof_pingpong" in s
    out = subprocess.run([str(proof), "atomic", "100", "0", "0"], capture_output=True,
                         text=True, check=True).stdout
    assert "counter 200" in out


def test_places_are_cores_sockets_and_nodes():
    t = topomod.PRESETS["smt4-numa"]
    p = lc.places(t)
    assert p[0] == (0, 0, 0) and p[3] == (0, 0, 0) and p[4] == (1, 0, 0)
    assert p[8] == (2, 1, 1) and len(p) == 16
    assert lc.places(topomod.Topology(2, 1, 2))[2] == (1, 1, 0)   # no NUMA: one node


def test_qemu_options_name_the_functions_and_the_markers(tmp_path):
    c = lc.Counted(((0xffffffff81000000, "should_we_balance", True),
                    (0xffffffff81000100, "select_task_rq_fair", False)),
                   (0xffffffff83000000, 256 * 64), 0x30001000,
                   (0xffffffff84000000, lc.APART_END))
    o = lc.qemu_opts(Path("/p/linecount.so"), c, Path("/t"), Path("/o"))
    assert o == ("-plugin /p/linecount.so,func=ffffffff81000000:0:L,"
                 "func=ffffffff81000100:1,level=ffffffff83000000:4000,mark=30001000,"
                 "apart=ffffffff84000000:ffffffffff000000,topo=/t,out=/o")
    with pytest.raises(LabError, match="functions"):
        lc.qemu_opts(Path("/p"), lc.Counted(()), Path("/t"), Path("/o"))


def test_records_summarize_into_each_runs_window(tmp_path):
    raw = tmp_path / "raw"
    for name, epoch in (("stress-100-0", 1), ("stress-100-1", 3)):
        (raw / name).mkdir(parents=True)
        (raw / name / lc.EPOCH).write_text(f"{epoch}\n")
    (raw / "domains.txt").write_text("0 SMT\n2 MC\n")
    rec = raw / lc.RECORDS
    z = " 0" * 4
    rec.write_text(
        "0 8 1 1 100 10 2 0 5 1 0 0 0" + z + " 0 0 0\n"      # MC, busy: 1 line moved
        "0 10 3 1 300 30 2 0 9 2 1 0 0 1 0 0 0 1 0 0\n"      # MC, newidle: 4
        "1 1 1 1 50 5 0 0 3+" + z + z + " 0 0 0\n"           # SMT, idle; lines saturated
        "0 8 1 2 999 9 9 9 9" + z + z + " 0 0 0\n"            # between the windows
        "# calls 4 lost 1 deep 0 epochs 4 skipped 0\n")
    counted = lc.Counted(((1, "should_we_balance", True), (2, "should_we_balance.cold", True)))
    assert lc.summarize(raw, rec, counted) == 2
    data = json.loads((raw / "stress-100-0" / lc.OUT).read_text())
    swb = data["functions"]["should_we_balance"]
    assert swb["MC"]["calls"] == 2 and swb["MC"]["transfers"] == {"mean": 2.5, "median": 2.5}
    assert swb["MC"]["transfers llc"]["mean"] == 0.5 and swb["SMT"]["full"] == 1
    assert swb["MC, busy"]["calls"] == 1 and swb["MC, newidle"]["transfers"]["mean"] == 4
    assert swb["SMT, idle"]["calls"] == 1
    assert data["plugin"]["lost"] == 1
    m = lc.metric_values(data)
    assert m["should_we_balance lines moved per call, mean (MC)"] == (2.5, "lines")
    assert m["should_we_balance calls (lines) (SMT)"] == (1.0, "calls")
    empty = json.loads((raw / "stress-100-1" / lc.OUT).read_text())
    assert empty["functions"] == {}


def test_the_lines_probe_is_alone_clean_and_under_icount(tmp_path):
    with pytest.raises(LabError, match="runs alone"):
        probemod.probe_names("lines,swb")
    with pytest.raises(LabError, match="--accel icount"):
        planmod.make_plan("stress-100", "lines")
    plan = planmod.make_plan("stress-100", "lines", accel="icount")
    assert plan.clean and "bpftrace" not in plan.needs()
    env = (planmod.write(plan, tmp_path / "plan") / "plan.env").read_text()
    assert "CLEAN=1\n" in env and "LINES_MARK=" in env and "cohproof" in env
    other = planmod.write(planmod.make_plan("stress-100", probemod.NO_PROBES), tmp_path / "o")
    assert "LINES_MARK=''\n" in (other / "plan.env").read_text()


def _lines_plan(tmp_path, marker_script: str):
    """A two-run plan of the lines probe whose marker is MARKER_SCRIPT."""
    w = workmod.Workload("fake", "echo Time: 1.5", parsers.hackbench, (), "a fake workload",
                         timed=False)
    plan = planmod.Plan((w,), ("lines",), runs=2, seconds=1, accel="icount")
    d = planmod.write(plan, tmp_path / "plan")
    marker = tmp_path / "mark.sh"
    marker.write_text(marker_script)
    marker.chmod(0o755)
    return plan, d, marker


def test_the_runner_marks_each_window_and_the_run_reads_its_lines(tmp_path, monkeypatch):
    marks = tmp_path / "marks"
    plan, d, marker = _lines_plan(tmp_path, f"#!/bin/sh\necho \"$1\" >> {marks}\n")
    tracefs = tmp_path / "tracing"
    tracefs.mkdir()
    (tracefs / "current_tracer").write_text("nop\n")
    (tracefs / "set_event").write_text("")
    env = (d / "plan.env").read_text()
    for old, new in ((planmod.TRACEFS, tracefs), (planmod.KPROBES_LIST, tmp_path / "kprobes"),
                     (str(lc.proof_program()), marker), (planmod.KNOB_DIR, tmp_path / "sched")):
        env = env.replace(str(old), str(new))
    (d / "plan.env").write_text(env)
    (tmp_path / "kprobes").write_text("")
    (tmp_path / "sched").mkdir()
    (tmp_path / "sched" / "verbose").write_text("N\n")
    for lvl, name in ((0, "SMT"), (2, "MC")):
        dom = tmp_path / "sched" / "domains" / "cpu0" / f"domain{lvl // 2}"
        dom.mkdir(parents=True)
        (dom / "level").write_text(f"{lvl}\n")
        (dom / "name").write_text(f"{name}\n")
    out, proc = _run_plan(tmp_path, d)
    assert proc.returncode == 0, proc.stderr
    assert marks.read_text() == "mark\n" * 4
    assert (out / "fake-0" / lc.EPOCH).read_text() == "1\n"
    assert (out / "fake-1" / lc.EPOCH).read_text() == "3\n"
    assert (out / "domains.txt").read_text() == "0 SMT\n2 MC\n"
    # sched/verbose, which makes debugfs list the domains, as it was.
    assert (tmp_path / "sched" / "verbose").read_text() == "N\n"
    assert (out / "probes-used.txt").read_text() == "lines\n"
    z = " 0" * 4
    (out / lc.RECORDS).write_text("0 8 1 1 100 10 2 0 5 1 0 0 0" + z + " 0 0 0\n")
    assert lc.summarize(out, out / lc.RECORDS,
                        lc.Counted(((1, "should_we_balance", True),))) == 2
    monkeypatch.setattr(resmod, "results_dir", lambda label: tmp_path / "results" / label)
    first, second = resmod.collect("x", out, plan.workloads, 2, resmod.Setting(topology="t"),
                                   "icount")
    assert first.complete, first.problems
    assert first.notes == []
    assert first.metrics["should_we_balance lines moved per call, mean (MC)"]["value"] == 1
    assert first.metrics["should_we_balance lines moved per call, mean (MC, busy)"]["value"] == 1
    assert not second.complete and "no counted call" in " ".join(second.problems)


def test_the_estimate_allows_for_the_plugin():
    from schedlab.measuring import measure
    plain = planmod.make_plan("stress-100", probemod.NO_PROBES, runs=2, seconds=5,
                              accel="icount")
    lines = planmod.make_plan("stress-100", "lines", runs=2, seconds=5, accel="icount")
    assert measure.estimate_seconds(lines) == 3 * measure.estimate_seconds(plain)


def test_a_qemu_that_refuses_version_1_plugins_is_named_before_any_build(monkeypatch):
    monkeypatch.setattr(lc, "qemu_version", lambda: (9, 2))
    with pytest.raises(LabError, match="qemu 9.2 loads only plugins of API version 2"):
        lc.check_request("smt8")
    monkeypatch.setattr(lc, "qemu_version", lambda: None)
    with pytest.raises(LabError, match="needs qemu-system-x86_64"):
        lc.check_request("smt8")
    monkeypatch.setattr(lc, "qemu_version", lambda: (7, 2))
    assert lc.check_request("smt8-64").cpus == 64


def test_the_notes_say_what_the_counts_may_miss():
    from schedlab.measuring.probe_parsers import Parsed
    row = {"calls": 2, "full": 1, "transfers": {"mean": 1.0, "median": 1.0}}
    data = {"epoch": 1, "plugin": {"lost": 3},
            "functions": {"should_we_balance": {"MC": row, "MC, busy": row}}}
    p = Parsed({}, 5.0, "", lines_out=json.dumps(data))
    lc.parse_probe(p)
    assert p.problems == []
    assert any("3 call(s) of the whole boot" in n for n in p.notes)
    assert any(n.startswith("lines: 1 call(s) of the window touched more") for n in p.notes)
    empty = Parsed({}, 5.0, "", lines_out="")
    lc.parse_probe(empty)
    assert "no lines.json" in empty.problems[0]


def test_a_failed_marker_moves_no_epoch_and_spoils_its_run(tmp_path):
    # The marker fails its first call only.
    _, d, marker = _lines_plan(tmp_path, f"#!/bin/sh\n[ -e {tmp_path}/once ] && exit 0\n"
                                         f": > {tmp_path}/once\nexit 1\n")
    env = (d / "plan.env").read_text().replace(str(lc.proof_program()), str(marker))
    for old, new in ((planmod.TRACEFS, tmp_path), (planmod.KPROBES_LIST, tmp_path / "kp"),
                     (planmod.KNOB_DIR, tmp_path / "sched")):
        env = env.replace(str(old), str(new))
    (d / "plan.env").write_text(env)
    out, proc = _run_plan(tmp_path, d)
    assert proc.returncode == 0, proc.stderr
    assert not (out / "fake-0" / lc.EPOCH).exists()
    assert "marker failed at the window's open" in (out / "fake-0" / "problems.txt").read_text()
    assert (out / "fake-1" / lc.EPOCH).read_text() == "2\n"


def test_a_build_without_the_marker_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(lc, "symbols", lambda b: {"should_we_balance": (0xffffffff81000000, 9),
                                                 "_end": (0xffffffff83000000, 0)})
    monkeypatch.setattr(lc, "run", lambda *a, **k: type("R", (), {"stdout": ""})())
    with pytest.raises(LabError, match="no sched_lab_level_mark"):
        lc.kernel_counted(tmp_path / "vmlinux", 0)
