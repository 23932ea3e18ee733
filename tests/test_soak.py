"""The soak's verdict from a guest output folder, and the peer tests' report."""

import subprocess
from pathlib import Path

import pytest

from schedlab.core.util import package_file
from schedlab.series import peer_tests as peer
from schedlab.series import soak


def _guest_out(d: Path, faults, rounds, dmesg="", status="0"):
    for k, n in faults.items():
        (d / f"count.{k}").write_text("".join(f"{i}\n" for i in range(n)))
    for w, statuses in rounds.items():
        (d / f"work.{w}").write_text("".join(f"{s}\n" for s in statuses))
    (d / "dmesg.txt").write_text(dmesg)
    if status is not None:
        (d / "status.txt").write_text(status + "\n")


GOOD = {"hotplug": 40, "cgroup": 25, "partition": 30, "flip": 100}
ROUNDS = {w: ["0", "0"] for w in soak.WORKLOADS}


def _result(tmp_path, minutes=30, **kw):
    _guest_out(tmp_path, kw.pop("faults", GOOD), kw.pop("rounds", ROUNDS), **kw)
    return soak.read_output(tmp_path, soak.SoakResult("smt8", "patched", minutes, []))


def test_a_clean_soak_passes(tmp_path):
    res = _result(tmp_path)
    soak.verdict(res, None)
    assert res.ok and res.faults == GOOD


def test_floors_scale_with_the_length():
    assert soak.floors(30) == GOOD
    assert soak.floors(60) == {k: 2 * v for k, v in GOOD.items()}
    # shorter soaks: half the scaled floor, at least one of each
    assert soak.floors(3) == {"hotplug": 2, "cgroup": 1, "partition": 1, "flip": 5}
    assert soak.floors(0.5) == {"hotplug": 1, "cgroup": 1, "partition": 1, "flip": 1}


@pytest.mark.parametrize("change, expect", [
    (dict(faults={**GOOD, "partition": 29}), "partition: 29 injected, below the floor of 30"),
    (dict(rounds={**ROUNDS, "fanout": ["0", "124"]}), "fanout: 1 round(s) hung"),
    (dict(rounds={**ROUNDS, "fanout": ["137"]}), "fanout: 1 round(s) hung"),
    (dict(rounds={**ROUNDS, "hackbench": ["1"]}), "hackbench: 1 round(s) failed"),
    (dict(rounds={**ROUNDS, "stress-light": []}), "stress-light: no round completed"),
    (dict(status=None), "the soak did not finish"),
])
def test_each_failure_fails_the_soak(tmp_path, change, expect):
    res = _result(tmp_path, **change)
    soak.verdict(res, None)
    assert not res.ok and any(expect in p for p in res.problems), res.problems


DMESG = """[   12.345678] sched: something ordinary
[  100.000001] WARNING: CPU: 3 PID: 1234 at kernel/sched/fair.c:12345 sched_balance_rq+0x1f/0x300
[  101.5] =============================
[  101.6] WARNING: suspicious RCU usage
[  200.1] rcu: INFO: rcu_preempt self-detected stall on CPU
[  300.2] BUG: KASAN: slab-use-after-free in update_sd_lb_stats+0x44/0x99
[  400.0] INFO: task kworker/1:2:77 blocked for more than 600 seconds.
[  500.0] watchdog: BUG: soft lockup - CPU#2 stuck for 130s! [stress-ng:999]
[  600.0] BUG: scheduling while atomic: swapper/0/0/0x00000002
"""


def test_every_detector_s_report_is_a_splat(tmp_path):
    res = _result(tmp_path, dmesg=DMESG)
    assert len(res.splats) == 7 and "ordinary" not in " ".join(res.splats)
    res = _result(tmp_path, dmesg="[ 0.0] rcu: \tRCU lockdep checking is enabled.\n"
                  "[ 0.1] kasan: KernelAddressSanitizer initialized (generic)\n")
    assert res.splats == []


def test_splats_base_also_shows_do_not_fail_patched(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "p").mkdir()
    _guest_out(tmp_path / "b", GOOD, ROUNDS, dmesg="[ 9.1] WARNING: CPU: 1 PID: 5 at x.c:10 f\n")
    base = soak.read_output(tmp_path / "b", soak.SoakResult("smt8", "base", 30, []))
    _guest_out(tmp_path / "p", GOOD, ROUNDS,
               dmesg="[ 7.2] WARNING: CPU: 6 PID: 81 at x.c:10 f\n[ 8.0] BUG: KASAN: oops\n")
    res = soak.read_output(tmp_path / "p", soak.SoakResult("smt8", "patched", 30, []))
    soak.verdict(res, base)
    assert res.problems == ["splat that base does not show: [ 8.0] BUG: KASAN: oops"]


