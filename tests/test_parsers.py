"""Parsers against real outputs captured in the lab VM (tests/data/tools/)."""

from pathlib import Path

import pytest

from schedlab.measuring import parsers as p

DATA = Path(__file__).parent / "data" / "tools"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_hackbench():
    m = p.hackbench(read("hackbench-pipe-threads.txt"))
    assert m["hackbench time"].value == 2.068
    assert m["hackbench time"].kind == "time" and not m["hackbench time"].higher_is_better
    assert p.hackbench("garbage") == {}


def test_ni_hackbench():
    m = p.ni_hackbench(read("ni-hackbench.txt"))
    assert m["hackbench rounds"].value == 3
    assert m["hackbench window"].value == 1.188
    assert m["hackbench messages/s"] == p.Metric(48000 / 1.188, "msg/s", "rate", True)
    assert p.ni_hackbench("ni-hackbench: 0 0 0.000") == {}
    assert p.ni_hackbench("garbage") == {}


def test_perf_bench_messaging_and_pipe():
    assert p.perf_bench_sched(read("perf-bench-messaging.txt")) == {
        "perf sched messaging time": p.Metric(2.124, "s", "time", False)}
    pipe = p.perf_bench_sched(read("perf-bench-pipe.txt"))
    assert pipe["perf sched pipe time"].value == 4.463
    assert pipe["perf sched pipe usecs/op"].value == 223.17485
    assert pipe["perf sched pipe ops/s"] == p.Metric(4480.0, "ops/s", "rate", True)


def test_stress_ng_metrics_brief():
    m = p.stress_ng(read("stress-ng-cpu.txt"))
    assert m["stress-ng cpu bogo-ops/s"].value == 81.74
    assert m["stress-ng cpu bogo-ops/s"].kind == "rate"
    assert m["stress-ng cpu real time"].value == 6.02


def test_dbench_throughput_line():
    text = ("dbench version 4.00 - Copyright Andrew Tridgell 1999-2004\n\n"
            "Throughput 51.2345 MB/sec  2 clients  2 procs  max_latency=12.345 ms\n")
    assert p.dbench(text)["dbench throughput"].value == 51.2345
    assert p.dbench(read("dbench.txt")) == {}   # the run failed (no SysV IPC)


def test_schedstat_sums_domains_by_idle_type():
    after = p.schedstat(read("schedstat-after.txt"))
    assert set(after) == {"SMT", "MC", "cpu"}
    assert after["cpu"]["sched_goidle"] > 0
    # cpu0 domain0 (SMT) alone: busy lb_count 9, idle lb_count 386.
    lines = [ln for ln in read("schedstat-after.txt").splitlines()]
    one = "\n".join(["version 17"] + [ln for ln in lines if ln.startswith("domain0 SMT 0f")][:1])
    assert p.schedstat(one)["SMT"]["lb_count.busy"] == 9
    assert p.schedstat(one)["SMT"]["lb_count.idle"] == 386
    assert p.schedstat(one)["SMT"]["lb_count.newidle"] == 0


def test_schedstat_delta_and_version_check():
    d = p.schedstat_delta(read("schedstat-before.txt"), read("schedstat-after.txt"))
    assert d["balance SMT idle"].value > 0
    assert d["balance MC busy"].kind == "count"
    assert "balance cpu busy" not in d
    with pytest.raises(ValueError):
        p.schedstat("version 15\n")


def test_schedstat_idle_entries_and_newidle_pulls_by_hand():
    def text(goidle, count, balanced, failed):
        newidle = [count, balanced, failed] + [0] * 8
        dom = " ".join(map(str, [0] * 22 + newidle + [0] * 3))
        return (f"version 17\ntimestamp 1\ncpu0 0 0 10 {goidle} 0 0 0 0 0\n"
                f"cpu1 0 0 10 {goidle} 0 0 0 0 0\ndomain0 MC ff {dom}\n")
    d = p.schedstat_delta(text(5, 10, 2, 1), text(8, 30, 6, 4))
    assert d["idle entries (sched_goidle)"].value == 6      # 3 more on each of two CPUs
    assert d["balance MC newidle"].value == 20
    assert d["balance MC newidle pulled"].value == 20 - 4 - 3


def test_proc_stat_busy_by_hand():
    before = "cpu  100 0 100 800 0 0 0 0 0 0\n"
    after = "cpu  200 0 150 850 0 0 0 0 0 0\n"
    # delta: user 100, system 50, idle 50 -> 150 busy of 200
    assert p.proc_stat_busy(before, after)["cpu busy"].value == 75.0
    real = p.proc_stat_busy(read("proc-stat-before.txt"), read("proc-stat-after.txt"))
    assert 0 < real["cpu busy"].value <= 100


