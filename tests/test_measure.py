"""Measurement plan script and run parsing (no boot)."""

import shutil
from pathlib import Path

import pytest

from schedlab import measure as m
from schedlab.util import LabError

DATA = Path(__file__).parent / "data" / "tools"


def test_guest_script_runs_every_workload_with_the_probe():
    plan = m.plan_workloads("stress-100,hackbench-process")
    text = m.guest_script(plan, runs=2, secs=7)
    for d in ("stress-100-0", "stress-100-1", "hackbench-process-0", "hackbench-process-1"):
        assert f'"$OUT/{d}"' in text
    assert text.count("bpftrace $PD/probe.bt >") == 4
    assert "kfunc:should_we_balance" in text and "kprobe:should_we_balance" in text
    assert "kprobe:idle_cpu /@swb_in[cpu]/" in text
    assert "SECS=7" in text and "kernel.sched_schedstats=1" in text
    assert "export NCPU SECS" in text          # the workloads run under bash -c
    assert "trap cleanup EXIT" in text and "timeout -k 10 120 bash -c" in text
    # Counting window: gate opened before the workload, closed after it.
    on, run, off = (text.index(x) for x in ("gate on counting", "timeout -k 10 120 bash -c",
                                            "gate off stopped"))
    assert on < run < off
    assert 'comm == "schedlab-on"' in text and "cat $PD/gate.bt >> $PD/probe.bt" in text
    # The gate goes last, also after the bpftrace latency fallback's lines.
    assert text.index("cat $PD/gate.bt >> $PD/probe.bt") > text.index("LAT=bpftrace")


def test_guest_script_is_valid_bash():
    import subprocess
    plan = [m.workload(n) for n in m.WORKLOADS]
    text = m.guest_script(plan, runs=1, secs=3)
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_bpftrace_snippets_per_attach_method():
    assert "kfunc:sched_balance_rq /@on/ { @lb_calls[args->idle]" in m.bpftrace_script(
        "lb", "kfunc")
    assert "kprobe:sched_balance_rq /@on/ { @lb_calls[arg3]" in m.bpftrace_script("lb", "kprobe")
    assert "kretfunc:should_we_balance" in m.bpftrace_script("swb", "kfunc")
    assert m.bpftrace_script("migrate", "kfunc").startswith("tracepoint:sched:")


def test_unknown_workload_and_probe_list_the_known_ones():
    with pytest.raises(LabError, match="known: stress-100"):
        m.plan_workloads("nope")
    with pytest.raises(LabError, match="known: swb"):
        m.probe_names("swb,nope")
    with pytest.raises(LabError, match="--schbench PATH"):
        m.plan_workloads("schbench")
    with pytest.raises(LabError, match="twice"):
        m.guest_script(m.plan_workloads("stress-50,stress-50"), 1, 1)


def test_missing_tools_name_their_package(monkeypatch):
    monkeypatch.setattr(m.shutil, "which", lambda tool, path=None: None)
    missing = m.missing_tools(m.plan_workloads("hackbench-process"), ["latency"], "bcc")
    assert "hackbench (Debian package rt-tests)" in missing
    assert "funclatency-bpfcc (Debian package bpfcc-tools)" in missing
    assert "bpftrace (Debian package bpftrace)" in missing


def test_host_config_key_ignores_localversion():
    a = "CONFIG_A=y\nCONFIG_LOCALVERSION=\"-schedlab-base\"\n# comment\n"
    b = "CONFIG_A=y\nCONFIG_LOCALVERSION=\"-schedlab-patched\"\n"
    assert m.host_config_key(a) == m.host_config_key(b) != m.host_config_key("CONFIG_A=m\n")


def make_run(tmp_path: Path, probe: str, status: str = "0") -> Path:
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(DATA / "stress-ng-cpu.txt", d / "workload.txt")
    shutil.copy(DATA / "schedstat-before.txt", d / "schedstat-before.txt")
    shutil.copy(DATA / "schedstat-after.txt", d / "schedstat-after.txt")
    shutil.copy(DATA / "proc-stat-before.txt", d / "stat-before.txt")
    shutil.copy(DATA / "proc-stat-after.txt", d / "stat-after.txt")
    (d / "status.txt").write_text(status + "\n")
    (d / "seconds.txt").write_text("10\n")
    (d / "probe.txt").write_text(probe)
    return d


