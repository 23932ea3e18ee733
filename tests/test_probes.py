"""Probe and workload records: programs, maps, metrics, the summary tables."""

import re
from pathlib import Path

import pytest

from schedlab.core.util import LabError
from schedlab.measuring import compare, parsers, plots
from schedlab.measuring import probe_parsers as pp
from schedlab.measuring import probes as probemod
from schedlab.measuring import workloads as workmod


def test_bpftrace_programs_per_attach_method():
    lb = probemod.PROBES["lb"]
    assert "kfunc:sched_balance_rq /@on/ { @lb_calls[args->idle]" in lb.bpftrace("kfunc")
    assert "kprobe:sched_balance_rq /@on/ { @lb_calls[arg3]" in lb.bpftrace("kprobe")
    assert "kretfunc:should_we_balance" in probemod.PROBES["swb"].bpftrace("kfunc")
    assert "tracepoint:sched:sched_migrate_task" in probemod.PROBES["migrate"].bpftrace("kfunc")
    assert probemod.PROBES["latency"].bpftrace("kfunc") == ""
    for p in probemod.PROBES.values():
        assert "%" not in re.sub(r"%[a-z]", "", p.bpftrace("kprobe")), p.name


def test_avgidle_probe_reads_the_value_the_gate_compared():
    kf = probemod.PROBES["avgidle"].bpftrace("kfunc")
    assert "kfunc:update_rq_avg_idle /@on && args->rq->idle_stamp/" in kf
    assert "if ($a < 500000) { @ai_lt500 = count(); }" in kf
    kp = probemod.PROBES["avgidle"].bpftrace("kprobe")
    assert "kprobe:update_rq_avg_idle /@on && ((struct rq *)arg0)->idle_stamp/" in kp
    assert "$c = ((struct rq *)arg0)->sd->max_newidle_lb_cost;" in kp
    text = ("@ai_n: 10\n@ai_sum: 5000000\n@ai_lt500: 4\n@ai_gate[0]: 3\n@ai_gate[2]: 5\n"
            "@ai_gate[4]: 2\n")
    p = probemod.Parsed(parsers.bpftrace_maps(text), 1.0, text)
    probemod.PROBES["avgidle"].parse(p)
    name = "idle entries with avg_idle below {}x the lowest max_newidle_lb_cost"
    assert [p.metrics[name.format(x)].value for x in (1, 2, 4, 10)] == [30.0, 30.0, 80.0, 80.0]


def test_every_probe_prints_its_maps_before_the_gate_says_stopped():
    checked = set()
    for p in probemod.PROBES.values():
        for method in ("kfunc", "kprobe"):
            text = p.bpftrace(method)
            if not text:
                continue
            close = [ln for ln in text.splitlines() if 'comm == "schedlab-off"' in ln]
            assert len(close) == 1
            for name in p.maps:
                assert f"print(@{name});" in close[0]
                assert f"@{name}" in text.replace(close[0], "")   # filled elsewhere
            checked.add(p.name)
    # Every probe but those that are not bpftrace programs was read.
    assert len(checked) >= len(probemod.PROBES) // 2 and "swb-cost" in checked


def test_unknown_workload_and_probe_list_the_known_ones():
    with pytest.raises(LabError, match="known: stress-100"):
        workmod.plan_workloads("nope")
    with pytest.raises(LabError, match="known: swb"):
        probemod.probe_names("swb,nope")
    with pytest.raises(LabError, match="--schbench PATH"):
        workmod.plan_workloads("schbench")


def test_missing_tools_name_their_package(monkeypatch):
    from schedlab.measuring import plan as planmod
    monkeypatch.setattr(workmod.shutil, "which", lambda tool, path=None: None)
    plan = planmod.make_plan("hackbench-process", "latency", latency_tool="bcc")
    missing = workmod.missing_tools(plan.needs())
    assert "hackbench (Debian package rt-tests)" in missing
    assert "funclatency-bpfcc (Debian package bpfcc-tools)" in missing
    assert "bpftrace (Debian package bpftrace)" in missing


def test_overloaded_hackbench_has_two_groups_per_cpu():
    w = workmod.workload("hackbench-overload")
    assert "-g $(( 2 * NCPU ))" in w.command and not w.timed


