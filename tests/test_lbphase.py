"""The lb-phase replay: which group totals a parent level finds fresh."""

from schedlab.measuring import lbphase, parsers
from schedlab.measuring import probes as probemod

# Two cores of two threads under one MC domain (schedstat version 17 lines).
SCHEDSTAT = "version 17\ntimestamp 1\n" + "".join(
    f"cpu{c} 0 0 0 0 0 0 0 0 0\ndomain0 SMT {'3' if c < 2 else 'c'} 0\ndomain1 MC f 0\n"
    for c in range(4))


def _ev(cpu, idle, name, passno, ms):
    return f"@lbp_ev[{cpu}, {idle}, {name}, {passno}, {int(ms * 1000000)}]: 1\n"


EVENTS = (_ev(0, 0, "SMT", 1000, 10) + _ev(0, 0, "MC", 1000, 10.1)   # one pass of cpu0
          + _ev(2, 1, "SMT", 1002, 12)                              # idle balance of core 2-3
          + _ev(2, 0, "MC", 2002, 13) + _ev(3, 0, "MC", 1003, 27))


def test_spans_from_schedstat():
    spans = lbphase.parse_spans(SCHEDSTAT)
    assert spans[1] == [("SMT", frozenset({0, 1})), ("MC", frozenset({0, 1, 2, 3}))]
    assert spans[3][0] == ("SMT", frozenset({2, 3}))
    assert lbphase.level_names(spans) == ["SMT", "MC"]


def test_replay_counts_fresh_reads_per_window():
    out = lbphase.replay(lbphase.parse_events(EVENTS), lbphase.parse_spans(SCHEDSTAT))
    smt, mc = out["SMT"], out["MC"]
    assert (smt.balances, mc.balances, mc.reads, mc.same_pass) == (1, 3, 12, 1)
    # 10.1 ms (cpu0): core 0-1 fresh, 2-3 never computed.  13 ms (cpu2): 0-1
    # 3 ms old, 2-3 1 ms.  27 ms (cpu3): as children 0-1 17 ms, 2-3 15 ms
    # old; both 14 ms old from cpu2's MC balance (write on miss).
    assert mc.child == (2 + 4, 2 + 4 + 2)
    assert mc.wom == (2 + 4, 2 + 4 + 4)


def test_a_map_printed_twice_counts_once():
    # print_at_close() prints the map, and bpftrace prints it again at exit.
    twice = lbphase.replay(lbphase.parse_events(EVENTS + EVENTS), lbphase.parse_spans(SCHEDSTAT))
    assert twice == lbphase.replay(lbphase.parse_events(EVENTS), lbphase.parse_spans(SCHEDSTAT))
    assert len(lbphase.parse_events(EVENTS + EVENTS)) == 5


def test_probe_metrics_and_program():
    text = "Attaching 3 probes...\n" + EVENTS + "@lbp_n: 5\n"
    p = probemod.Parsed(parsers.bpftrace_maps(text), 3.0, text, schedstat=SCHEDSTAT)
    probemod.PROBES["lb-phase"].parse(p)
    m = p.metrics
    assert m["busy balances computing group statistics (MC)"].value == 3
    assert round(m["busy balances with a same-pass child balance (MC)"].value, 1) == 33.3
    assert round(m["group reads fresh with write on miss, 16 ms (MC)"].value, 1) == 83.3
    assert round(m["group reads fresh from child totals, 16 ms (MC)"].value, 1) == 66.7
    assert "group reads fresh from child totals, 4 ms (SMT)" not in m and not p.problems
    short = probemod.Parsed({"lbp_n": 9.0}, 3.0, text, schedstat=SCHEDSTAT)
    probemod.PROBES["lb-phase"].parse(short)
    assert short.problems and "5 events of 9" in short.problems[0]
    for method in ("kfunc", "kprobe"):
        prog = probemod.PROBES["lb-phase"].bpftrace(method)
        assert "%" not in prog
    assert "@lbp_env[cpu] = (uint64)args->env;" in probemod.PROBES["lb-phase"].bpftrace("kfunc")


