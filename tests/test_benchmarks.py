"""The kit's benchmarks: the sweeps, the records of their points, the
parsers on real output, and schbench built at a pinned commit or from
--bench-dir (against git repositories the tests make)."""

import os
import subprocess
from pathlib import Path

import pytest

from schedlab.core.util import LabError, package_file
from schedlab.kit import benchmarks as benchmod
from schedlab.measuring import parsers
from schedlab.measuring import workloads as workmod

DATA = Path(__file__).parent / "data" / "tools"


def test_the_sweeps_follow_the_cpu_count():
    assert benchmod.hackbench_groups(16) == [1, 2, 4]
    assert benchmod.hackbench_groups(96) == [1, 2, 4, 8, 16, 32]
    assert benchmod.hackbench_groups(2) == [1]
    # tbench up to twice the CPUs, schbench's workers in all likewise.
    assert benchmod.tbench_clients(16) == [4, 8, 16, 32]
    assert benchmod.tbench_clients(1) == [1, 2]
    assert benchmod.schbench_workers(16) == [2, 4, 8]      # at most one worker per CPU
    points = benchmod.expand(["stress", "hackbench", "tbench", "schbench"], 16)
    assert points[:3] == ["stress-100", "stress-90", "stress-50"]
    assert [p for p in points if p.startswith("hackbench")] == [
        f"hackbench-{m}-{t}-g{g}" for m in ("process", "thread") for t in ("socket", "pipe")
        for g in (1, 2, 4)]
    assert "tbench-c32" in points and "schbench-m2-t8" in points
    # A family and one of its points: each once, in order.
    assert benchmod.expand(["hackbench-thread-pipe", "hackbench-thread-pipe-g2"], 16) == [
        "hackbench-thread-pipe-g1", "hackbench-thread-pipe-g2", "hackbench-thread-pipe-g4"]
    # Each sweep warmed up once, at its first point; each stress-ng load.
    assert benchmod.first_points(points) == [
        "stress-100", "stress-90", "stress-50", "hackbench-process-socket-g1",
        "hackbench-process-pipe-g1", "hackbench-thread-socket-g1", "hackbench-thread-pipe-g1",
        "tbench-c4", "schbench-m2-t2"]
    for name in ("hackbench", "tbench-c7", "schbench-m1-t3", "perf-pipe-timed", "stress-25",
                 "hackbench-overload"):
        assert benchmod.known(name), name
    for name in ("hackbench-process-socket-g0", "tbench-cx", "nope", "schbench-m2"):
        assert not benchmod.known(name), name


def test_a_kit_run_is_refused_on_resume_when_a_benchmark_s_command_changed(monkeypatch):
    from schedlab.kit import hw
    from schedlab.measuring import resume
    from schedlab.kit import arms as armmod
    req = hw.request(armmod.KIT_ARMS[:2], 3, 1, 10, bench=["hackbench-process-socket-g4"])
    fields = resume.plan_fields(req.plan)
    assert fields["warm"] == ["hackbench-process-socket-g4"]
    cmd = fields["commands"]["hackbench-process-socket-g4"]
    assert cmd.startswith("bash GUEST/workloads/timed.sh ") and "-l 500" in cmd
    monkeypatch.setattr(workmod, "_loops", lambda g: 10)
    again = hw.request(armmod.KIT_ARMS[:2], 3, 1, 10, bench=["hackbench-process-socket-g4"])
    assert resume.plan_fields(again.plan) != fields
    # The lab's other plans hold what they held.
    from schedlab.measuring import plan as planmod
    assert "commands" not in resume.plan_fields(planmod.make_plan("stress-100", "swb"))