def test_workload_scripts_are_files():
    for w in workmod.WORKLOADS.values():
        assert "\n" not in w.command
    assert "guest/workloads/tg-gather.sh switch 2 seed 8" in \
        workmod.workload("tg-switch-d2-seed-t8").command


def test_tg_workloads_are_made_from_their_names():
    w = workmod.workload("tg-hackbench-d1-s1.5-t16")
    assert w.command.endswith("tg-gather.sh hackbench 1 1.5 16") and w.timed
    assert "bpftrace" in w.tools and "hackbench" in w.tools
    assert workmod.workload("tg-dbench-d2-seed-t4").timed
    for bad in ("tg-dbench-d3-seed-t4", "tg-nope-d1-seed-t4", "tg-dbench-d1-s-t4"):
        with pytest.raises(LabError, match="unknown workload"):
            workmod.workload(bad)
    with pytest.raises(LabError, match="2 tasks or more"):
        workmod.workload("tg-switch-d1-seed-t1")


def test_the_summary_tables_name_only_metrics_the_records_make():
    # Renaming a metric in a record renames it in every table: the tables are
    # built from the records, and what the old hand-written lists named is there.
    old_headline = re.compile(
        r"^(should_we_balance calls per s|idle_cpu probes in should_we_balance per s|"
        r"idle_cpu probes per should_we_balance call|"
        r"sched_balance_rq (busy|idle|newidle) calls per s|"
        r"sched_balance_rq newidle (calls|total time)|avg_idle at newidle below 500 us|"
        r"migrations per s|cpu busy|"
        r"hackbench (time|messages/s)|perf sched \w+ time|stress-ng \w+ bogo-ops/s|"
        r"tg (achieved/entitled|cpus carrying >=10% of its time|wakeups placed on a busy cpu)|"
        r"hackbench rounds per s|nested share error|leaf0 share|"
        r"(dbench|tbench) throughput|schbench rps|"
        r"schbench (wakeup|request) p(50|99|99\.9)|"
        r"((hackbench|perf-messaging) messages|perf-pipe round-trips)/s(, own time)?|"
        r"should_we_balance mean time \(funclatency\))$")
    names = [m.name for m in probemod.catalogue()] + [
        r for w in workmod.all_results() for r in w.results] + [
        "perf sched pipe ops/s", "perf sched messaging ops/s", "perf sched pipe usecs/op"]
    cost = {m.name for p in probemod.COST_PROBES for m in p.metrics}
    cost |= {m.name for p in ("lb-phase", "lb-share", "lb-reads", "scan-cost",
                              "ni", "insns", "lines", "cycles", "c2c")
             for m in probemod.PROBES[p].metrics}
    cost |= {m.name for m in probemod.PROBES["migrate"].metrics if m.per_domain}
    assert [n for n in names if old_headline.match(n)] == [
        n for n in names if re.match(compare.HEADLINE, n) and n not in cost]
    # The cost probes' metrics are headline metrics, per sched domain too.
    assert re.match(compare.HEADLINE, "should_we_balance instructions per call, median (SMT)")
    assert not re.match(compare.HEADLINE, "should_we_balance calls (SMT)")
    assert plots.COUNT_METRICS == ("idle_cpu probes in should_we_balance per s",
                                   "should_we_balance calls per s",
                                   "sched_balance_rq newidle calls per s", "migrations per s")
    assert plots.TIME_METRICS == ("should_we_balance mean time (funclatency)",
                                  "should_we_balance mean time (bpftrace)",
                                  "sched_balance_rq newidle mean time")
    assert [t for t, _ in compare.SWEEP_COLUMNS] == [
        "cpu busy %", "result", "newidle balance runs", "newidle balance time (ms)",
        "avg_idle < 500 us %"]


def _parsed(probe: str, out: str, **kw) -> "probemod.Parsed":
    """PROBE's parser run on bpftrace output OUT (a 10 s window unless KW says)."""
    from schedlab.measuring import parsers
    kw.setdefault("seconds", 10.0)
    p = probemod.Parsed(maps=parsers.bpftrace_maps(out), probe_out=out, **kw)
    probemod.PROBES[probe].parse(p)
    return p