def _share(cpu, name, jiffy, busy_ms=256, last_balance=0, off_us=100, weight=4):
    """A busy balance OFF_US after the tick of JIFFY (HZ=250)."""
    return (f"@lbs_ev[{cpu}, {name}, {weight}, {last_balance}, {busy_ms}, "
            f"{jiffy * 4000000 + off_us * 1000}]: 1\n")


def test_ttl_as_sg_lb_cache_ttl():
    # 1/64 of the busy interval, rounded up to jiffies: the 96-CPU LLC of
    # 2x12x8 (balance_interval 96, busy_factor 16) keeps sums 24 ms.
    assert lbphase.ttl_jiffies(96 * 16, 250) == 6 and lbphase.ttl_jiffies(96 * 16, 1000) == 24
    assert lbphase.ttl_jiffies(2 * 96 * 16, 250) == 12
    assert lbphase.ttl_jiffies(16 * 16, 250) == 1 and lbphase.ttl_jiffies(16 * 16, 100) == 1
    assert lbphase.ttl_jiffies(4 * 16, 250) == 1 and lbphase.ttl_jiffies(63, 250) == 0


def _chain(hz, late=1, n=30, every=25, off_us=100, busy_ms=256, drift=0):
    """N balances of cpu0's MC, every EVERY ticks of HZ on the clock (HZ
    jiffies a second), each LATE jiffies after its interval was due; each
    carries the jiffy the one before ended in.  DRIFT: jiffies lost a
    balance (ticks a periodic low resolution tick lost)."""
    tick_us = 1000000 // hz
    out = ""
    for j in range(n):
        lb = 1000 + (j - 1) * (every - drift) + late     # jiffies start at 1000
        ns_us = j * every * tick_us + off_us
        out += f"@lbs_ev[0, MC, 4, {lb}, {busy_ms}, {ns_us * 1000}]: 1\n"
    return out


def test_hz_from_the_jiffies_balances_carry():
    # Every 25 jiffies at a 256 ms busy interval is not possible at HZ=1000
    # (256 jiffies); chains whose last_balance moves by the interval tell HZ.
    for hz in (100, 250, 300, 1000):
        every = lbphase.ttl_jiffies(256 * 64, hz) + 1
        assert lbphase.hz_of(lbphase.parse_share_events(_chain(hz, every=every))) == hz
    # Late balances (idle balances between) do not count for any HZ.
    assert lbphase.hz_of(lbphase.parse_share_events(_chain(250, every=200))) is None
    assert lbphase.hz_of(lbphase.parse_share_events(_chain(250, n=2, every=65))) is None


def test_jiffies_that_fall_behind_the_clock_are_found():
    steady = lbphase.parse_share_events(_chain(250, every=65))
    assert lbphase.clock_drift(steady, 250) <= 1
    lossy = lbphase.parse_share_events(_chain(250, every=65, drift=10))
    assert lbphase.clock_drift(lossy, 250) > 100
    p = probemod.Parsed({}, 3.0, _chain(250, every=65, drift=10), schedstat=SCHEDSTAT)
    probemod.PROBES["lb-share"].parse(p)
    assert any("behind the clock" in x for x in p.notes) and not p.problems


def test_jiffies_on_the_tick_grid():
    # High resolution ticks are on multiples of TICK_NSEC: jiffy = ns // tick.
    text = "".join(_share(0, "MC", j, off_us=100 + 50 * (j % 5)) for j in range(10))
    events = lbphase.parse_share_events(text)
    assert lbphase.jiffies_of(events, 250) == list(range(10))
    assert lbphase.tick_phase(events, 4000000) == 100000
    # Balances 1.5-1.7 ms into the grid: the check finds ticks at 1.5 ms.
    late = lbphase.parse_share_events("".join(_share(0, "MC", j, off_us=1500 + 50 * (j % 5))
                                              for j in range(10)))
    assert lbphase.tick_phase(late, 4000000) == 1500000