def test_parse_complete_run(tmp_path):
    probe = ("Attaching 5 probes...\nschedlab: counting\nschedlab: stopped\n\n"
             "@lb_calls[2]: 300\n@lb_ns_sum[2]: 600000\n@on: 0\n"
             "@swb_calls: 200\n@swb_idle_probes: 1000\n@swb_ns_sum: 400000\n"
             "@swb_ns:\n[1K, 2K)             100 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
             "[2K, 4K)             100 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n")
    run = m.parse_run(make_run(tmp_path, probe), m.workload("stress-50"))
    assert run["complete"], run["problems"]
    met = run["metrics"]
    assert met["idle_cpu probes in should_we_balance"]["value"] == 1000
    assert met["idle_cpu probes in should_we_balance per s"]["value"] == 100
    assert met["should_we_balance calls"]["kind"] == "count"
    assert met["idle_cpu probes per should_we_balance call"]["value"] == 5
    assert met["sched_balance_rq newidle calls"]["value"] == 300
    assert met["sched_balance_rq newidle mean time"]["value"] == 2000
    assert met["sched_balance_rq busy calls"]["value"] == 0   # never written: zero
    assert met["should_we_balance mean time (bpftrace)"]["value"] == 2000
    assert run["histograms"]["should_we_balance"]["buckets"] == [(1024, 2047, 100),
                                                                (2048, 4095, 100)]
    assert met["stress-ng cpu bogo-ops/s"]["value"] == 81.74
    assert "balance SMT idle" in met and "cpu busy" in met


def test_probe_that_did_not_attach_makes_the_run_incomplete(tmp_path):
    run = m.parse_run(make_run(tmp_path, "ERROR: kprobe attach failed", status="0"),
                      m.workload("stress-50"))
    assert not run["complete"]
    assert any("did not attach" in p for p in run["problems"])


def test_a_map_dump_cut_short_makes_the_run_incomplete(tmp_path):
    # bpftrace killed before it printed anything: no window close, no exit dump.
    text = "Attaching 8 probes...\nschedlab: counting\n"
    d = make_run(tmp_path, text)
    run = m.parse_run(d, m.workload("stress-50"))
    assert not run["complete"]
    assert "bpftrace printed no maps" in run["problems"]


def test_maps_printed_at_window_close_survive_a_killed_bpftrace(tmp_path):
    # As seen under TCG: bpftrace hangs detaching fentry probes and is killed
    # after its maps were printed at the window's close.
    text = ("Attaching 8 probes...\nschedlab: counting\n@lb_calls[2]: 214\n"
            "@lb_ns_sum[2]: 428000\n@migrations: 9\nschedlab: stopped\n")
    d = make_run(tmp_path, text)
    (d / "notes.txt").write_text("bpftrace did not stop within 20 s after SIGINT: killed\n")
    run = m.parse_run(d, m.workload("stress-50"))
    assert run["complete"], run["problems"]
    assert run["metrics"]["sched_balance_rq newidle calls"]["value"] == 214
    assert run["metrics"]["sched_balance_rq newidle mean time"]["value"] == 2000
    assert run["notes"] == ["bpftrace did not stop within 20 s after SIGINT: killed"]


def test_every_probe_prints_its_maps_before_the_gate_says_stopped():
    for probe, maps in m.PROBE_MAPS.items():
        for method in ("kfunc", "kprobe"):
            text = m.bpftrace_script(probe, method)
            close = [ln for ln in text.splitlines() if 'comm == "schedlab-off"' in ln]
            assert len(close) == 1
            for name in maps:
                assert f"print(@{name});" in close[0]
                assert f"@{name}" in text.replace(close[0], "")   # filled elsewhere
    # In the plan script the gate (with 'stopped') is appended after the probes.
    text = m.guest_script(m.plan_workloads("stress-50"), runs=1, secs=1)
    assert "stop $BPF bpftrace" in text and "notes.txt 40" in text