def test_lb_reads_divides_reads_by_balances_per_level_and_idle_type():
    out = "\n".join(["@lbr_calls[SMT, 0]: 40", "@lbr_calls[MC, 0]: 10", "@lbr_calls[MC, 2]: 5",
                     "@lbr_reads[SMT, 0]: 80", "@lbr_reads[MC, 0]: 30", "@lbr_reads[MC, 2]: 80",
                     "@lbr_calls[NUMA, 1]: 2"])
    got = {k: m.value for k, m in _parsed("lb-reads", out).metrics.items()}
    assert got["runqueue reads per busy balance (SMT)"] == 2.0
    assert got["runqueue reads per busy balance (MC)"] == 3.0
    assert got["runqueue reads per newidle balance (MC)"] == 16.0
    assert got["group statistics computed, busy (MC)"] == 10
    # A level whose balances read nothing (every group cached) reads 0, not missing.
    assert got["runqueue reads per idle balance (NUMA)"] == 0.0
    kf = probemod.PROBES["lb-reads"].bpftrace("kfunc")
    assert "kfunc:sched_balance_find_src_group /@on/ { $e = (struct lb_env *)args->env;" in kf
    assert "kprobe:cpu_util_cfs /@lbr_sd[cpu]/" in probemod.PROBES["lb-reads"].bpftrace("kprobe")


def test_migrations_by_the_lowest_domain_spanning_both_cpus():
    # 4 CPUs: SMT pairs {0,1} {2,3}, MC all four; CPU 4 unknown to schedstat.
    stat = "\n".join(["version 17", "timestamp 1",
                       "cpu0 0 0 0 0 0 0 0 0 0", "domain0 SMT 03 0", "domain1 MC 0f 0",
                       "cpu1 0 0 0 0 0 0 0 0 0", "domain0 SMT 03 0", "domain1 MC 0f 0",
                       "cpu2 0 0 0 0 0 0 0 0 0", "domain0 SMT 0c 0", "domain1 MC 0f 0"])
    out = "\n".join(["@migrations: 10", "@mig_pair[0, 1]: 3", "@mig_pair[1, 0]: 1",
                      "@mig_pair[0, 2]: 4", "@mig_pair[2, 1]: 1", "@mig_pair[2, 4]: 1"])
    got = {k: m.value for k, m in _parsed("migrate", out, seconds=2.0,
                                          schedstat=stat).metrics.items()}
    assert got["migrations per s"] == 5.0
    assert got["migrations per s, lowest shared domain (SMT)"] == 2.0
    assert got["migrations share, lowest shared domain (SMT)"] == 40.0
    assert got["migrations share, lowest shared domain (MC)"] == 50.0
    assert got["migrations share, lowest shared domain (none)"] == 10.0
    assert "mig_pair[args->orig_cpu, args->dest_cpu]" in probemod.PROBES["migrate"].bpftrace(
        "kfunc")
    # Without /proc/schedstat (a host kernel without SCHEDSTATS): the total only.
    p = _parsed("migrate", out, seconds=2.0)
    assert sorted(p.metrics) == ["migrations", "migrations per s"] and not p.problems


def test_cost_by_domain_and_idle_type_names_both():
    # Level 1 (MC) busy is key 4, level 0 (SMT) newly idle key 2.
    out = "\n".join(["@fsg_calls[4]: 3", "@fsg_calls[2]: 1", "@fsg_n[4]: 3", "@fsg_n[2]: 1",
                     "@fsg_d[4, 1000]: 2", "@fsg_d[4, 1100]: 1", "@fsg_d[2, 500]: 1",
                     "@fsg_name[4]: MC", "@fsg_name[2]: SMT"])
    p = _parsed("fsg-cost", out, overhead=0.0)
    func = "sched_balance_find_src_group"
    assert p.metrics[f"{func} instructions per call, median (MC, busy)"].value == 1012   # bucket middle
    assert p.metrics[f"{func} calls (SMT, newidle)"].value == 1
    kf = probemod.PROBES["fsg-cost"].bpftrace("kfunc")
    assert "$k = args->env->sd->level * 4 + args->env->idle;" in kf


def test_tg_workloads_take_a_load():
    w = workmod.workload("tg-switch-d2-seed-t8-l1.5")
    assert w.command.endswith("tg-gather.sh switch 2 seed 8 1.5")
    assert "1.5 runnable tasks per CPU" in w.what
    with pytest.raises(LabError):
        workmod.workload("tg-switch-d2-seed-t8-l0")