def test_soak_script_is_valid_bash_and_counts_each_fault_kind():
    script = package_file("guest/soak.sh")
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    for name in ("hotplug", "cgroup", "partition", "flip"):
        assert f"count {name}" in script.read_text()
    # Cache aware scheduling is flipped where it exists (SG_STATS_REUSE keeps
    # no sums while it is active) and put back.
    text = script.read_text()
    assert 'count flip "llc_balancing $v"' in text and 'echo "$llc_initial" > "$llc"' in text


def test_selftest_results_from_tap_and_exit_status():
    out = "TAP version 13\n1..3\nok 1 test_cpucg_subtree_control\n" \
          "not ok 2 test_cpucg_weight_overprovisioned\nok 3 test_cpucg_max # SKIP no cpu.max\n"
    got = peer.selftest_results("cgroup.test_cpu", out, "1")
    assert got == {"cgroup.test_cpu.test_cpucg_subtree_control": "PASS",
                   "cgroup.test_cpu.test_cpucg_weight_overprovisioned": "FAIL",
                   "cgroup.test_cpu.test_cpucg_max": "SKIP",
                   "cgroup.test_cpu": "FAIL"}
    assert peer.selftest_results("sched.cs_prctl_test", "", "4") == {"sched.cs_prctl_test": "SKIP"}


def test_peer_report_errors_only_on_a_regression():
    base = peer.PeerResult("base", kunit={"a.x": "PASS", "a.y": "FAIL", "a.z": "PASS"},
                           selftests={"sched.cs_prctl_test": "PASS"})
    patched = peer.PeerResult("patched", kunit={"a.x": "PASS", "a.y": "FAIL", "a.z": "FAIL",
                                                "b.new": "PASS"},
                              selftests={})
    lines, errors = peer.compare(base, patched)
    assert errors == ["kselftest: sched.cs_prctl_test: passes on base, missing on patched",
                      "kunit: a.z: passes on base, fail on patched"]
    text = "\n".join(lines)
    assert "kunit: a.y" in text            # failing on both: listed
    assert "kunit: a.x" not in text        # passing on both: not
    assert "b.new" in text                 # only in patched: listed


def test_peer_report_of_one_run_lists_only_what_does_not_pass():
    patched = peer.PeerResult("patched", kunit={"a.x": "PASS", "a.y": "FAIL", "a.z": "SKIP"})
    lines, errors = peer.compare(None, patched)
    assert errors == []
    text = "\n".join(lines)
    assert "base: not run" in text
    assert "kunit: a.y" in text and "kunit: a.z" in text
    assert "kunit: a.x" not in text


def test_selftests_script_retries_a_failing_program(tmp_path):
    """guest/peer-selftests.sh against fake programs: one that fails once,
    one that always fails, one that skips, one whose cases take turns to
    fail; then the merged results."""
    bindir, out = tmp_path / "bin", tmp_path / "out"
    bindir.mkdir()
    out.mkdir()
    progs = {
        "flaky": f'n=$(cat {tmp_path}/n 2>/dev/null || echo 0); echo $((n + 1)) > {tmp_path}/n\n'
                 'echo "ok 1 a"\n[ "$n" -ge 1 ] || { echo "not ok 2 b"; exit 1; }\necho "ok 2 b"\n',
        "broken": 'echo "not ok 1 c"\nexit 1\n',
        "skipped": 'exit 4\n',
        # a fails, then b: each has passed once after two attempts
        "turns": f'n=$(cat {tmp_path}/t 2>/dev/null || echo 0); echo $((n + 1)) > {tmp_path}/t\n'
                 'if [ "$n" = 0 ]; then echo "not ok 1 a"; echo "ok 2 b"; '
                 'else echo "ok 1 a"; echo "not ok 2 b"; fi\nexit 1\n',
    }
    for name, body in progs.items():
        (bindir / name).write_text("#!/bin/bash\n" + body)
        (bindir / name).chmod(0o755)
    # The guest's mounts and dmesg are not the test's business.
    script = package_file("guest/peer-selftests.sh").read_text()
    script = script.replace("mountpoint -q", ": mountpoint -q").replace("dmesg >", ": >")
    (tmp_path / "s.sh").write_text(script)
    subprocess.run(["bash", str(tmp_path / "s.sh"), str(out)]
                   + [str(bindir / n) for n in progs], check=True)
    got = {n: peer.read_attempts(out, f"bin.{n}") for n in progs}
    assert [len(a) for a in got.values()] == [2, 7, 1, 2]
    final, seen = peer.merge_attempts(got["flaky"])
    assert final == {"bin.flaky": "PASS", "bin.flaky.a": "PASS", "bin.flaky.b": "PASS"}
    assert seen["bin.flaky.b"] == ["FAIL", "PASS"] and seen["bin.flaky.a"] == ["PASS", "PASS"]
    final, seen = peer.merge_attempts(got["broken"])
    assert final == {"bin.broken": "FAIL", "bin.broken.c": "FAIL"}
    assert seen["bin.broken"] == ["FAIL"] * 7
    assert peer.merge_attempts(got["turns"])[0]["bin.turns.b"] == "PASS"
    assert peer.merge_attempts(got["skipped"]) == ({"bin.skipped": "SKIP"}, {})


