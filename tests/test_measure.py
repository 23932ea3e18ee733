"""Measurement plan script and run parsing (no boot)."""

import shutil
from pathlib import Path

import pytest

from schedlab import measure as m
from schedlab.util import LabError

DATA = Path(__file__).parent / "data" / "tools"


def test_guest_script_runs_every_workload_with_the_probe():
    text = m.guest_script(["stress-100", "hackbench-process"], runs=2, secs=7)
    for d in ("stress-100-0", "stress-100-1", "hackbench-process-0", "hackbench-process-1"):
        assert f'"$OUT/{d}"' in text
    assert text.count("bpftrace /tmp/probe.bt") == 4
    assert "kprobe:should_we_balance" in text and "kprobe:idle_cpu /@in[tid]/" in text
    assert "SECS=7" in text and "kernel.sched_schedstats=1" in text


def test_unknown_workload_lists_the_known_ones():
    with pytest.raises(LabError, match="known: stress-100"):
        m.guest_script(["nope"], 1, 1)


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
    probe = ("Attaching 5 probes...\n\n@lb_calls: 300\n@swb_calls: 200\n"
             "@swb_idle_probes: 1000\n@swb_ns: 2500\n")
    run = m.parse_run(make_run(tmp_path, probe), m.workload("stress-50"))
    assert run["complete"], run["problems"]
    met = run["metrics"]
    assert met["idle_cpu probes in should_we_balance"]["value"] == 1000
    assert met["idle_cpu probes in should_we_balance per s"]["value"] == 100
    assert met["should_we_balance calls"]["kind"] == "count"
    assert met["stress-ng cpu bogo-ops/s"]["value"] == 81.74
    assert "balance SMT idle" in met and "cpu busy" in met


def test_probe_that_did_not_attach_makes_the_run_incomplete(tmp_path):
    run = m.parse_run(make_run(tmp_path, "ERROR: kprobe attach failed", status="0"),
                      m.workload("stress-50"))
    assert not run["complete"]
    assert any("did not attach" in p for p in run["problems"])