def test_unfinished_and_timed_out_runs_are_incomplete(tmp_path):
    run = m.parse_run(tmp_path / "never-started", m.workload("stress-50"))
    assert not run["complete"] and "did not finish" in run["problems"][0]
    run = m.parse_run(make_run(tmp_path, "Attaching 1 probe...\n", status="124"),
                      m.workload("stress-50"))
    assert "workload hit its time limit" in run["problems"]


def test_collect_keeps_partial_plans(tmp_path, monkeypatch):
    monkeypatch.setattr(m, "results_dir", lambda label: tmp_path / "results" / label)
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "uname.txt").write_text("7.3.4\n")
    (raw / "attach.txt").write_text("kfunc\n")
    (raw / "latency-tool.txt").write_text("bpftrace\n")
    (raw / "probes-used.txt").write_text("swb\n")
    d = make_run(tmp_path, "Attaching 3 probes...\n@on: 0\n@swb_calls: 5\n")
    d.rename(raw / "stress-50-0")
    runs = m.collect("lbl", raw, m.plan_workloads("stress-50"), 2, {"topology": "x"}, {})
    assert [r["complete"] for r in runs] == [True, False]
    assert runs[0]["setting"]["probe_tool"] == "bpftrace/kfunc"
    assert (tmp_path / "results" / "lbl" / "run-stress-50-1.json").is_file()


def _run(metrics, probes=("swb", "migrate"), complete=True):
    return {"workload": "stress-50", "run": 0, "complete": complete, "problems": ["x"],
            "setting": {"probes": list(probes)},
            "metrics": {k: {"value": v} for k, v in metrics.items()}}


def test_check_runs_wants_every_metric():
    good = {"should_we_balance calls per s": 400.0,
            "idle_cpu probes in should_we_balance per s": 700.0,
            "idle_cpu probes per should_we_balance call": 1.7,
            "should_we_balance mean time (bpftrace)": 3e4, "migrations per s": 40.0,
            "balance SMT busy": 3.0, "cpu busy": 60.0}
    assert m.check_runs([_run(good)], ["swb", "migrate"]) == []
    bad = dict(good, **{"migrations per s": 0.0})
    del bad["cpu busy"]
    problems = m.check_runs([_run(bad, probes=("swb",))], ["swb", "migrate", "latency"])
    assert any("probe migrate was not used" in p for p in problems)
    assert any("probe latency was not used" in p for p in problems)
    assert any("CPU busy" in p for p in problems)
    assert any("incomplete" in p for p in m.check_runs([_run(good, complete=False)], ["swb"]))
    nan = dict(good, **{"cpu busy": float("nan")})
    assert any("cpu busy = nan" in p for p in m.check_runs([_run(nan)], ["swb"]))


def test_merge_boots_pools_runs_with_their_boot(tmp_path, monkeypatch):
    from schedlab import cli
    monkeypatch.setattr(m, "results_dir", lambda label: tmp_path / "results" / label)
    for boot in range(2):
        raw = tmp_path / f"raw{boot}"
        raw.mkdir()
        for name, text in (("uname.txt", "7.3.4\n"), ("attach.txt", "kfunc\n"),
                           ("latency-tool.txt", "bpftrace\n"), ("probes-used.txt", "swb\n")):
            (raw / name).write_text(text)
        for i in range(2):
            base = tmp_path / f"b{boot}{i}"
            base.mkdir()
            d = make_run(base, "Attaching 3 probes...\n@on: 0\n"
                         f"@swb_calls: {10 * boot + i + 1}\n")
            d.rename(raw / f"stress-50-{i}")
        m.collect(f"ab-base/boot-{boot}", raw, m.plan_workloads("stress-50"), 2,
                  {"topology": "x"}, {"key": "k"})
    stale = tmp_path / "results" / "ab-base" / "run-stress-50-9.json"
    stale.write_text("{}")
    runs = cli.merge_boots("ab-base", 2, "k2")
    assert [(r["boot"], r["run"]) for r in runs] == [(0, 0), (0, 1), (1, 2), (1, 3)]
    assert not stale.exists()
    top = tmp_path / "results" / "ab-base"
    assert sorted(p.name for p in top.glob("run-*.json")) == [
        f"run-stress-50-{i}.json" for i in range(4)]
    import json
    meta = json.loads((top / "plan.json").read_text())
    assert meta["runs"] == 4 and meta["boots"] == 2 and meta["key"] == "k2"
    assert all(r["label"] == "ab-base" for r in runs)