def test_selftests_script_does_not_retry_failures_base_also_has(tmp_path):
    """With known-failures (what did not pass on base), a program whose
    failing cases are all known runs once; a new failing case is retried."""
    bindir, out = tmp_path / "bin", tmp_path / "out"
    bindir.mkdir()
    out.mkdir()
    progs = {"known": 'echo "ok 1 a"\necho "not ok 2 b # a note"\nexit 1\n',
             "new": 'echo "not ok 1 b"\necho "not ok 2 c # timing"\nexit 1\n',
             "silent": 'exit 1\n'}
    for name, body in progs.items():
        (bindir / name).write_text("#!/bin/bash\n" + body)
        (bindir / name).chmod(0o755)
    (out / "known-failures").write_text("bin.known.b\nbin.known\nbin.new.b\nbin.new\n")
    script = package_file("guest/peer-selftests.sh").read_text()
    script = script.replace("mountpoint -q", ": mountpoint -q").replace("dmesg >", ": >")
    (tmp_path / "s.sh").write_text(script)
    subprocess.run(["bash", str(tmp_path / "s.sh"), str(out)]
                   + [str(bindir / n) for n in progs], check=True)
    assert [len(peer.read_attempts(out, f"bin.{n}")) for n in progs] == [1, 7, 7]


def test_peer_report_names_the_tests_that_passed_on_a_retry():
    patched = peer.PeerResult("patched", selftests={"cgroup.test_cpu.w": "PASS"},
                              attempts={"cgroup.test_cpu.w": ["FAIL", "PASS"],
                                        "cgroup.test_cpu.x": ["PASS", "PASS"]})
    lines, errors = peer.compare(None, patched)
    assert errors == []
    text = "\n".join(lines)
    assert "patched: cgroup.test_cpu.w ran 2 times: fail, pass" in text
    assert "test_cpu.x" not in text


def test_new_failures_are_the_failed_tests_base_passed():
    got = {"cgroup.test_cpu": "FAIL", "cgroup.test_cpu.a": "FAIL", "cgroup.test_cpu.b": "FAIL",
           "cgroup.test_cpu.new case": "FAIL", "cgroup.test_cpu.c": "PASS",
           "cgroup.test_cpu.d": "SKIP"}
    base = peer.PeerResult("base", selftests={"cgroup.test_cpu": "FAIL", "cgroup.test_cpu.a": "PASS",
                                              "cgroup.test_cpu.b": "FAIL"})
    assert peer.new_failures(got, base) == ["cgroup.test_cpu.a"]
    assert peer.new_failures(got, None) == ["cgroup.test_cpu", "cgroup.test_cpu.a",
                                            "cgroup.test_cpu.b", "cgroup.test_cpu.new case"]