def test_bpftrace_maps():
    text = "Attaching 4 probes...\n\n@swb_calls: 1234\n@lb[MC]: 7\n@hist:\n[1, 2) 3 |@@|\n"
    assert p.bpftrace_maps(text) == {"swb_calls": 1234.0, "lb[MC]": 7.0}


def test_funclatency_bcc_form():
    text = ("     nsecs               : count     distribution\n"
            "         0 -> 1          : 0        |                                        |\n"
            "       256 -> 511        : 10       |****************************************|\n"
            "       512 -> 1023       : 5        |********************                    |\n"
            "\navg = 400 nsecs, total: 6000 nsecs, count: 15\n")
    lat = p.funclatency(text)
    assert lat.unit == "nsecs"
    assert lat.buckets == [(0, 1, 0), (256, 511, 10), (512, 1023, 5)]
    assert (lat.avg, lat.total, lat.count) == (400.0, 6000.0, 15)


def test_bpftrace_probe_output_from_the_vm():
    # The measurement script's output: gate lines, maps, per-CPU scratch maps,
    # the should_we_balance() histogram (kfunc attach, 7.3 guest, smt4).
    text = read("bpftrace-probe-kfunc.txt")
    maps = p.bpftrace_maps(text)
    assert maps["swb_calls"] == 2572 and maps["swb_idle_probes"] == 4535
    assert maps["lb_calls[1]"] == 2176 and maps["migrations"] == 282
    assert "on" in maps and "schedlab: counting" in text
    hist = p.bpftrace_hist(text)["swb_ns"]
    assert hist[0] == (512, 1023, 20) and hist[2] == (2048, 4095, 775)
    assert len(hist) == 14 and hist[-1] == (4 << 20, (8 << 20) - 1, 6)
    # A time is kept only when entry and exit pair up on one CPU: <= calls.
    assert sum(c for _, _, c in hist) <= maps["swb_calls"]


def test_funclatency_bcc_from_the_vm():
    # bookworm's funclatency-bpfcc 0.26 against the 7.3 guest: clang warnings
    # first, then the histogram and the avg line.
    lat = p.funclatency(read("funclatency-bcc.txt"))
    assert lat.unit == "nsecs"
    assert lat.count == 4070 and lat.avg == 114003
    assert lat.buckets[0] == (0, 1, 0) and len(lat.buckets) == 25
    assert (8192, 16383, 1187) in lat.buckets
    # The buckets bcc prints stop at the last non-empty one below its cap.
    assert sum(c for _, _, c in lat.buckets) == 3923
    assert p.hist_mean(lat.buckets) == pytest.approx(114003, rel=0.5)


def test_perf_bench_pipe_in_a_cgroup():
    m = p.perf_bench_sched(read("perf-bench-pipe-cgroup.txt"))
    assert m["perf sched pipe time"].value == pytest.approx(9.480)


def test_funclatency_libbpf_from_the_vm():
    # libbpf-tools funclatency (CO-RE): unit "nsec", no avg line, a '+' where
    # a bar overflows.
    lat = p.funclatency(read("funclatency-libbpf.txt"))
    assert lat.unit == "nsec" and lat.avg is None
    assert (8192, 16383, 987) in lat.buckets and lat.buckets[-1] == (16777216, 33554431, 2)
    assert sum(c for _, _, c in lat.buckets) == 2892
    assert p.UNIT_NS[lat.unit] == 1


def test_tbench_from_the_vm():
    m = p.dbench(read("tbench-vm.txt"))
    assert list(m.values())[0].value == pytest.approx(34.0297)


def test_cg_nested_shares():
    m = p.cg_nested(read("cg-nested.txt"))
    leaf0, nested = 25068399, 14428856 + 15333323
    assert m["nested share error"].value == pytest.approx(100 * (nested - leaf0) / (leaf0 + nested))
    assert 8.5 < m["nested share error"].value < 8.6
    assert not m["nested share error"].higher_is_better
    assert m["leaf0 share"].value == pytest.approx(100 * leaf0 / (leaf0 + nested))
    assert m["cg-nested cpus used"].value == pytest.approx((leaf0 + nested) / 7161207)
    assert p.cg_nested("cgn: cpus 8\n") == {}
    assert p.cg_nested(read("cg-nested.txt").replace("leaf0_usec 25068399",
                                                     "leaf0_usec -1")) == {}