def test_share_replay_follows_the_rule():
    spans = lbphase.parse_spans(SCHEDSTAT)
    # MC of 4 CPUs at busy interval 256 ms: sums live 1 jiffy at HZ=250.
    # cpu0 at jiffy 2 leaves sums for both cores, cpu2 at jiffy 3 takes both,
    # cpu3 at jiffy 4 finds them expired (a take leaves the stamp), and cpu1
    # at jiffy 4 takes those cpu3 left in the same jiffy.
    text = (_share(0, "MC", 2) + _share(2, "MC", 3) + _share(3, "MC", 4)
            + _share(1, "MC", 4, off_us=300))
    out = lbphase.share_replay(lbphase.parse_share_events(text), spans, hz=250)
    assert (out["MC"].balances, out["MC"].reads, out["MC"].taken) == (4, 16, 8)
    assert out["MC"].taken_other == 8 and out["MC"].retries == 0
    # Reading a runqueue in 200 ns changes nothing 200 us apart.
    walked = lbphase.share_replay(lbphase.parse_share_events(text), spans, 250, rq_ns=200)
    assert walked["MC"].taken == 8
    # The same CPU again in the jiffy with the same last_balance is the
    # balance's retry: counted apart, not replayed.  With a new last_balance
    # it is a balance of its own, taking its own sums.
    text = _share(0, "MC", 2, last_balance=1) + _share(0, "MC", 2, last_balance=1, off_us=300)
    out = lbphase.share_replay(lbphase.parse_share_events(text), spans, hz=250)
    assert (out["MC"].balances, out["MC"].retries, out["MC"].taken) == (1, 1, 0)
    text = _share(0, "MC", 2, last_balance=1) + _share(0, "MC", 3, last_balance=2)
    out = lbphase.share_replay(lbphase.parse_share_events(text), spans, hz=250)
    assert (out["MC"].taken, out["MC"].taken_other) == (4, 0)
    # The taker's own interval decides: at 512 ms (2 jiffies) jiffy 4 takes too.
    text = _share(0, "MC", 2) + _share(2, "MC", 3) + _share(3, "MC", 4, busy_ms=512)
    out = lbphase.share_replay(lbphase.parse_share_events(text), spans, hz=250)
    assert out["MC"].taken == 8
    # The lowest level keeps no sums; a CPU without spans is skipped.
    text = _share(0, "SMT", 2, weight=2) + _share(9, "MC", 2)
    assert lbphase.share_replay(lbphase.parse_share_events(text), spans, hz=250) == {}


# One LLC of four cores of 2 threads
LLC_SCHEDSTAT = "version 17\ntimestamp 1\n" + "".join(
    f"cpu{c} 0 0 0 0 0 0 0 0 0\ndomain0 SMT {3 << (c & ~1):x} 0\ndomain1 MC ff 0\n"
    for c in range(8))


