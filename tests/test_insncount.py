"""The insns probe: the plugin's options, where it counts, and the parts."""

import shutil
from pathlib import Path

import pytest

from schedlab.core import topology, vm
from schedlab.core.util import LabError
from schedlab.measuring import insncount as ic
from schedlab.measuring import plan as planmod
from schedlab.measuring import probe_parsers as pp

NM = """\
ffffffff81000100 0000000000000040 t update_sd_lb_stats.constprop.0
ffffffff81000200 0000000000000020 T _raw_spin_trylock
ffffffff81000300 0000000000000010 t unrelated
ffffffff81000400 0000000000000008 d some_data
"""

OBJDUMP = """\
ffffffff81000100 <update_sd_lb_stats.constprop.0>:
ffffffff81000100:\tpush   %rbp
ffffffff81000104:\tcall   ffffffff81000200 <_raw_spin_trylock>
ffffffff81000109:\tcall   ffffffff81000280 <__x86_indirect_thunk_rax+0x3>
"""

SOURCE = """\
static void update_sg_lb_stats(struct lb_env *env)
{
\tlocal_group = group == sds->local;
\tfor_each_cpu_and(i, sched_group_span(group), env->cpus) {
\t\tstruct rq *rq = cpu_rq(i);
\t\tif (x) {
\t\t\tcontinue;
\t\t}
\t}
\tsgs->group_capacity = 1;
}
""".splitlines()


def test_nm_keeps_text_symbols_with_their_ends():
    syms = ic.parse_nm(NM)
    assert syms["update_sd_lb_stats.constprop.0"] == (0xffffffff81000100, 0xffffffff81000140)
    assert "some_data" not in syms


def test_ranges_are_the_functions_clones_and_their_direct_callees():
    syms = ic.parse_nm(NM)
    ranges = ic.plan_ranges(syms, lambda lo, hi: OBJDUMP)
    assert ranges == [syms["update_sd_lb_stats.constprop.0"], syms["_raw_spin_trylock"]]
    with pytest.raises(LabError, match="out of line"):
        ic.plan_ranges({"unrelated": (1, 2)}, lambda lo, hi: "")


def test_qemu_options_name_every_range_and_the_output():
    opts = ic.qemu_opts(Path("/w/insncount.so"), [(0x10, 0x20), (0x40, 0x48)], Path("/r/c.txt"))
    assert opts == "-plugin /w/insncount.so,range=10:20,range=40:48,out=/r/c.txt"
    with pytest.raises(LabError):
        ic.qemu_opts(Path("/p"), [], Path("/o"))


def test_the_plugin_goes_with_the_icount_options_only():
    args = vm.vng_command(Path("/bz"), topology.parse_topology("smt4"), "true", kvm=False,
                          icount=True, qemu_extra="-plugin /p.so,out=/o")
    assert ("--qemu-opts=-accel tcg,thread=single -icount shift=0,sleep=off "
            "-plugin /p.so,out=/o") in args
    with pytest.raises(LabError, match="icount"):
        vm.boot(Path("/nonexistent"), topology.parse_topology("smt4"), "true",
                qemu_extra="-plugin x")


def test_addr2line_frames_carry_their_lines():
    text = ("0xffffffff81000104\nupdate_sg_lb_stats\n/t/kernel/sched/fair.c:5\n"
            "update_sd_lb_stats\n/t/kernel/sched/fair.c:90 (discriminator 2)\n")
    assert ic.parse_addr2line(text) == {0xffffffff81000104: (
        ("update_sg_lb_stats", "/t/kernel/sched/fair.c", 5),
        ("update_sd_lb_stats", "/t/kernel/sched/fair.c", 90))}


def test_a_block_runs_from_its_opener_to_its_closing_brace():
    assert ic.block_lines(SOURCE, "update_sg_lb_stats", r"for_each_cpu_and\(i") == range(4, 10)
    assert ic.block_lines(SOURCE, "other_function", r"for_each_cpu_and") is None


