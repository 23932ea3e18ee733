"""Instruction counts under icount: the calibration and the cost probes."""

from pathlib import Path

from schedlab.core import topology, vm
from schedlab.measuring import icount, parsers
from schedlab.measuring import probes as probemod

DATA = Path(__file__).parent / "data"


def test_paths_of_idle_cpu_from_its_disassembly():
    insns = icount.parse_objdump((DATA / "objdump-idle_cpu.txt").read_text())
    assert insns[0][1] == "endbr64" and insns[-1][1] == "xchg"   # stops at the next symbol
    # After the fentry call, where the trampoline enters: not idle 9, idle 12,
    # with the return-thunk jmp patched into a ret; one more each through the thunk.
    assert icount.path_lengths(insns) == [9, 12]
    assert icount.path_lengths(insns, rethunk=True) == [10, 13]
    assert not icount.rethunk("Not affected\n") and icount.rethunk("Mitigation: untrained return thunk")


def test_a_loop_gives_no_paths():
    loop = [(0, "nop", ""), (1, "jne", "0 <f>"), (2, "ret", "")]
    assert icount.path_lengths(loop) == []


def _lhist(prefix, key, values):
    return "".join(f"@{prefix}_d[{key}, {v}]: {c}\n" for v, c in sorted(values.items()))


def test_calibration_finds_the_overhead_and_checks_one_ns_per_instruction():
    # As measured on smt4: the probe's own cost is 611 or 612 with the caller;
    # returning 0 mostly on the 9-instruction path, 1 on the 12-instruction one.
    out = (_lhist("cal", 0, {620: 358, 621: 1751, 623: 692, 624: 944, 700: 3})
           + _lhist("cal", 1, {623: 17465, 624: 4419}))
    cal = icount.calibrate(out, [9, 12])
    assert cal.modes == [620, 623] and cal.overhead == 611 and cal.calls == 25632
    assert "3 ns above" in cal.check and "holds" in cal.check
    off = icount.calibrate(_lhist("cal", 0, {512: 9}) + _lhist("cal", 1, {514: 4}), [9, 12])
    assert "THEY DIFFER" in off.check
    # Contexts differ between the two keys: a pair of peaks shows the paths'
    # difference even though the lowest two do not (seen in a CI run).
    mixed = icount.calibrate(_lhist("cal", 0, {621: 9, 623: 9, 624: 9})
                             + _lhist("cal", 1, {623: 5, 624: 5}), [9, 12])
    assert "holds for the peaks at 621 and 624" in mixed.check and mixed.overhead == 612
    wide = icount.calibrate(_lhist("cal", 0, {621: 9, 622: 9}) + _lhist("cal", 1, {627: 9}),
                            [9, 12])
    assert "THEY DIFFER" in wide.check
    assert "not checked" in icount.calibrate(_lhist("cal", 0, {512: 9}), [9, 12]).check
    assert icount.calibrate("", [9, 12]) is None


def test_cost_probe_metrics_per_level_less_the_overhead():
    text = ("Attaching 3 probes...\n@swbc_calls[0]: 11\n@swbc_calls[2]: 4\n"
            "@swbc_long[2]: 1\n@swbc_n[0]: 10\n@swbc_n[2]: 3\n"
            "@swbc_name[0]: SMT\n@swbc_name[2]: MC\n"
            + _lhist("swbc", 0, {700: 4, 780: 6}) + _lhist("swbc", 2, {1500: 3}))
    p = probemod.Parsed(parsers.bpftrace_maps(text), 3.0, text, overhead=500.0)
    probemod.PROBES["swb-cost"].parse(p)
    m = p.metrics
    assert m["should_we_balance instructions per call, median (SMT)"].value == 280
    assert m["should_we_balance instructions per call, mean (SMT)"].value == 248
    assert m["should_we_balance instructions per call, median (MC)"].value == 1000
    assert m["should_we_balance calls over 6000 instructions (interrupted or straddling "
             "a vCPU switch) (MC)"].value == 1
    assert m["should_we_balance calls lost to nesting (SMT)"].value == 1
    assert m["should_we_balance calls (MC)"].value == 4 and not p.problems
    # sched_balance_rq() has five arguments: four more restored than idle_cpu().
    lb = ("@lbc_calls[0]: 1\n@lbc_n[0]: 1\n@lbc_name[0]: SMT\n" + _lhist("lbc", 0, {5500: 1}))
    q = probemod.Parsed(parsers.bpftrace_maps(lb), 3.0, lb, overhead=500.0)
    probemod.PROBES["lb-cost"].parse(q)
    assert q.metrics["sched_balance_rq instructions per call, median (SMT)"].value == 5008   # bucket middle, 25 wide
    r = probemod.Parsed(parsers.bpftrace_maps(text), 3.0, text, overhead=None)
    probemod.PROBES["swb-cost"].parse(r)
    assert r.problems and "should_we_balance instructions per call, median (SMT)" not in r.metrics


