"""The profile stage: perf script's chains, addr2line's inline chains, the counts."""

import pytest

from schedlab import plan as planmod
from schedlab import probe_parsers as pp
from schedlab import probes as probemod
from schedlab import profile
from schedlab.spec import probe_build
from schedlab.util import LabError

OFF = 0x37c00000           # runtime minus link address (KASLR)
K = 0xffffffff81000000     # a link address in the kernel


def rt(link: int) -> int:
    return link + OFF


SCRIPT = f"""
[000] 
\t{rt(K + 0x10):x}
\t{rt(K + 0x201):x}

[001] 
\t{rt(K + 0x30):x}

[002] 
\t7f00deadbeef

[003] 
\t{rt(K + 0x40):x}
\t{rt(K + 0x51):x}
\t{rt(K + 0x201):x}
"""

A2L = f"""0x{K + 0x10:x}
idle_cpu
kernel/sched/core.c:1
0x{K + 0x200:x}
should_we_balance
kernel/sched/fair.c:2
sched_balance_rq
kernel/sched/fair.c:3
0x{K + 0x30:x}
pv_native_safe_halt
arch/x86/kernel/paravirt.c:64
default_idle
arch/x86/kernel/process.c:768
0x{K + 0x40:x}
update_sg_lb_stats
kernel/sched/fair.c:4
update_sd_lb_stats
kernel/sched/fair.c:5
sched_balance_find_src_group
kernel/sched/fair.c:6
0x{K + 0x50:x}
??
??:0
"""


def test_chains_one_list_per_sample_leaf_first():
    ch = profile.chains(SCRIPT)
    assert len(ch) == 4
    assert ch[0] == [rt(K + 0x10), rt(K + 0x201)]
    assert ch[2] == [0x7f00deadbeef]


def test_link_addresses_take_one_off_return_addresses():
    want = profile.link_addresses(profile.chains(SCRIPT), OFF)
    assert K + 0x10 in want and K + 0x200 in want and K + 0x201 not in want
    assert all(a >= profile.KERNEL_FLOOR for a in want)


def test_addr2line_inline_chains_innermost_first():
    at = profile.parse_addr2line(A2L)
    assert at[K + 0x200] == ("should_we_balance", "sched_balance_rq")
    assert at[K + 0x50] == ("??",)


def test_count_own_within_idle_user():
    c = profile.count(profile.chains(SCRIPT), OFF, profile.parse_addr2line(A2L))
    assert (c.samples, c.idle, c.user) == (4, 1, 1)
    # idle_cpu() called from should_we_balance(): within it, not its own.
    assert c.within["should_we_balance"] == 2 and c.own["should_we_balance"] == 0
    assert c.within["sched_balance_rq"] == 2
    # update_sd_lb_stats() inlined at the leaf: its own, and within.
    assert c.own["update_sd_lb_stats"] == 1 and c.within["update_sd_lb_stats"] == 1
    # Unary plus drops zero counts, which Python 3.9 compares.
    assert +profile.Counts.parse(c.text()).within == +c.within


def test_parser_shares_per_mille_of_busy_samples():
    c = profile.count(profile.chains(SCRIPT), OFF, profile.parse_addr2line(A2L))
    p = pp.Parsed({}, 2.0, "", profile_out=c.text())
    pp.profile(p)
    assert p.metrics["profile busy samples"].value == 3
    assert p.metrics["should_we_balance share (profile)"].value == pytest.approx(2000 / 3)
    assert p.metrics["should_we_balance own share (profile)"].value == 0
    assert not p.problems


def test_parser_says_when_there_is_no_profile():
    p = pp.Parsed({}, 2.0, "")
    pp.profile(p)
    assert p.problems and not p.metrics


def test_symbolize_needs_where_the_kernel_was(tmp_path):
    assert "kernel-text" in profile.symbolize(tmp_path, tmp_path / "vmlinux")[0]
    (tmp_path / "kernel-text.txt").write_text("ffffffff81000000 T _text\nffffffff82000000 T _etext\n")
    assert profile.runtime_text(tmp_path) == (0xffffffff81000000, 0xffffffff82000000)


def test_profile_runs_alone_and_under_icount():
    with pytest.raises(LabError, match="alone"):
        probemod.probe_names("profile,swb")
    with pytest.raises(LabError, match="icount"):
        planmod.make_plan("stress-100", "profile")
    plan = planmod.make_plan("stress-100", "profile", accel="icount")
    assert "perf" in plan.needs()
    assert probe_build("patched", accel="icount", profile=True).config == "profile"
    assert probe_build("patched", accel="icount").config == "icount"


def test_plan_env_carries_the_sample_rate(tmp_path):
    plan = planmod.make_plan("stress-100", "profile", accel="icount")
    env = (planmod.write(plan, tmp_path) / "plan.env").read_text()
    assert f"PROFILE_PERIOD_NS={probemod.PROFILE_PERIOD_NS}" in env
    # Not commensurate with the tick (HZ=250 in the lab config).
    assert 4_000_000 % probemod.PROFILE_PERIOD_NS > 0.1 * probemod.PROFILE_PERIOD_NS


def test_chains_are_counted_and_an_address_on_the_cpu_line_is_kept():
    c = profile.chain_counts(["[000] ", f"\t{rt(K + 0x30):x}", "[001] ", f"\t{rt(K + 0x30):x}",
                              f"[002] {rt(K + 0x40):x}"])
    assert c[(rt(K + 0x30),)] == 2 and c[(rt(K + 0x40),)] == 1


def test_the_chain_stops_at_an_interrupt_entry():
    # A softirq's balance that interrupted should_we_balance(): not within it.
    at = {K + 0x10: ("sched_balance_rq",), K + 0x200: ("asm_sysvec_apic_timer_interrupt",),
          K + 0x300: ("should_we_balance",)}
    c = profile.count([[rt(K + 0x10), rt(K + 0x201), rt(K + 0x301)]], OFF, at)
    assert c.within["sched_balance_rq"] == 1 and c.within["should_we_balance"] == 0


def test_only_kernel_text_is_looked_up():
    samples = [[rt(K + 0x10), 0xffffffffc0001234]]   # a module's return address
    want = profile.link_addresses(samples, OFF, (rt(K), rt(K + 0x1000)))
    assert want == [K + 0x10]


def test_the_profile_refuses_other_arches():
    with pytest.raises(LabError, match="x86_64"):
        probe_build("patched", arch="ppc64le", accel="icount", profile=True)


def test_a_profile_that_would_not_fit_the_guest_tmp_is_refused():
    profile.check_size(64, 3)
    with pytest.raises(LabError, match="fewer --seconds"):
        profile.check_size(64, 60)