def test_selftest_verdict():
    from schedlab import cli
    tap = "# Totals: pass:3 fail:0 xfail:0 xpass:0 skip:0 error:0\n"
    assert cli.selftest_verdict(tap, "0") == (True, "3 passed, 0 failed, 0 skipped, 0 errors")
    skipped = "# Totals: pass:0 fail:0 xfail:0 xpass:0 skip:3 error:0\n"
    assert not cli.selftest_verdict(skipped, "0")[0]
    assert not cli.selftest_verdict(tap, "1")[0]
    assert "no kselftest totals" in cli.selftest_verdict("Kernel panic", "")[1]


def test_parse_knobs_accepts_name_value_and_rejects_the_rest():
    assert m.parse_knobs(["newidle_min_avg_idle_ns=500000", "verbose=Y"]) == {
        "newidle_min_avg_idle_ns": "500000", "verbose": "Y"}
    assert m.parse_knobs(None) == {}
    for bad in ("noequals", "=1", "Upper=1", "a=", "a=1;reboot", "a=$(x)", "../x=1"):
        with pytest.raises(LabError, match="NAME=VALUE"):
            m.parse_knobs([bad])
    with pytest.raises(LabError, match="twice"):
        m.parse_knobs(["a=1", "a=2"])


def _knob_script(tmp_path, knobs, body="true"):
    """The plan script's knob handling, run on a folder standing for debugfs."""
    import subprocess
    d = tmp_path / "sched"
    out = tmp_path / "out"
    out.mkdir()
    lines = ["set -u", f'OUT="{out}"', "KNOB_RESTORE=",
             'trap \'[ -n "$KNOB_RESTORE" ] && eval "$KNOB_RESTORE"\' EXIT',
             *m._knob_lines(knobs), body]
    text = "\n".join(lines).replace(m.KNOB_DIR, str(d))
    rc = subprocess.run(["bash", "-c", text], capture_output=True, text=True).returncode
    return d, out, rc


def test_knobs_are_written_checked_and_restored(tmp_path):
    (tmp_path / "sched").mkdir()
    (tmp_path / "sched" / "newidle_min_avg_idle_ns").write_text("0\n")
    seen = tmp_path / "seen"
    d, out, rc = _knob_script(tmp_path, {"newidle_min_avg_idle_ns": "never"},
                              f"cat {tmp_path}/sched/newidle_min_avg_idle_ns > {seen}")
    assert rc == 0
    assert seen.read_text() == "never\n"                       # set during the plan
    assert (out / "knobs.txt").read_text() == "newidle_min_avg_idle_ns=never\n"
    assert (d / "newidle_min_avg_idle_ns").read_text() == "0\n"   # restored at exit
    assert not (out / "knob-error.txt").exists()


def test_a_missing_knob_stops_the_plan(tmp_path):
    (tmp_path / "sched").mkdir()
    ran = tmp_path / "ran"
    d, out, rc = _knob_script(tmp_path, {"no_such_knob": "1"}, f"touch {ran}")
    assert rc == 3 and not ran.exists()
    assert "is not there or not writable" in (out / "knob-error.txt").read_text()


def test_a_knob_that_reads_back_otherwise_stops_the_plan(tmp_path):
    # A write that succeeds but does not stick (as a parser that silently
    # truncates would): a knob file that is /dev/null.
    (tmp_path / "sched").mkdir()
    (tmp_path / "sched" / "k").symlink_to("/dev/null")
    ran = tmp_path / "ran"
    d, out, rc = _knob_script(tmp_path, {"k": "9"}, f"touch {ran}")
    assert rc == 3 and not ran.exists()
    assert "k: writing 9 gave " in (out / "knob-error.txt").read_text()


def test_no_knobs_leave_an_empty_knobs_file():
    assert m._knob_lines({}) == [': > "$OUT/knobs.txt"']


