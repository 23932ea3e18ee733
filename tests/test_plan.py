"""The plan folder and the plan runner (guest/run-plan.sh), run on this
machine against fake tools (tests/data/fakebin)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from schedlab.core.util import LabError
from schedlab.measuring import parsers
from schedlab.measuring import plan as planmod
from schedlab.measuring import probes as probemod
from schedlab.measuring import results as resmod
from schedlab.measuring import workloads as workmod

FAKEBIN = Path(__file__).parent / "data" / "fakebin"


def test_plan_folder_holds_what_the_runner_reads(tmp_path):
    plan = planmod.make_plan("stress-100,hackbench-process", "swb,lb,migrate", runs=2,
                             seconds=7, knobs={"newidle_cost_pct": "400"})
    d = planmod.write(plan, tmp_path / "plan")
    env = (d / "plan.env").read_text()
    assert "SECS=7\n" in env and "LIMIT=120\n" in env and "ATTACH=auto\n" in env
    assert (d / "runs.txt").read_text().split("\n")[:4] == [
        "stress-100 0", "stress-100 1", "hackbench-process 0", "hackbench-process 1"]
    assert (d / "cmd" / "stress-100").read_text().startswith("stress-ng --cpu $NCPU")
    assert (d / "probes.txt").read_text() == ("swb should_we_balance idle_cpu\n"
                                             "lb sched_balance_rq\nmigrate \n")
    assert (d / "knobs.txt").read_text() == "newidle_cost_pct 400\n"
    assert "kprobe:idle_cpu /@swb_in[cpu]/" in (d / "bt" / "swb.kprobe.bt").read_text()
    assert "kretfunc:should_we_balance" in (d / "bt" / "swb.kfunc.bt").read_text()
    assert 'comm == "schedlab-on"' in (d / "bt" / "gate.bt").read_text()
    # Every line of the plan folder is one line: no script is generated.
    assert all("\n" not in w.command for w in plan.workloads)


def test_a_workload_twice_is_refused(tmp_path):
    with pytest.raises(LabError, match="twice"):
        planmod.write(planmod.make_plan("stress-50,stress-50"), tmp_path)


def test_parse_knobs_accepts_name_value_and_rejects_the_rest():
    assert planmod.parse_knobs(["newidle_cost_pct=400", "verbose=Y"]) == {
        "newidle_cost_pct": "400", "verbose": "Y"}
    assert planmod.parse_knobs(None) == {}
    for bad in ("noequals", "=1", "Upper=1", "a=", "a=1;reboot", "a=$(x)", "../x=1"):
        with pytest.raises(LabError, match="NAME=VALUE"):
            planmod.parse_knobs([bad])
    with pytest.raises(LabError, match="twice"):
        planmod.parse_knobs(["verbose=1", "verbose=2"])
    with pytest.raises(LabError, match="not a knob the lab knows"):
        planmod.parse_knobs(["nosuch=1"])


def _fake_plan(tmp_path, knobs=(), command="echo Time: 1.5"):
    w = workmod.Workload("fake", command, parsers.hackbench, (), "a fake workload",
                         timed=False)
    plan = planmod.Plan((w,), ("migrate",), runs=2, seconds=1, knobs=tuple(knobs))
    d = planmod.write(plan, tmp_path / "plan")
    knob_dir = tmp_path / "sched"
    knob_dir.mkdir()
    env = (d / "plan.env").read_text().replace(planmod.KNOB_DIR, str(knob_dir))
    (d / "plan.env").write_text(env)
    return plan, d, knob_dir


def _run_plan(tmp_path, d):
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PATH=f"{FAKEBIN}:{os.environ['PATH']}")
    proc = subprocess.run(["bash", str(planmod.runner()), str(d), str(out)], env=env,
                          capture_output=True, text=True, timeout=120)
    return out, proc


def test_the_runner_runs_every_run_between_the_gates(tmp_path, monkeypatch):
    plan, d, _ = _fake_plan(tmp_path)
    out, proc = _run_plan(tmp_path, d)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(planmod.RUN_MARK) == 2
    assert (out / "attach.txt").read_text() == "kprobe\n"
    assert (out / "probes-used.txt").read_text() == "migrate\n"
    monkeypatch.setattr(resmod, "results_dir", lambda label: tmp_path / "results" / label)
    runs = resmod.collect("x", out, plan.workloads, plan.runs, resmod.Setting(topology="t"),
                          "tcg")
    assert [r.metrics["hackbench time"]["value"] for r in runs] == [1.5, 1.5]
    assert all(r.metrics["migrations"]["value"] == 7 for r in runs)
    assert all("bpftrace printed no maps" not in r.problems for r in runs)
    assert (out / "fake-1" / "command.txt").read_text() == "echo Time: 1.5\n"


def _clean_plan(tmp_path, command):
    """A plan without probes, its runner looking at stand-ins for tracefs and
    the kprobes list, and checking every second."""
    w = workmod.Workload("fake", command, parsers.hackbench, (), "a fake workload",
                         timed=False)
    plan = planmod.Plan((w,), (), runs=1, seconds=1)
    assert plan.clean and "bpftrace" not in plan.needs()
    d = planmod.write(plan, tmp_path / "plan")
    tracefs = tmp_path / "tracing"
    tracefs.mkdir()
    (tracefs / "current_tracer").write_text("nop\n")
    (tracefs / "set_event").write_text("")
    env = (d / "plan.env").read_text()
    assert "WATCH_EVERY=1\n" in env      # a third of --seconds, at least 1
    for old, new in ((planmod.TRACEFS, tracefs), (planmod.KPROBES_LIST, tmp_path / "kprobes")):
        assert str(old) in env
        env = env.replace(str(old), str(new))
    (d / "plan.env").write_text(env)
    return plan, d, tracefs


def test_a_clean_plan_attaches_nothing_and_checks_every_few_seconds(tmp_path):
    for seconds, every in ((30, 5), (6, 2), (3, 1)):
        plan = planmod.make_plan("stress-100", probemod.NO_PROBES, seconds=seconds)
        assert plan.probes == () and plan.clean and plan.needs() == ["stress-ng"]
        env = (planmod.write(plan, tmp_path / str(seconds)) / "plan.env").read_text()
        assert "CLEAN=1\n" in env and f"WATCH_EVERY={every}\n" in env
    assert "CLEAN=0\n" in (planmod.write(planmod.make_plan("stress-100", "swb"),
                                         tmp_path / "probes") / "plan.env").read_text()


def test_a_clean_run_has_nothing_attached_and_the_checks_on_record(tmp_path, monkeypatch):
    plan, d, _ = _clean_plan(tmp_path, "sleep 3.5; echo Time: 1.5")
    # powerpc's kernel puts a kprobe of its own on the return-probe
    # trampoline at boot: always there, nothing attached.
    (tmp_path / "kprobes").write_text(
        "c00000000005ef14  k  arch_rethook_trampoline+0x0    [OPTIMIZED]\n")
    out, proc = _run_plan(tmp_path, d)
    assert proc.returncode == 0, proc.stderr
    assert (out / "pass.txt").read_text() == "clean\n"
    run_dir = out / "fake-0"
    assert not (run_dir / "probe.txt").exists() and not (run_dir / "tools.txt").exists()
    watch = (run_dir / "watch.txt").read_text().splitlines()
    assert watch[0] == "before: clean" and watch[-1] == "after: clean"
    assert "during 1: clean" in watch and all(ln.endswith(": clean") for ln in watch)
    monkeypatch.setattr(resmod, "results_dir", lambda label: tmp_path / "results" / label)
    run, = resmod.collect("x", out, plan.workloads, 1, resmod.Setting(topology="t"), "tcg")
    assert run.complete, run.problems
    assert run.watch == watch and run.metrics["hackbench time"]["value"] == 1.5


def test_a_tracer_beside_a_clean_run_makes_it_invalid(tmp_path, monkeypatch):
    # A process named bpftrace starts during the run; a kprobe and an ftrace
    # tracer are there from the start.
    fake = tmp_path / "bin" / "bpftrace"
    fake.parent.mkdir()
    fake.symlink_to("/bin/sleep")
    # bpftool lists a kprobe program and the kernel's own BPF_PRELOAD
    # iterator (type tracing, not a probe).
    tool = tmp_path / "bin" / "bpftool"
    tool.write_text("#!/bin/sh\necho '5: tracing  name dump_bpf_map  tag 1a  gpl'\n"
                    "echo '9: kprobe  name kprobe_swb  tag 2b  gpl'\n")
    tool.chmod(0o755)
    plan, d, tracefs = _clean_plan(tmp_path, f"{fake} 4 & sleep 3.5; echo Time: 1.5; wait")
    (tmp_path / "kprobes").write_text(
        "c00000000005ef14  k  arch_rethook_trampoline+0x0    [OPTIMIZED]\n"
        "ffffffff81000000  k  idle_cpu+0x0    [FTRACE]\n")
    (tracefs / "current_tracer").write_text("function\n")
    (tracefs / "enabled_functions").write_text("idle_cpu (1) R   I  \ttramp: 0x0\n")
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run(["bash", str(planmod.runner()), str(d), str(out)],
                          env=dict(os.environ, PATH=f"{tmp_path / 'bin'}:{FAKEBIN}:"
                                   f"{os.environ['PATH']}"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    watch = (out / "fake-0" / "watch.txt").read_text()
    assert "before: kprobe ffffffff81000000" in watch and "before: ftrace tracer function" in watch
    assert "arch_rethook_trampoline" not in watch
    assert "before: ftrace on idle_cpu (1)" in watch
    assert "before: bpf program 9: kprobe  name kprobe_swb" in watch
    assert "dump_bpf_map" not in watch
    assert "during 1: process" in watch and f"{fake} 4" in watch
    monkeypatch.setattr(resmod, "results_dir", lambda label: tmp_path / "results" / label)
    run, = resmod.collect("x", out, plan.workloads, 1, resmod.Setting(topology="t"), "tcg")
    assert not run.complete
    assert any(p.startswith("attached beside a clean run: ") and "bpftrace" in p
               for p in run.problems)
    assert resmod.watch_problems(["before: clean"]) == [
        "the runner's checks before and after the run are missing (watch.txt)"]


def test_a_warm_up_runs_each_workload_once_before_its_runs_unrecorded(tmp_path, monkeypatch):
    plan, d, _ = _fake_plan(tmp_path, command="echo once $SECS >> $OUT_COUNT; echo Time: 1.5")
    plan = plan.with_(warmup=True, seconds=12)
    planmod.write(plan, d)
    count = tmp_path / "count"
    env = dict(os.environ, PATH=f"{FAKEBIN}:{os.environ['PATH']}", OUT_COUNT=str(count))
    out = tmp_path / "out"
    out.mkdir()
    env_text = (d / "plan.env").read_text()
    assert "WARMUP=1\n" in env_text
    (d / "plan.env").write_text(env_text.replace(planmod.KNOB_DIR, str(tmp_path / "sched")))
    proc = subprocess.run(["bash", str(planmod.runner()), str(d), str(out)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # The warm-up, for its first seconds, and the two runs for theirs.
    assert count.read_text() == f"once {planmod.WARMUP_MAX}\n" + "once 12\n" * 2
    assert (out / "warmup-fake.txt").read_text() == "Time: 1.5\nstatus 0\n"
    assert proc.stdout.count(planmod.RUN_MARK) == 2
    monkeypatch.setattr(resmod, "results_dir", lambda label: tmp_path / "results" / label)
    runs = resmod.collect("x", out, plan.workloads, plan.runs, resmod.Setting(topology="t"),
                          "tcg")
    assert len(runs) == 2
    from schedlab.measuring import measure
    assert measure.estimate_seconds(plan) > measure.estimate_seconds(plan.with_(warmup=False))
    # Only the workloads named in warm, where it names any.
    other = plan.with_(warm=("other",))
    assert measure.estimate_seconds(other) == measure.estimate_seconds(plan.with_(warmup=False))
    planmod.write(other, d)
    (d / "plan.env").write_text(env_text.replace(planmod.KNOB_DIR, str(tmp_path / "sched")))
    assert (d / "warmup.txt").read_text() == ""
    count.unlink()
    out2 = tmp_path / "out2"
    out2.mkdir()
    proc = subprocess.run(["bash", str(planmod.runner()), str(d), str(out2)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert count.read_text() == "once 12\n" * 2 and not (out2 / "warmup-fake.txt").exists()


def test_bccs_funclatency_is_found_in_bccs_folder_off_path(tmp_path):
    # Fedora and RHEL keep bcc's tools in /usr/share/bcc/tools, not on PATH
    # as funclatency-bpfcc: a stand-in there is tried, picked and run.
    bcc = tmp_path / "bcc"
    bcc.mkdir()
    tool = bcc / "funclatency"
    tool.write_text("#!/bin/sh\n"
                    "if [ \"$1\" = -d ]; then echo 'usecs : count distribution'; exit 0; fi\n"
                    "echo \"Tracing 1 functions for $1\"\n"
                    "trap 'echo \"usecs : count distribution\"; exit 0' INT\n"
                    "while :; do sleep 0.1; done\n")
    tool.chmod(0o755)
    kallsyms = tmp_path / "kallsyms"
    kallsyms.write_text("".join(f"ffffffff81000000 t {f}\n"
                                for f in probemod.PROBES["latency"].functions))
    w = workmod.Workload("fake", "echo Time: 1.5", parsers.hackbench, (), "a fake workload",
                         timed=False)
    plan = planmod.Plan((w,), ("latency",), runs=1, seconds=1, latency_tool="bcc")
    d = planmod.write(plan, tmp_path / "plan")
    env = (d / "plan.env").read_text()
    for old, new in ((planmod.BCC_DIR, bcc), (planmod.KALLSYMS, kallsyms),
                     (planmod.KNOB_DIR, tmp_path / "sched")):
        assert str(old) in env
        env = env.replace(str(old), str(new))
    (d / "plan.env").write_text(env)
    out = tmp_path / "out"
    out.mkdir()
    # No /usr/sbin on PATH: this machine's own funclatency-bpfcc stays out.
    proc = subprocess.run(["bash", str(planmod.runner()), str(d), str(out)],
                          env=dict(os.environ, PATH=f"{FAKEBIN}:/usr/bin:/bin"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (out / "latency-tool.txt").read_text() == "bcc\n"
    assert "bcc: works" in (out / "latency-why.txt").read_text()
    assert "Tracing 1 functions for should_we_balance" in \
        (out / "fake-0" / "latency.txt").read_text()


def test_knobs_are_written_checked_and_restored(tmp_path):
    plan, d, knob_dir = _fake_plan(tmp_path, [("newidle_cost_pct", "1000")],
                                   f"cat {tmp_path}/sched/newidle_cost_pct; "
                                   "echo Time: 1")
    (knob_dir / "newidle_cost_pct").write_text("100\n")
    out, proc = _run_plan(tmp_path, d)
    assert proc.returncode == 0, proc.stderr
    assert (out / "fake-0" / "workload.txt").read_text().startswith("1000\n")
    assert (out / "knobs.txt").read_text() == "newidle_cost_pct=1000\n"
    assert (knob_dir / "newidle_cost_pct").read_text() == "100\n"   # restored
    assert not (out / "knob-error.txt").exists()


def test_a_feature_is_switched_for_the_plan_and_put_back(tmp_path):
    # sched/features lists every feature and takes one NAME or NO_NAME per
    # write; a plain file stands in for it (a write replaces its text).
    plan, d, knob_dir = _fake_plan(tmp_path, [("features", "SIS_GROUP_IDLE")],
                                   f"cat {tmp_path}/sched/features; echo Time: 1")
    (knob_dir / "features").write_text("GENTLE_FAIR NO_SIS_GROUP_IDLE SIS_UTIL\n")
    out, proc = _run_plan(tmp_path, d)
    assert proc.returncode == 0, proc.stderr
    assert (out / "fake-0" / "workload.txt").read_text().startswith("SIS_GROUP_IDLE\n")
    assert (out / "knobs.txt").read_text() == "features=SIS_GROUP_IDLE\n"
    assert (knob_dir / "features").read_text() == "NO_SIS_GROUP_IDLE\n"   # as it was


def test_several_features_are_each_checked_written_and_put_back(tmp_path):
    # A write replaces the stand-in's text, so each feature is checked
    # before any is written, and read back right after its own write.
    plan, d, knob_dir = _fake_plan(tmp_path, [("features", "SIS_GROUP_IDLE NO_SG_STATS_REUSE")])
    (knob_dir / "features").write_text("NO_SIS_GROUP_IDLE SG_STATS_REUSE\n")
    out, proc = _run_plan(tmp_path, d)
    assert proc.returncode == 0, proc.stderr
    assert (out / "knobs.txt").read_text() == \
        "features=SIS_GROUP_IDLE\nfeatures=NO_SG_STATS_REUSE\n"
    # Put back in order: the stand-in keeps the last write, SG_STATS_REUSE's.
    assert (knob_dir / "features").read_text() == "SG_STATS_REUSE\n"
    (knob_dir / "features").write_text("NO_SIS_GROUP_IDLE\n")      # one of the two missing
    shutil.rmtree(out)
    out, proc = _run_plan(tmp_path, d)
    assert proc.returncode == 3 and "SG_STATS_REUSE is not a feature" in \
        (out / "knob-error.txt").read_text()
    assert (knob_dir / "features").read_text() == "NO_SIS_GROUP_IDLE\n"    # nothing written


def test_a_choice_knob_is_restored_to_the_choice_in_force(tmp_path):
    # cgroup_mode reads as every choice, the one in force in parentheses,
    # and takes one choice per write (a plain file: the write replaces it).
    plan, d, knob_dir = _fake_plan(tmp_path, [("cgroup_mode", "max")])
    (knob_dir / "cgroup_mode").write_text("up (smp) concur max tasks \n")
    out, proc = _run_plan(tmp_path, d)
    assert proc.returncode == 0, proc.stderr
    assert (out / "knobs.txt").read_text() == "cgroup_mode=max\n"
    assert (knob_dir / "cgroup_mode").read_text() == "smp\n"


def test_a_feature_the_kernel_lacks_stops_the_plan(tmp_path):
    plan, d, knob_dir = _fake_plan(tmp_path, [("features", "SIS_GROUP_IDLE")])
    (knob_dir / "features").write_text("GENTLE_FAIR SIS_UTIL\n")     # base kernel
    out, proc = _run_plan(tmp_path, d)
    assert proc.returncode == 3 and not (out / "fake-0").exists()
    assert "not a feature of this kernel" in (out / "knob-error.txt").read_text()


def test_a_missing_knob_stops_the_plan(tmp_path):
    plan, d, _ = _fake_plan(tmp_path, [("no_such_knob", "1")])
    out, proc = _run_plan(tmp_path, d)
    assert proc.returncode == 3 and not (out / "fake-0").exists()
    assert "is not there or not writable" in (out / "knob-error.txt").read_text()


def test_a_knob_that_reads_back_otherwise_stops_the_plan(tmp_path):
    # A write that succeeds but does not stick: a knob file that is /dev/null.
    plan, d, knob_dir = _fake_plan(tmp_path, [("k", "9")])
    (knob_dir / "k").symlink_to("/dev/null")
    out, proc = _run_plan(tmp_path, d)
    assert proc.returncode == 3 and not (out / "fake-0").exists()
    assert "k: writing 9 gave " in (out / "knob-error.txt").read_text()


def test_no_knobs_leave_an_empty_knobs_file(tmp_path):
    plan, d, _ = _fake_plan(tmp_path)
    out, proc = _run_plan(tmp_path, d)
    assert (out / "knobs.txt").read_text() == ""


def test_guest_scripts_pass_shellcheck():
    import shutil
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck is not installed ('./schedlab setup' installs it)")
    from schedlab.core.util import package_file
    scripts = sorted(str(p) for p in package_file("guest").rglob("*.sh"))
    assert len(scripts) >= 4
    assert subprocess.run(["shellcheck", *scripts]).returncode == 0


def test_every_plan_measures_a_cost_probe_alone():
    # The invariant holds for plans built in code too (the test command's).
    from schedlab import pipeline
    for plan in (pipeline.INTEGRATION, pipeline.ICOUNT_INTEGRATION):
        cost = [p for p in plan.probes if probemod.PROBES[p].program == "cost"]
        assert not cost or len(plan.probes) == 1
    with pytest.raises(LabError):
        planmod.Plan(pipeline.INTEGRATION.workloads, ("swb", "swb-cost"))
    assert "swb" in pipeline.INTEGRATION.probes and "latency" in pipeline.INTEGRATION.probes
    # And the plugin probes' rules: alone, under icount (what make_plan refuses).
    for plan in (pipeline.INTEGRATION, pipeline.ICOUNT_INTEGRATION):
        probemod.probe_names(",".join(plan.probes))
        assert plan.accel == "icount" or not set(plan.probes) & set(probemod.PLUGIN_PROBES)


def test_a_workload_can_ask_for_a_longer_time_limit():
    from schedlab.measuring import plan as planmod
    p = planmod.make_plan("stress-50,tg-switch-d2-seed-t8", "migrate", seconds=10)
    assert p.limit == 300
    assert planmod.make_plan("stress-50", "migrate", seconds=60).limit == 360


def test_the_estimate_counts_a_workload_s_own_overhead():
    # The VM's time limit is three times the estimate: a plan of tg runs,
    # each about two minutes under TCG, must not be stopped halfway.
    from schedlab.measuring import measure
    p = planmod.make_plan(",".join(f"tg-switch-d{d}-seed-t8" for d in (1, 2)), "migrate",
                          runs=3, seconds=10)
    assert measure.estimate_seconds(p) == 90 + 6 * (10 + 25 + 80)