def test_each_point_is_a_record_run_for_its_seconds():
    w = workmod.workload("hackbench-thread-pipe-g4")
    assert w.timed and w.parser is parsers.timed and w.tools == ("hackbench",)
    assert "timed.sh hackbench messages 800000 hackbench -T -p -g 4 -l 500" in w.command
    assert w.results == ("hackbench messages/s", "hackbench messages/s, own time")
    w = workmod.workload("perf-messaging-g2")
    assert "perf-messaging messages 800000 perf bench sched messaging -g 2 -l 1000" \
        in w.command
    # At least 100 loops, whatever the groups.
    assert "-g 64 -l 100" in workmod.workload("hackbench-process-socket-g64").command
    w = workmod.workload("perf-pipe-timed")
    assert "perf-pipe round-trips 10000 perf bench sched pipe -l 10000" in w.command
    w = workmod.workload("tbench-c12")
    assert w.command.endswith("tbench.sh 12") and w.parser is parsers.dbench
    w = workmod.workload("schbench-m2-t8", Path("/opt/schbench"))
    assert w.command == "/opt/schbench -m 2 -t 8 -r $SECS" and w.timed
    # The stopping rule and the sweep tables take the first: wakeup p99.
    assert w.results[0] == "schbench wakeup p99" and len(w.results) == 7
    with pytest.raises(LabError, match="needs a schbench binary"):
        workmod.workload("schbench-m2-t8")
    with pytest.raises(LabError, match="counts start at 1"):
        workmod.workload("tbench-c0")
    assert benchmod.refusal("tbench-c0") == "tbench-c0: counts start at 1"
    assert benchmod.refusal("nope") == "" and benchmod.refusal("hackbench") == ""


def test_schbench_s_percentiles_from_its_own_output():
    # Captured from schbench built at the kit's pinned commit on this
    # machine: -m 1 -t 2 -r 4 -w 1 -i 2, then -m 2 -t 2 -r 3.  The last
    # block of each kind is the whole run's.
    m = parsers.schbench((DATA / "schbench-m1-t2.txt").read_text())
    got = {k: v.value for k, v in m.items()}
    assert got == {"schbench wakeup p50": 7, "schbench wakeup p99": 60,
                   "schbench wakeup p99.9": 933, "schbench request p50": 5448,
                   "schbench request p99": 9232, "schbench request p99.9": 11408,
                   "schbench rps": 343.5}
    assert m["schbench wakeup p99"].unit == "us" and m["schbench wakeup p99"].higher_is_better \
        is False and m["schbench rps"].higher_is_better is True
    m = parsers.schbench((DATA / "schbench-m2-t2.txt").read_text())
    assert set(m) == set(workmod.SCHBENCH_RESULTS)
    assert parsers.schbench("garbage") == {}


def test_a_timed_run_is_a_rate(tmp_path):
    # Real output of guest/workloads/timed.sh around rt-tests hackbench.
    m = parsers.timed((DATA / "timed-hackbench.txt").read_text())
    line = (DATA / "timed-hackbench.txt").read_text().split()
    rounds, count, secs, own = int(line[3]), int(line[4]), float(line[5]), float(line[6])
    assert m["hackbench messages/s"].value == pytest.approx(count / secs)
    assert m["hackbench messages/s, own time"].value == pytest.approx(count / own)
    assert m["hackbench rounds"].value == rounds and 0 < own < secs
    assert parsers.timed("timed: x y 0 0 1.0") == {} and parsers.timed("") == {}
    # A benchmark that reports no time of its own: the wall clock's rate only.
    assert set(parsers.timed("timed: x y 3 9 1.5 0.000")) == {"x y/s", "x rounds"}
    script = str(package_file("guest/workloads/timed.sh"))
    env = dict(os.environ, SECS="1")
    out = subprocess.run(["bash", script, "t", "ops", "3", "true"], env=env,
                         capture_output=True, text=True, check=True).stdout
    m = parsers.timed(out)
    assert m["t rounds"].value >= 2 and m["t ops/s"].value > 0
    # It runs until its seconds have passed, not one round.
    assert float(out.split()[-2]) >= 1.0
    # It adds up the times the benchmark reports: hackbench's, perf bench's.
    for said in ("Time: 0.250", "     Total time: 0.250 [sec]"):
        out = subprocess.run(["bash", script, "t", "ops", "3", "echo", said], env=env,
                             capture_output=True, text=True, check=True).stdout
        rounds, own = int(out.split()[3]), float(out.split()[-1])
        assert own == pytest.approx(0.25 * rounds, abs=1e-3)
    failed = subprocess.run(["bash", script, "t", "ops", "3", "false"], env=env,
                            capture_output=True, text=True)
    assert failed.returncode != 0 and parsers.timed(failed.stdout) == {}