def test_overloaded_hackbench_has_two_groups_per_cpu():
    w = m.workload("hackbench-overload")
    assert "-g $(( 2 * NCPU ))" in w.command and not w.timed


def test_ab_arms_parse_and_pair():
    from schedlab import cli
    assert cli.parse_arms(None) == list(cli.DEFAULT_ARMS)
    arms = cli.parse_arms(["base=base", "default=patched",
                           "500us=patched:newidle_min_avg_idle_ns=500000",
                           "never=patched:newidle_min_avg_idle_ns=never"])
    assert arms[2] == cli.Arm("500us", "patched", (("newidle_min_avg_idle_ns", "500000"),))
    pairs = [(a.name, b.name) for a, b in cli.arm_pairs(arms)]
    assert pairs == [("base", "default"), ("base", "500us"), ("base", "never"),
                     ("default", "500us"), ("default", "never")]
    # Two arms: one pair, whatever their names.
    two = cli.parse_arms(["a=base", "b=patched:x=1"])
    assert [(a.name, b.name) for a, b in cli.arm_pairs(two)] == [("a", "b")]
    for bad in (["x=nope"], ["x"], ["x=base"], ["x=base", "x=patched"],
                ["a=base", "-b=patched"], ["a=base", "b=patched:novalue"]):
        with pytest.raises(LabError):
            cli.parse_arms(bad)


def test_avgidle_probe_reads_the_value_the_gate_compared(tmp_path):
    kf = m.bpftrace_script("avgidle", "kfunc")
    assert "kfunc:update_rq_avg_idle /@on && args->rq->idle_stamp/" in kf
    assert "if ($a < 500000) { @ai_lt500 = count(); }" in kf
    kp = m.bpftrace_script("avgidle", "kprobe")
    assert "kprobe:update_rq_avg_idle /@on && ((struct rq *)arg0)->idle_stamp/" in kp
    text = ("Attaching 3 probes...\nschedlab: counting\n@ai_n: 200\n@ai_lt500: 50\n"
            "@ai_sum: 160000000\nschedlab: stopped\n")
    run = m.parse_run(make_run(tmp_path, text), m.workload("stress-50"),
                      probes_used=["avgidle"])
    met = run["metrics"]
    assert met["idle periods ended"]["value"] == 200
    assert met["avg_idle at newidle mean"]["value"] == 800        # us
    assert met["avg_idle at newidle below 500 us"]["value"] == 25  # %


def test_reparse_reads_the_raw_outputs_again(tmp_path):
    import json
    raw = tmp_path / "raw"
    raw.mkdir()
    d = make_run(raw, "Attaching 2 probes...\nschedlab: counting\n@lb_calls[0]: 3\n"
                      "@lb_ns_sum[0]: 300\nschedlab: stopped\n")
    d.rename(raw / "stress-50-0")
    folder = tmp_path / "results"
    folder.mkdir()
    old = {"workload": "stress-50", "run": 0, "raw_dir": str(raw), "complete": True,
           "setting": {"probes": ["lb"], "latency_tool": "none", "topology": "smt4"},
           "metrics": {}, "accel": "tcg-single"}
    (folder / "run-stress-50-0.json").write_text(json.dumps(old))
    (run,) = m.reparse(folder)
    assert run["metrics"]["sched_balance_rq busy calls"]["value"] == 3
    assert run["metrics"]["sched_balance_rq newidle total time"]["value"] == 0
    assert run["accel"] == "tcg-single" and run["setting"]["topology"] == "smt4"
    assert json.loads((folder / "run-stress-50-0.json").read_text())["metrics"] == \
        run["metrics"]
    (raw / "knob-error.txt").write_text("k: writing 9 gave 7\n")
    (run,) = m.reparse(folder)
    assert not run["complete"] and "knob: k: writing 9 gave 7" in run["problems"]


def test_scratch_labels_go_under_work(tmp_path, monkeypatch):
    from schedlab import measure as m
    monkeypatch.setattr(m, "work_dir", lambda: tmp_path / "work")
    assert m.results_dir(m.SCRATCH + "ci-integration") == tmp_path / "work/results/ci-integration"
    assert m.results_dir("swb-smt8").parts[-2:] == ("results", "swb-smt8")