def _fake_variant(tmp_path, monkeypatch, progs, base):
    """run_variant with the guest script run on this machine: each boot runs
    `cmd` in bash, with BOOT set to the boot's number (from 1)."""
    work = tmp_path / "work"
    bindir = tmp_path / "bin"
    paths = []
    for name, body in progs.items():
        suite, prog = name.split("/")
        (bindir / suite).mkdir(parents=True, exist_ok=True)
        (bindir / suite / prog).write_text("#!/bin/bash\n" + body)
        (bindir / suite / prog).chmod(0o755)
        paths.append(bindir / suite / prog)
    script = package_file("guest/peer-selftests.sh").read_text()
    (tmp_path / "s.sh").write_text(
        script.replace("mountpoint -q", ": mountpoint -q").replace("dmesg >", ": >"))
    boots = []

    def boot(image, topo, cmd, **kw):
        boots.append(cmd)
        subprocess.run(["bash", "-c", cmd], check=True,
                       env={"PATH": "/usr/bin:/bin", "BOOT": str(len(boots))})

    class K:
        results, passed, failed, skipped, seconds, log = [("s.c", "PASS")], 1, 0, 0, 1, ""

    monkeypatch.setattr(peer, "work_dir", lambda: work)
    monkeypatch.setattr(peer, "package_file", lambda name: tmp_path / "s.sh")
    monkeypatch.setattr(peer.patchset, "ensure_variant", lambda *a: "c0ffee")
    monkeypatch.setattr(peer, "built", lambda *a: type("B", (), {"image": Path("bzImage")}))
    monkeypatch.setattr(peer.kunitmod, "run_kunit", lambda *a, **kw: K)
    monkeypatch.setattr(peer, "build_selftests", lambda *a: paths)
    monkeypatch.setattr(peer, "latest", lambda v: base)
    monkeypatch.setattr(peer.vm, "boot", boot)
    return peer.run_variant(type("T", (), {"path": tmp_path})(), "patched"), boots


def test_a_test_failing_every_attempt_of_a_boot_runs_again_on_a_second(tmp_path, monkeypatch):
    """cgroup/share fails its case w in every attempt of the first boot and
    passes on the second; cgroup/known fails case k, which base does not
    pass either, and runs on one boot; sched/fine passes at once."""
    base = peer.PeerResult("base", selftests={"cgroup.share.w": "PASS", "cgroup.known.k": "FAIL",
                                              "cgroup.known": "FAIL"})
    res, boots = _fake_variant(tmp_path, monkeypatch, {
        "sched/fine": 'echo "ok 1 f"\n',
        "cgroup/share": 'echo "ok 1 v"\n[ "$BOOT" = 2 ] && { echo "ok 2 w"; exit 0; }\n'
                        'echo "not ok 2 w"\nexit 1\n',
        "cgroup/known": 'echo "not ok 1 k"\nexit 1\n'}, base)
    assert len(boots) == 2
    assert "cgroup/share" in boots[1] and "known" not in boots[1] and "fine" not in boots[1]
    assert res.attempts["cgroup.share.w"] == ["FAIL"] * (1 + peer.RETRIES_PER_BOOT) + ["PASS"]
    assert res.selftests["cgroup.share.w"] == "PASS"
    assert res.selftests["cgroup.known.k"] == "FAIL" and "cgroup.known.k" not in res.attempts
    assert peer.compare(base, res)[1] == []


def test_a_test_failing_on_both_boots_is_an_error(tmp_path, monkeypatch):
    base = peer.PeerResult("base", selftests={"cgroup.share.w": "PASS"})
    res, boots = _fake_variant(tmp_path, monkeypatch, {
        "cgroup/share": 'echo "not ok 1 w"\nexit 1\n'}, base)
    assert len(boots) == peer.SELFTEST_BOOTS == 2
    assert res.attempts["cgroup.share.w"] == ["FAIL"] * 2 * (1 + peer.RETRIES_PER_BOOT)
    assert peer.compare(base, res)[1] == ["kselftest: cgroup.share.w: passes on base, fail on patched"]


def test_without_a_base_every_test_failing_a_whole_boot_gets_a_second(tmp_path, monkeypatch):
    res, boots = _fake_variant(tmp_path, monkeypatch, {
        "cgroup/share": 'echo "not ok 1 w"\nexit 1\n', "cgroup/fine": 'echo "ok 1 f"\n'}, None)
    assert len(boots) == 2 and "share" in boots[1] and "fine" not in boots[1]
    assert res.attempts["cgroup.share.w"] == ["FAIL"] * 2 * (1 + peer.RETRIES_PER_BOOT)