def test_parts_sum_their_frames_and_calls_per_execution():
    f = "/t/fair.c"
    frames = {
        0x100: (("update_sg_lb_stats", f, 3),),            # once per group
        0x104: (("update_sg_lb_stats", f, 5),),            # cpu_rq(i): once per CPU
        0x108: (("cpu_load", f, 99), ("update_sg_lb_stats", f, 6)),
        0x10c: (("update_sg_lb_stats", f, 10),),           # after the loop
        0x110: (("sg_lb_cache_write", "/w.c", 2), ("update_sg_lb_stats", f, 10)),
        0x114: (("sg_lb_cache_write", "/w.c", 3), ("update_sg_lb_stats", f, 10)),
    }
    counts = {0x100: 4, 0x104: 32, 0x108: 32, 0x10c: 4, 0x110: 2, 0x114: 2,
              0x200: 2, 0x204: 2, 0x208: 1}           # the callee: 5 insns, 2 calls
    calls = {0x114: "_raw_spin_trylock"}
    syms = {"_raw_spin_trylock": (0x200, 0x220)}
    write_src = ["{", "\twrite_seqcount_begin(&cache->seq);", "\traw_spin_unlock(&cache->lock);"]
    costs = {c.name: c for c in ic.attribute(counts, frames, calls, syms,
                                             lambda p: SOURCE if p == f else write_src)}
    assert (costs["group statistics"].execs, costs["group statistics"].insns) == (4, 76)
    read = costs["per-CPU read"]
    assert (read.execs, read.insns, read.per_exec()) == (32, 64, 2.0)
    write = costs["cache write"]
    assert write.execs == 2 and write.call_insns == 5.0
    assert write.per_exec() == pytest.approx((4 + 5) / 2)
    assert costs["cache lookup"].execs == 0 and costs["cache lookup"].per_exec() == 0.0


def test_insns_text_round_trips_into_metrics():
    text = ic.format_costs([ic.PartCost("per-CPU read", 32, 64, 0.0),
                            ic.PartCost("cache write", 2, 4, 5.0)])
    assert ic.parse_costs(text) == {"per-CPU read": (32, 2.0), "cache write": (2, 4.5)}
    p = pp.Parsed({}, 1.0, "", insns_out=text)
    pp.insns(p)
    assert p.metrics["per-CPU read instructions per execution (insns)"].value == 2.0
    assert p.metrics["cache lookup executions (insns)"].value == 0
    assert "cache lookup instructions per execution (insns)" not in p.metrics
    empty = pp.Parsed({}, 1.0, "")
    pp.insns(empty)
    assert empty.problems and "insns" in empty.problems[0]


def test_the_insns_probe_runs_alone_under_icount():
    assert planmod.make_plan("stress-100", "insns", accel="icount").probes == ("insns",)
    with pytest.raises(LabError, match="alone"):
        planmod.make_plan("stress-100", "insns,swb", accel="icount")
    with pytest.raises(LabError, match="icount"):
        planmod.make_plan("stress-100", "insns")


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")
def test_the_plugin_compiles_warning_free(tmp_path):
    so = ic.plugin(tmp_path / "insncount.so")
    assert so.is_file() and so.stat().st_size > 0


def test_an_own_part_leaves_out_what_ran_more_often_than_it():
    src = ["static void w(void)", "{", "\tstruct c *cache = g->c;", "\tbegin(&cache->seq);", "}"]
    frames = {0x10: (("w", "/f.c", 3),), 0x14: (("w", "/f.c", 4),), 0x18: (("w", "/f.c", 4),)}
    counts = {0x10: 100, 0x14: 3, 0x18: 2}
    (own,) = ic.attribute(counts, frames, {}, {}, lambda p: src,
                          [ic.Part("write", ("w",), per=r"begin\(", own=True)])
    assert (own.execs, own.insns) == (3, 5)
    (every,) = ic.attribute(counts, frames, {}, {}, lambda p: src,
                            [ic.Part("write", ("w",), per=r"begin\(")])
    assert (every.execs, every.insns) == (3, 105)


def test_a_part_within_a_symbol_counts_that_instance_only():
    src = ["static void g(void)", "{", "\tx();", "}"]
    frames = {0x10: (("g", "/f.c", 3),), 0x90: (("g", "/f.c", 3),)}
    syms = {"update_sd_lb_stats_reuse": (0x80, 0xa0)}
    (cost,) = ic.attribute({0x10: 5, 0x90: 2}, frames, {}, syms, lambda p: src,
                           [ic.Part("g", ("g",), within="update_sd_lb_stats_reuse")])
    assert (cost.execs, cost.insns) == (2, 2)
    (none,) = ic.attribute({0x10: 5}, frames, {}, {}, lambda p: src,
                           [ic.Part("g", ("g",), within="update_sd_lb_stats_reuse")])
    assert none.execs == 0


def test_the_measure_integration_leaves_insns_out():
    from schedlab import pipeline
    assert "insns" not in pipeline.INTEGRATION.probes


def test_the_lookup_is_counted_at_either_readers_first_line():
    # The reader may begin with raw_read_seqcount() or with the try; a part
    # whose PER matches no line would count no executions.
    import re
    lookup = next(p for p in ic.PARTS if p.name == "cache lookup")
    per = re.compile(lookup.per)
    assert per.search("\tseq = raw_read_seqcount(&cache->seq);")
    assert per.search("\tif (!raw_seqcount_try_begin(&cache->seq, seq))")