def _git(tree, *args):
    return subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c",
                           "user.email=t@t", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _stand_in(tmp_path):
    """A git repository of a stand-in benchmark: its Makefile writes a
    script that prints the version of its commit; two commits."""
    repo = tmp_path / "upstream"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "Makefile").write_text("bench: bench.c\n\tprintf '#!/bin/sh\\necho %s\\n' "
                                   "\"$$(cat bench.c)\" > bench && chmod +x bench\n")
    (repo / "bench.c").write_text("one\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "bench.c").write_text("two\n")
    _git(repo, "commit", "-qam", "two")
    return repo, first


def _version(binary):
    return subprocess.run([str(binary)], capture_output=True, text=True).stdout.strip()


def test_fetched_and_built_at_the_pinned_commit(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path / "work"))
    repo, first = _stand_in(tmp_path)
    up = benchmod.Upstream("bench", str(repo), first, ("make",), "bench")
    built = benchmod.fetch_and_build(up, tmp_path / "b")
    assert _version(built.binary) == "one" and built.pinned and built.commit == first
    assert built.binary.parent.name == f"bench-{first[:12]}"
    # Built once: found again without a clone, by find() too.
    os.utime(repo)
    assert benchmod.fetch_and_build(up, tmp_path / "b").binary == built.binary
    assert benchmod.find(up, None, fetch=False, root=tmp_path / "b").binary == built.binary
    # A commit the repository lacks, or no repository: refused, nothing left.
    bad = benchmod.Upstream("bench", str(repo), "0" * 40, ("make",), "bench")
    with pytest.raises(LabError, match="has no commit"):
        benchmod.fetch_and_build(bad, tmp_path / "c")
    gone = benchmod.Upstream("bench", str(tmp_path / "nothing"), first, ("make",), "bench")
    with pytest.raises(LabError, match="cannot clone"):
        benchmod.fetch_and_build(gone, tmp_path / "d")
    assert not (tmp_path / "d" / f"bench-{first[:12]}").exists()
    # A build that makes no binary.
    nobin = benchmod.Upstream("bench", str(repo), first, ("true",), "bench")
    with pytest.raises(LabError, match="made no bench"):
        benchmod.fetch_and_build(nobin, tmp_path / "e")
    # Without a build and without fetching: PATH, else nothing.
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert benchmod.find(up, None, fetch=False, root=tmp_path / "f") is None


def test_bench_dir_takes_a_binary_or_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path / "work"))
    repo, first = _stand_in(tmp_path)
    head = _git(repo, "rev-parse", "HEAD")
    up = benchmod.Upstream("bench", "unused", first, ("make",), "bench")
    # Sources at another commit: built in a copy, the folder left as it is.
    built = benchmod.from_dir(up, repo, tmp_path / "b")
    assert _version(built.binary) == "two" and not (repo / "bench").exists()
    assert built.commit == head and not built.pinned and "not the kit's pinned" in built.line()
    # At the pinned commit: pinned; with a change: neither commit nor pinned.
    _git(repo, "checkout", "-q", first)
    assert benchmod.from_dir(up, repo, tmp_path / "b").pinned
    (repo / "bench.c").write_text("changed\n")
    changed = benchmod.from_dir(up, repo, tmp_path / "b")
    assert _version(changed.binary) == "changed" and changed.commit == "" and not changed.pinned
    # The copy, built, is taken in place (the rehearsal's guest gets it).
    again = benchmod.from_dir(up, changed.binary.parent, tmp_path / "other")
    assert again.binary == changed.binary and not (tmp_path / "other").exists()
    # A folder holding the binary only.
    only = tmp_path / "only"
    only.mkdir()
    (only / "bench").write_text("#!/bin/sh\necho mine\n")
    (only / "bench").chmod(0o755)
    assert benchmod.from_dir(up, only).binary == only / "bench"
    assert benchmod.from_dir(up, only / "bench").binary == only / "bench"
    # Without building (hw --plan): where it would be, nothing made.
    _git(repo, "checkout", "-q", "--", ".")
    dry = benchmod.from_dir(up, repo, tmp_path / "dry", build=False)
    assert not dry.binary.exists() and not (tmp_path / "dry").exists()
    # The sources one level down (DIR/NAME); neither: refused.
    (tmp_path / "above").mkdir()
    _git(repo, "checkout", "-q", "--", ".")
    (tmp_path / "above" / "bench").symlink_to(repo)
    assert _version(benchmod.from_dir(up, tmp_path / "above", tmp_path / "b").binary) == "one"
    with pytest.raises(LabError, match="neither a built bench nor its sources"):
        benchmod.from_dir(up, tmp_path / "work")