def test_ni_probe_gives_the_ratio_state_and_the_gate_shares_per_domain():
    text = ("@ni_n[0]: 10\n@ni_n[1]: 4\n@ni_name[0]: SMT\n@ni_name[1]: MC\n"
            "@ni_ratio[0]: 7168\n@ni_off[0]: 5\n@ni_recomputed[1]: 3\n@ni_cost[0]: 2500000\n"
            "@ni_gate[0, 0]: 2\n@ni_gate[0, 1]: 3\n@ni_gate[0, 4]: 5\n@ni_gate[1, 3]: 4\n")
    p = probemod.Parsed(parsers.bpftrace_maps(text), 2.0, text)
    probemod.PROBES["ni"].parse(p)
    m = {k: v.value for k, v in p.metrics.items()}
    assert m["newidle balances (SMT)"] == 10 and m["newidle balances (MC)"] == 4
    assert m["NI ratio at newidle balance, mean (SMT)"] == 716.8
    assert m["NI ratio at 1024 (die off) (SMT)"] == 50.0
    assert m["NI ratio recomputations seen (MC)"] == 3
    assert m["NI ratio recomputations seen (SMT)"] == 0
    assert m["max_newidle_lb_cost at newidle balance, mean (SMT)"] == 250.0   # us
    assert [m[f"avg_idle below {x}x max_newidle_lb_cost (SMT)"] for x in (1, 2, 4, 10)] == [
        20.0, 50.0, 50.0, 50.0]
    assert m["avg_idle below 10x max_newidle_lb_cost (MC)"] == 100.0
    prog = probemod.PROBES["ni"].bpftrace("kprobe")
    assert "$sd = ((struct sched_domain *)arg2);" in prog and "%" not in prog.replace("%d", "")
    assert "args->this_rq->avg_idle" in probemod.PROBES["ni"].bpftrace("kfunc")


def test_latency_lb_runs_beside_latency_with_its_tool(tmp_path):
    from schedlab.measuring import plan as planmod
    from schedlab.measuring import probe_parsers as pp
    from schedlab.measuring import results as resmod
    from schedlab.measuring import workloads as workmod
    with pytest.raises(LabError, match="beside the latency probe"):
        probemod.probe_names("swb,latency-lb")
    assert probemod.probe_names("latency,latency-lb") == ["latency", "latency-lb"]
    # The guest gets the functions only when the probe is asked for.
    for asked, more in (("latency,latency-lb", "sched_balance_rq sched_balance_newidle"),
                        ("latency", "")):
        folder = planmod.write(planmod.make_plan("stress-100", asked), tmp_path / asked)
        env = (folder / "plan.env").read_text()
        assert any(line.startswith("LATENCY_MORE=") and more in line
                   and (more or line.strip() in ("LATENCY_MORE=", "LATENCY_MORE=''"))
                   for line in env.splitlines())
    # One funclatency output per function, read from latency-FUNCTION.txt.
    run = tmp_path / "stress-100-0"
    run.mkdir()
    bcc = (Path(__file__).parent / "data" / "tools" / "funclatency-bcc.txt").read_text()
    (run / "latency.txt").write_text(bcc)
    (run / "latency-sched_balance_rq.txt").write_text(bcc)
    (run / "status.txt").write_text("0\n")
    w = workmod.WORKLOADS["stress-100"]
    got = resmod.parse_run(run, w, ["latency", "latency-lb"], "bcc", schedstat=False)
    assert got.metrics["sched_balance_rq mean time (funclatency)"]["value"] == 114003
    assert "sched_balance_rq" in got.histograms
    assert any("sched_balance_newidle()" in x for x in got.problems)
    # bpftrace's fallback has no histogram of them (the guest says so among
    # the probes missing): nothing guessed, and the run stays complete.
    p = pp.Parsed({}, 1.0, "", latency_tool="bpftrace",
                  latency_more={"sched_balance_rq": bcc})
    pp.latency_more(p)
    assert not p.metrics and not p.problems


