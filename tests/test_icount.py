"""Instruction counts under icount: the calibration and the cost probes."""

from pathlib import Path

from schedlab import icount, parsers, topology, vm
from schedlab import probes as probemod

DATA = Path(__file__).parent / "data"


def test_paths_of_idle_cpu_from_its_disassembly():
    insns = icount.parse_objdump((DATA / "objdump-idle_cpu.txt").read_text())
    assert insns[0][1] == "endbr64" and insns[-1][1] == "xchg"   # stops at the next symbol
    # not idle: 11 instructions and the return thunk's ret; idle: 14 and the ret.
    assert icount.path_lengths(insns) == [12, 15]


def test_a_loop_gives_no_paths():
    loop = [(0, "nop", ""), (1, "jne", "0 <f>"), (2, "ret", "")]
    assert icount.path_lengths(loop) == []


def _lhist(prefix, key, values):
    lines = [f"@{prefix}_lh[{key}]:"]
    for v, c in sorted(values.items()):
        lines.append(f"[{v}, {v + 1})  {c} |@@@@|")
    return "\n".join(lines) + "\n"


def test_calibration_finds_the_overhead_and_checks_one_ns_per_instruction():
    out = _lhist("cal", 0, {510: 30, 512: 900, 520: 3, 700: 1}) + _lhist("cal", 1, {515: 400})
    cal = icount.calibrate(out, [12, 15])
    assert cal.modes == [512, 515] and cal.overhead == 500 and cal.calls == 1334
    assert "3 ns more" in cal.check and "holds" in cal.check
    near = icount.calibrate(_lhist("cal", 0, {512: 9}) + _lhist("cal", 1, {514: 4}), [12, 15])
    assert "holds to the 1 ns" in near.check
    off = icount.calibrate(_lhist("cal", 0, {512: 9}) + _lhist("cal", 1, {519: 4}), [12, 15])
    assert "they differ" in off.check
    assert "not checked" in icount.calibrate(_lhist("cal", 0, {512: 9}), [12, 15]).check
    assert icount.calibrate("", [12, 15]) is None


def test_cost_probe_metrics_per_level_less_the_overhead():
    text = ("Attaching 3 probes...\n@swbc_calls[0]: 10\n@swbc_calls[2]: 4\n"
            "@swbc_long[2]: 1\n@swbc_n[0]: 10\n@swbc_n[2]: 3\n@swbc_sum[0]: 8000\n"
            "@swbc_sum[2]: 4500\n@swbc_name[0]: SMT\n@swbc_name[2]: MC\n"
            + _lhist("swbc", 0, {700: 4, 780: 6}) + _lhist("swbc", 2, {1500: 3}))
    p = probemod.Parsed(parsers.bpftrace_maps(text), 3.0, text, overhead=500.0)
    probemod.PROBES["swb-cost"].parse(p)
    m = p.metrics
    assert m["should_we_balance instructions per call (SMT)"].value == 300
    assert m["should_we_balance instructions per call, median (SMT)"].value == 280
    assert m["should_we_balance instructions per call (MC)"].value == 1000
    assert m["should_we_balance calls straddling a vCPU switch (MC)"].value == 1
    assert m["should_we_balance calls (MC)"].value == 4


def test_cost_programs_fill_every_placeholder():
    for p in (*probemod.COST_PROBES, probemod.CALIBRATION):
        for method in ("kfunc", "kprobe"):
            text = p.bpftrace(method)
            assert "%" not in text.replace("%d", ""), (p.name, method)
    swb = probemod.PROBES["swb-cost"].bpftrace("kfunc")
    assert ("kfunc:should_we_balance /@on/ { $k = args->env->sd->level; @swbc_calls[$k] = "
            "count(); @swbc_name[$k] = str(args->env->sd->name);") in swb
    assert swb.index("@swbc_lv[cpu] = $k") < swb.index("@swbc_t0[cpu] = nsecs")  # t0 last
    assert "lhist($d, 0, 20000, 20)" in swb and "if ($d > 1000000)" in swb


def test_icount_boot_is_single_thread_tcg_with_icount():
    args = vm.vng_command(Path("/bz"), topology.parse_topology("smt4"), "true", kvm=True,
                          icount=True)
    assert "--disable-kvm" in args
    assert "--qemu-opts=-accel tcg,thread=single -icount shift=0,sleep=off" in args


def test_a_cost_probe_is_measured_alone():
    import pytest
    from schedlab import plan as planmod
    from schedlab.util import LabError
    assert planmod.make_plan("stress-50", "swb-cost", accel="icount").probes == ("swb-cost",)
    with pytest.raises(LabError, match="measured alone"):
        planmod.make_plan("stress-50", "swb-cost,lb-cost")
    with pytest.raises(LabError, match="measured alone"):
        planmod.make_plan("stress-50", "swb,swb-cost")