def test_wake_path_keys_calls_by_where_the_task_goes():
    # Keyed by prev_cpu at entry (3 calls from prev 1, 2 from prev 5), by the
    # path at exit: 2 (to its previous cpu) and 1 (to the waker's cpu).
    text = ("@wkp_calls[1]: 3\n@wkp_calls[5]: 2\n@wkp_n[2]: 3\n@wkp_n[1]: 1\n"
            "@wkp_long[1]: 1\n" + _lhist("wkp", 2, {830: 3}) + _lhist("wkp", 1, {900: 1}))
    p = probemod.Parsed(parsers.bpftrace_maps(text), 3.0, text, overhead=611.0)
    probemod.PROBES["wake-path"].parse(p)
    m, f = p.metrics, "select_task_rq_fair"
    assert m[f"{f} instructions per call, median (to its previous cpu)"].value == 217
    assert m[f"{f} instructions per call, median (to the waker's cpu)"].value == 287
    assert m[f"{f} calls (to the waker's cpu)"].value == 2
    assert m[f"{f} calls"].value == 5 and m[f"{f} calls lost to nesting"].value == 0
    assert not any("level" in k for k in m) and not p.problems
    # Pairs (previous cpu, waker's cpu) by the guest's cores: 0-3 and 4-7.
    pairs = "@wkp_pair[1, 2]: 6\n@wkp_pair[2, 5]: 3\n@wkp_pair[4, 4]: 1\n"
    cores = parsers.parse_cores("0 0-3\n1 0-3\n2 0-3\n3 0-3\n4 4-7\n5 4-7\n6 4,6\nx y\n")
    assert cores[5] == 4 and cores[6] == 4 and len(cores) == 7
    q = probemod.Parsed(parsers.bpftrace_maps(text + pairs), 3.0, text + pairs,
                        overhead=611.0, core_of=cores)
    probemod.PROBES["wake-path"].parse(q)
    share = {k.rsplit(": ", 1)[1]: v.value for k, v in q.metrics.items() if "waker's cpu: " in k}
    assert share == {"same cpu": 10.0, "same core": 60.0, "other core": 30.0}
    assert not any("waker's cpu: " in k for k in m)     # no cores.txt: no shares
    prog = probemod.PROBES["wake-path"].bpftrace("kfunc")
    assert "$k = args->prev_cpu;" in prog
    assert prog.index("$d = nsecs - @wkp_t0[cpu]") < prog.index("$l = (retval == @wkp_lv[cpu]")


def test_wake_depth_tags_each_depth():
    text = ("@wkd_calls[0]: 4\n@wkd_calls[2]: 2\n@wkd_n[0]: 4\n@wkd_n[2]: 2\n"
            + _lhist("wkd", 0, {830: 4}) + _lhist("wkd", 2, {1000: 2}))
    p = probemod.Parsed(parsers.bpftrace_maps(text), 3.0, text, overhead=611.0)
    probemod.PROBES["wake-depth"].parse(p)
    f = "select_task_rq_fair instructions per call, median"
    assert p.metrics[f + " (wakee depth 0)"].value == 217
    assert p.metrics[f + " (wakee depth 2)"].value == 387 and not p.problems
    assert "$k = args->p->se.depth;" in probemod.PROBES["wake-depth"].bpftrace("kfunc")
    # The scan alone: five arguments restored inside the window, four more
    # than the calibration's idle_cpu().
    scan = ("@sgic_calls[2]: 3\n@sgic_n[2]: 3\n" + _lhist("sgic", 2, {700: 3}))
    q = probemod.Parsed(parsers.bpftrace_maps(scan), 3.0, scan, overhead=611.0)
    probemod.PROBES["scan-cost"].parse(q)
    assert q.metrics["select_group_idle_cpu instructions per call, median (wakee depth 2)"
                     ].value == 700 - 611 - 4


def test_cost_programs_fill_every_placeholder():
    for p in (*probemod.COST_PROBES, probemod.WAKE_PATH, probemod.WAKE_DEPTH,
              probemod.SCAN_COST, probemod.CALIBRATION):
        for method in ("kfunc", "kprobe"):
            text = p.bpftrace(method)
            assert "%" not in text.replace("%d", ""), (p.name, method)
    swb = probemod.PROBES["swb-cost"].bpftrace("kfunc")
    assert ("kfunc:should_we_balance /@on/ { $k = args->env->sd->level; @swbc_calls[$k] = "
            "count(); @swbc_name[$k] = str(args->env->sd->name);") in swb
    assert swb.index("@swbc_lv[cpu] = $k") < swb.index("@swbc_t0[cpu] = nsecs")  # t0 last
    assert "@swbc_d[$l, $d / 1 * 1] = count();" in swb and "if ($d >= 6000)" in swb
    # sched_balance_rq() by domain and idle type: its fourth argument.
    assert "$k = args->sd->level * 4 + args->idle;" in probemod.PROBES["lb-cost-idle"].bpftrace(
        "kfunc")
    assert "* 4 + arg3;" in probemod.PROBES["lb-cost-idle"].bpftrace("kprobe")


def test_icount_boot_is_single_thread_tcg_with_icount():
    args = vm.vng_command(Path("/bz"), topology.parse_topology("smt4"), "true", kvm=True,
                          icount=True)
    assert "--disable-kvm" in args
    assert "--qemu-opts=-accel tcg,thread=single -icount shift=0,sleep=off" in args


def test_a_cost_probe_is_measured_alone():
    import pytest

    from schedlab.core.util import LabError
    from schedlab.measuring import plan as planmod
    assert planmod.make_plan("stress-50", "swb-cost", accel="icount").probes == ("swb-cost",)
    with pytest.raises(LabError, match="measured alone"):
        planmod.make_plan("stress-50", "swb-cost,lb-cost")
    with pytest.raises(LabError, match="measured alone"):
        planmod.make_plan("stress-50", "swb,swb-cost")