def test_each_funclatency_function_gets_its_histogram_plot():
    h = {"tool": "bcc", "unit": "nsecs", "buckets": [[256, 511, 10], [512, 1023, 5]]}
    runs = [{"workload": "stress-100", "complete": True,
             "histograms": {"should_we_balance": h, "sched_balance_newidle": h}}]
    data = plots.plot_data(runs, runs, [], "a", "b")
    assert [x["function"] for x in data["histograms"]] == ["should_we_balance",
                                                           "sched_balance_newidle"]


PERF_STAT = """# started on Sat Nov 28 23:00:00 2026

4000000000,,cycles,2000123456,100.00,,
6000000000,,instructions,2000123456,100.00,1.50,insn per cycle
"""


def test_cycles_from_perf_stat():
    p = pp.Parsed({}, 2.0, "", perf_stat=PERF_STAT)
    pp.cycles(p)
    assert p.problems == []
    assert p.metrics["cycles (perf stat)"].value == 4e9
    assert p.metrics["cycles per s (perf stat)"].value == 2e9
    assert p.metrics["instructions per cycle (perf stat)"].value == 1.5
    assert p.metrics["instructions per cycle (perf stat)"].higher_is_better


def test_cycles_not_counted_is_a_problem_of_the_run():
    text = "<not counted>,,cycles,0,0.00,,\n<not supported>,,instructions,0,100.00,,\n"
    assert pp.perf_stat_counts(text) == {"cycles": None, "instructions": None}
    p = pp.Parsed({}, 2.0, "", perf_stat=text)
    pp.cycles(p)
    assert not p.metrics and "counted no cycles" in p.problems[0]
    p = pp.Parsed({}, 2.0, "")
    pp.cycles(p)
    assert "no perf-stat.txt" in p.problems[0]


@pytest.mark.parametrize("probe", ["cycles", "c2c"])
def test_pmu_probes_stay_out_of_the_vm_integration_and_in_the_kit(probe):
    from schedlab import pipeline
    from schedlab.kit import arms, hw
    assert probe not in pipeline.INTEGRATION.probes
    kit = arms.KIT_ARMS[:2]
    assert probe in hw.request(kit, 3, 1, 5, c2c=True).plan.probes
    # c2c's sampling changes what the other probes measure: only when asked.
    assert (probe in hw.request(kit, 3, 1, 5).plan.probes) == (probe == "cycles")
    # The throughput pass has none, whatever is asked.
    assert hw.request(kit, 3, 1, 5, c2c=True, kind=hw.THROUGHPUT).plan.probes == ()


# perf c2c report --stats in perf's layout (builtin-c2c.c's format), the
# numbers made up; a percentage line, and a name that comes twice (the
# second block's is not the load count).
C2C_STATS = """=================================================
            Trace Event Information
=================================================
  Total records                     :      81234
  Locked Load/Store Operations      :       1200
  Load Operations                   :      40000
  Load L1D hit                      :      30000
  Load Local HITM                   :        300
  Load Remote HITM                  :        100
  Load Remote HIT                   :         20
  LLC Misses to Remote cache (HITM) :       12.5%
  Store Operations                  :      41234

=================================================
    Global Shared Cache Line Event Information
=================================================
  Total Shared Cache Lines          :         57
  Load Operations                   :        999
"""


def test_c2c_from_perf_c2c_stats():
    counts = pp.c2c_stat_counts(C2C_STATS)
    assert counts["Load Operations"] == 40000          # the first block's
    assert "LLC Misses to Remote cache (HITM)" not in counts   # a percentage
    p = pp.Parsed({}, 2.0, "", c2c_stats=C2C_STATS)
    pp.c2c(p)
    assert (p.problems, {n: m.value for n, m in p.metrics.items()}) == ([], {
        "sampled loads (perf c2c)": 40000, "local HITM loads (perf c2c)": 300,
        "remote HITM loads (perf c2c)": 100, "HITM per 1000 sampled loads (perf c2c)": 10.0})
    # Fewer lines found modified elsewhere is better.
    assert not any(m.higher_is_better for m in p.metrics.values())


def test_c2c_without_its_stats_leaves_the_run_whole():
    # The guest notes why (notes.txt); the run's scheduler counts stand.
    for text in ("failed to open c2c.data: No such file\n", ""):
        p = pp.Parsed({}, 2.0, "", c2c_stats=text)
        pp.c2c(p)
        assert not p.metrics and not p.problems