def test_a_round_over_the_limit_that_still_got_cpu_time_is_slow_not_hung(tmp_path):
    (tmp_path / "slow.fanout").write_text("1795863633\n")
    res = _result(tmp_path, rounds={**ROUNDS, "fanout": ["0", "124"]})
    soak.verdict(res, None)
    assert res.ok and res.slow_rounds == {"fanout": 1}
    assert "not a hang): fanout 1" in soak.summary(res)
    # one slow, one hung: the hung one fails the soak
    res = _result(tmp_path, rounds={**ROUNDS, "fanout": ["124", "137"]})
    soak.verdict(res, None)
    assert res.problems == ["fanout: 1 round(s) hung (at the time limit with no CPU time in "
                            "the last minutes)"]
    (tmp_path / "killed.hackbench").write_text("1795863700\n")
    res = _result(tmp_path, rounds={**ROUNDS, "hackbench": ["0", "137"]})
    soak.verdict(res, None)
    assert res.problems[-1] == "hackbench: 1 round(s) killed (SIGKILL before the time limit)"


def test_round_lengths_and_stall_dumps_are_reported_not_failed(tmp_path):
    (tmp_path / "time.hackbench").write_text("31\n250\n")
    (tmp_path / "stall.hackbench.1795858284").write_text("# ps\n")
    res = _result(tmp_path)
    soak.verdict(res, None)
    assert res.ok
    assert res.round_secs["hackbench"] == [31, 250] and res.round_secs["fanout"] == []
    assert res.stalls == ["stall.hackbench.1795858284"]
    text = soak.summary(res)
    assert "hackbench 31 250" in text and "stall.hackbench.1795858284" in text


def _soak_functions(*names: str) -> str:
    script = package_file("guest/soak.sh").read_text()
    return "\n".join(script[script.index(f"{name}() {{"):].split("\n}\n", 1)[0] + "\n}"
                     for name in names)


def test_soak_rounds_get_their_verdict_from_cpu_time(tmp_path):
    """soak.sh's workload loop on this host, with a 6 s limit and a look
    every second: a spinning round is slow, a sleeping one hung, one killed
    by SIGKILL before the limit killed, one that ends in time passes."""
    body = _soak_functions("workload", "open_nap", "doze", "stat_of", "round_age",
                           "group_ticks") + f"""
out={tmp_path}; round_limit=6 STALL_AFTER=1000 PROGRESS_WINDOW=3 SAMPLE_EVERY=1 LIMIT_SLACK=3
log() {{ echo "$*" >> "$out/log.txt"; }}
open_nap
n=0; alive() {{ (( n++ < 1 )); }}; workload spin bash -c 'while :; do :; done'
n=0; alive() {{ (( n++ < 1 )); }}; workload sleeper sleep 60
n=0; alive() {{ (( n++ < 1 )); }}; workload shot bash -c 'sleep 1; kill -9 $$'
n=0; alive() {{ (( n++ < 1 )); }}; workload quick true
"""
    subprocess.run(["bash", "-c", body], check=True, timeout=120)
    work = {w: (tmp_path / f"work.{w}").read_text().split() for w in
            ("spin", "sleeper", "shot", "quick")}
    assert work["spin"][0] in ("124", "137") and work["sleeper"][0] in ("124", "137")
    assert work["shot"] == ["137"] and work["quick"] == ["0"]
    verdicts = {p.name.split(".")[0] + "." + p.name.split(".")[1]
                for p in tmp_path.glob("*.*") if p.name.split(".")[0] in
                ("slow", "hung", "killed")}
    assert verdicts == {"slow.spin", "hung.sleeper", "killed.shot"}, (
        verdicts, (tmp_path / "log.txt").read_text())


def test_group_ticks_counts_cpu_time_of_a_busy_group_only(tmp_path):
    """soak.sh's progress test, run on this host: a spinning process group
    gains ticks within a second, a sleeping one none."""
    body = _soak_functions("stat_of", "group_ticks") + """
timeout 5 bash -c 'while :; do :; done' & busy=$!
timeout 5 sleep 4 & idle=$!
sleep 0.2; group_ticks $busy; b=$TICKS; group_ticks $idle; i=$TICKS
sleep 1; group_ticks $busy; echo $(( TICKS - b )); group_ticks $idle; echo $(( TICKS - i ))
kill $busy $idle; wait
"""
    out = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=30)
    busy, idle = (int(x) for x in out.stdout.split())
    assert busy > 0 and idle == 0, out