def test_balances_started_together_race():
    spans = lbphase.parse_spans(LLC_SCHEDSTAT)
    cores = [frozenset({c, c + 1}) for c in (0, 2, 4, 6)]
    # Each balance walks the groups from its own, wrapping.
    assert lbphase.walk(cores, 4) == cores[2:] + cores[:2]
    assert lbphase.walk(cores, 1) == cores
    # The four cores' balances 10 ns apart.  Instantaneous, the first reads
    # its 4 groups and the others take all theirs: 24 of 32 reads.  At
    # 200 ns a runqueue each reads its own group and races the next core's
    # balance for the second (it gets there 10 ns before those sums), and
    # takes the other two; the last, 30 ns after the first, also takes the
    # first's group: 2 + 2 + 2 + 3 groups of 2 taken.
    text = "".join(_share(c, "MC", 4, weight=8, off_us=100) .replace(
        f"{4 * 4000000 + 100000}]", f"{4 * 4000000 + 100000 + 10 * i}]")
        for i, c in enumerate((0, 2, 4, 6)))
    events = lbphase.parse_share_events(text)
    assert lbphase.share_replay(events, spans, 250)["MC"].taken == 24
    walked = lbphase.share_replay(events, spans, 250, rq_ns=200)["MC"]
    assert (walked.reads, walked.taken) == (32, 18)
    # With two groups the balance that starts later takes the group of the
    # one before it, whose sums are left by the time it gets there; the
    # earlier one races for the later one's group: 1 of 4 groups.
    text = "".join(_share(c, "MC", 4, weight=8, off_us=100).replace(
        f"{4 * 4000000 + 100000}]", f"{4 * 4000000 + 100000 + 10 * i}]")
        for i, c in enumerate((0, 4)))
    # (MC of two groups of 4: the SMT level's spans are the groups here)
    two = {c: [("SMT", frozenset(range(c & 4, (c & 4) + 4))), ("MC", frozenset(range(8)))]
           for c in range(8)}
    walked = lbphase.share_replay(lbphase.parse_share_events(text), two, 250, rq_ns=200)["MC"]
    assert (walked.reads, walked.taken, walked.taken_other) == (16, 4, 4)
    # There cpu4 and cpu0 both wrote cpu4's group, in the same jiffy: the
    # later write stays (sg_lb_cache_write() leaves only newer sums), so
    # cpu4, balancing again 100 us later, takes cpu0's sums of both groups.
    text = "".join(_share(c, "MC", 4, weight=8, off_us=100, last_balance=lb).replace(
        f"{4 * 4000000 + 100000}]", f"{4 * 4000000 + 100000 + d}]")
        for c, d, lb in ((0, 0, 0), (4, 10, 0), (4, 100000, 1)))
    walked = lbphase.share_replay(lbphase.parse_share_events(text), two, 250, rq_ns=200)
    assert (walked["MC"].taken, walked["MC"].taken_other) == (4 + 8, 4 + 8)
    # A group whose CPUs wrap around the balancing CPU comes first.
    assert lbphase.walk([frozenset({0, 7}), frozenset({3, 4})], 7)[0] == frozenset({0, 7})
    # A jiffy apart (within the 1-jiffy lifetime), as the timeline has it.
    text = _share(0, "MC", 4, weight=8) + _share(2, "MC", 5, weight=8)
    walked = lbphase.share_replay(lbphase.parse_share_events(text), spans, 250, rq_ns=200)
    assert walked["MC"].taken == 8


