"""kunit.py as users run it: the command, the TCG fallback, the verdict."""

from pathlib import Path

from schedlab import kunit_tool as kt


def report(cases, param_cases=None):
    suite = {"name": "sched_fair_lb", "test_cases": [{"name": n, "status": s} for n, s in cases],
             "sub_groups": [{"name": n, "test_cases": [{"name": p, "status": s}
                                                       for p, s in params], "sub_groups": []}
                            for n, params in (param_cases or {}).items()]}
    return {"name": "KUnit Test Group", "test_cases": [], "sub_groups": [suite]}


def test_command_is_the_readme_one():
    cmd = kt.command(Path("/b"), Path("/r.json"), 3, cc="ccache gcc")
    assert cmd[:4] == ["./tools/testing/kunit/kunit.py", "run", "--kunitconfig=kernel/sched",
                       "--qemu_config=kernel/sched/tests/kunit_qemu_x86_64.py"]
    assert "--make_options=CC=ccache gcc" in cmd and "--build_dir=/b" in cmd


def test_kvm_hidden_in_a_private_mount_namespace():
    cmd = kt.with_kvm_hidden(["./kunit.py", "run"])
    assert cmd[:2] == ["unshare", "--mount"]
    assert "mount --bind /dev/null /dev/kvm" in cmd[cmd.index("-c") + 1]
    assert cmd[-2:] == ["./kunit.py", "run"]


def test_leaves_name_params_under_their_case():
    r = report([("fixtures_fit_nr_cpu_ids", "PASS")], {"swb_x": [("smt8", "PASS")]})
    assert list(kt.leaves(r)) == [("sched_fair_lb.fixtures_fit_nr_cpu_ids", "PASS"),
                                  ("sched_fair_lb.swb_x.smt8", "PASS")]


def test_verdict_allows_only_the_live_comparison_to_skip():
    ok, line = kt.verdict(report([("fixture_matches_live_domains", "SKIP"),
                                  ("seams_stay_in_their_window", "PASS")],
                                 {"swb_x": [("smt8", "PASS")]}))
    assert ok and line.startswith("2 passed, 0 failed, 1 skipped")


def test_verdict_fails_a_run_whose_fixtures_skip():
    ok, line = kt.verdict(report([("fixtures_fit_nr_cpu_ids", "SKIP")],
                                 {"swb_x": [("smt8", "SKIP"), ("smt2", "PASS")]}))
    assert not ok
    assert "sched_fair_lb.swb_x.smt8" in line and "fixtures_fit_nr_cpu_ids" in line


def test_verdict_fails_failures_and_empty_runs():
    assert not kt.verdict(report([("a", "FAIL")]))[0]
    assert not kt.verdict(report([("a", "ERROR")]))[0]
    assert not kt.verdict({"name": "KUnit Test Group", "test_cases": [], "sub_groups": []})[0]