def test_the_machine_s_own_time_of_a_runqueue_read():
    # lbshare.bt's @lbt_dur: MC's statistics in 100 ns steps; 3 of 5 in the
    # step from 1.5 us: the median 1.6 us (the step's top), over 8 runqueues
    # 200 ns each.  NUMA's groups overlap: 20 reads a balance, not 16.
    maps = parsers.bpftrace_maps("@lbt_dur[MC, 8, 11]: 1\n@lbt_dur[MC, 8, 15]: 2\n"
                                 "@lbt_dur[MC, 8, 90]: 2\n@lbt_dur[NUMA, 16, 79]: 1\n"
                                 "@lbt_dur[PKG, 8, 3]: 1\n@lbs_n: 5\n")
    assert lbphase.balance_ns(maps) == {("MC", 8): 1600, ("NUMA", 16): 8000, ("PKG", 8): 400}
    # Rounded up; a level without reads (no balance replayed) has none.
    assert lbphase.rq_ns_of(lbphase.balance_ns(maps), {("MC", 8): 8.0, ("NUMA", 16): 20.0,
                                                       ("PKG", 8): 0.0}) == \
        {("MC", 8): 200, ("NUMA", 16): 400}
    assert lbphase.rq_ns_of({("MC", 8): 1601}, {("MC", 8): 8.0}) == {("MC", 8): 201}
    # Of an even count, the lower middle.
    even = parsers.bpftrace_maps("@lbt_dur[PKG, 32, 9]: 2\n@lbt_dur[PKG, 32, 19]: 2\n")
    assert lbphase.balance_ns(even) == {("PKG", 32): 1000}
    # Per level it is the walk of a uniform rq_ns: the four cores 10 ns
    # apart of test_balances_started_together_race(); a level it does not
    # have keeps rq_ns.
    spans = lbphase.parse_spans(LLC_SCHEDSTAT)
    text = "".join(_share(c, "MC", 4, weight=8, off_us=100).replace(
        f"{4 * 4000000 + 100000}]", f"{4 * 4000000 + 100000 + 10 * i}]")
        for i, c in enumerate((0, 2, 4, 6)))
    events = lbphase.parse_share_events(text)
    assert lbphase.share_replay(events, spans, 250, level_rq_ns={("MC", 8): 200})["MC"].taken == 18
    assert lbphase.share_replay(events, spans, 250, level_rq_ns={("MC", 4): 200})["MC"].taken == 24
    assert lbphase.share_replay(events, spans, 250, 200, {("MC", 4): 0})["MC"].taken == 18
    assert lbphase.labels((e.name, e.weight) for e in events) == {("MC", 8): "MC"}


# Two nodes of two cores of 2 threads, cpu5 offline: cpu4's lowest level
# degenerated, so its MC's group is cpu4 itself; two NUMA levels, the first
# (all 7 CPUs) keeps sums, the one above none.
NUMA_SCHEDSTAT = "version 17\ntimestamp 1\n" + "".join(
    f"cpu{c} 0 0 0 0 0 0 0 0 0\n"
    + (f"domain0 SMT {'3' if c < 2 else 'c'} 0\n" if c < 4 else f"domain0 SMT {'c0'} 0\n")
    * (c != 4)
    + f"domain{int(c != 4)} MC {'f' if c < 4 else 'd0'} 0\n"
    + f"domain{1 + int(c != 4)} NUMA df 0\ndomain{2 + int(c != 4)} NUMA 1df 0\n"
    for c in (0, 1, 2, 3, 4, 6, 7))


def test_groups_per_cpu_and_numa_levels_without_sums():
    spans = lbphase.parse_spans(NUMA_SCHEDSTAT)
    assert [n for n, _ in spans[4]] == ["MC", "NUMA", "NUMA"]
    # Node 1's MC: cpu4 alone, then the core 6-7: 3 reads, not 5 or 9.
    groups = lbphase.groups_of(spans, "MC", spans[6][1][1], 3)
    assert sorted(map(sorted, groups)) == [[4], [6, 7]]
    text = (_share(6, "MC", 2, weight=3) + _share(0, "NUMA", 2, weight=7)
            + _share(0, "NUMA", 2, weight=8, off_us=200))
    out = lbphase.share_replay(lbphase.parse_share_events(text), spans, hz=250)
    assert out["MC"].reads == 3 and out["NUMA 7"].reads == 7 and "NUMA 8" not in out


def test_lb_share_probe():
    events = _share(0, "MC", 2) + _share(2, "MC", 3) + _share(3, "MC", 6)
    # The map is printed when the window closes and again at exit.
    text = "Attaching 2 probes...\n" + events + events + "@lbs_n: 3\n"
    p = probemod.Parsed(parsers.bpftrace_maps(text), 3.0, text, schedstat=SCHEDSTAT)
    probemod.PROBES["lb-share"].parse(p)
    m = p.metrics
    assert m["busy balances above the lowest level (MC)"].value == 3
    assert m["group reads in busy balances (MC)"].value == 12
    assert round(m["group reads sums could serve (MC)"].value, 1) == 33.3
    assert round(m["group reads sums another CPU left could serve (MC)"].value, 1) == 33.3
    assert round(m["group reads sums could serve, 200 ns a runqueue (MC)"].value, 1) == 33.3
    # Without lb-time beside it (or where it could not attach): no measured
    # walk.
    assert not any("measured" in k or "median" in k for k in m)
    # With it, lb-share walks at its time and lb-time gives the median.
    timed = text + "@lbt_dur[MC, 4, 7]: 3\n"
    p = probemod.Parsed(parsers.bpftrace_maps(timed), 3.0, timed, schedstat=SCHEDSTAT)
    probemod.parse(["lb-share", "lb-time"], p)
    assert p.metrics["group statistics time of busy balances, median (MC)"].value == 0.8
    assert p.metrics["group statistics time of busy balances, median (MC)"] \
        .higher_is_better is False
    assert round(p.metrics["group reads sums could serve, the measured time a runqueue (MC)"]
                 .value, 1) == 33.3
    assert not any("SMT" in k for k in p.metrics)
    # lb-time alone: two NUMA levels carry their weights.
    numa = "@lbt_dur[NUMA, 8, 9]: 1\n@lbt_dur[NUMA, 16, 19]: 1\n@lbt_dur[MC, 4, 2]: 1\n"
    q = probemod.Parsed(parsers.bpftrace_maps(numa), 3.0, numa)
    probemod.PROBES["lb-time"].parse(q)
    assert {k: v.value for k, v in q.metrics.items()} == {
        "group statistics time of busy balances, median (MC)": 0.3,
        "group statistics time of busy balances, median (NUMA 8)": 1.0,
        "group statistics time of busy balances, median (NUMA 16)": 2.0}
    # How in step the balances run is the machine's: no arm is better for it.
    assert m["group reads sums could serve (MC)"].higher_is_better is None
    assert m["group reads sums another CPU left could serve (MC)"].higher_is_better is None
    # Three balances of three CPUs: HZ cannot be told, and the problem says so.
    assert p.notes == ["lb-share: too few balances of one CPU's level to tell HZ: 250 "
                       "assumed"] and not p.problems
    assert not any("SMT" in k for k in m)
    long = probemod.Parsed({}, 3.0, _chain(250, every=65), schedstat=SCHEDSTAT)
    probemod.PROBES["lb-share"].parse(long)
    assert not long.problems and not long.notes
    skewed = probemod.Parsed({}, 3.0, _chain(250, every=65, off_us=1900),
                             schedstat=SCHEDSTAT)
    probemod.PROBES["lb-share"].parse(skewed)
    assert any("1.90 ms into the clock's jiffy grid" in x for x in skewed.notes)
    quiet = probemod.Parsed({}, 3.0, "Attaching 2 probes...\n", schedstat=SCHEDSTAT)
    probemod.PROBES["lb-share"].parse(quiet)
    assert quiet.metrics["busy balances above the lowest level (MC)"].value == 0
    assert len(quiet.metrics) == 1 and not quiet.problems
    short = probemod.Parsed({"lbs_n": 4.0}, 3.0, text, schedstat=SCHEDSTAT)
    probemod.PROBES["lb-share"].parse(short)
    assert "3 events of 4" in short.problems[0]
    nospan = probemod.Parsed({}, 3.0, text)
    probemod.PROBES["lb-share"].parse(nospan)
    assert "lb-share: no domain spans in /proc/schedstat" in nospan.problems
    prog = probemod.PROBES["lb-share"].bpftrace("kprobe")
    assert "%" not in prog and "@lbs_env[cpu] = (uint64)arg0;" in prog
    assert "$e->idle == 0 && (uint64)$e->sd->child != 0" in prog
    # The first runs' keys had no weight.
    old = lbphase.parse_share_events("@lbs_ev[0, MC, 7, 256, 8100000]: 1\n")
    assert old[0].weight == 0 and old[0].last_balance == 7
