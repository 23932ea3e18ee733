"""kunit.py as users run it: the command, the TCG fallback, the verdict."""

from pathlib import Path

from schedlab.core import vm
from schedlab.series import kunit_tool as kt

# The JSON report of the README's kunit.py command in the lab (53 tests).
REAL_REPORT = Path(__file__).parent / "data" / "kunit-tool-report.json"


def report(cases, param_cases=None):
    suite = {"name": "sched_fair_lb", "test_cases": [{"name": n, "status": s} for n, s in cases],
             "sub_groups": [{"name": n, "test_cases": [{"name": p, "status": s}
                                                       for p, s in params], "sub_groups": []}
                            for n, params in (param_cases or {}).items()]}
    return {"name": "KUnit Test Group", "test_cases": [], "sub_groups": [suite]}


def test_command_is_the_readme_one():
    cmd = kt.command(Path("/b"), Path("/r.json"), 3, cc="ccache gcc")
    assert cmd[:4] == ["./tools/testing/kunit/kunit.py", "run", "--kunitconfig=kernel/sched",
                       "--arch=x86_64-smt8"]
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


def test_verdict_and_counts_of_a_real_report():
    report = kt.load_report(REAL_REPORT)
    assert report is not None
    ok, line = kt.verdict(report)
    assert ok
    assert line == "52 passed, 0 failed, 1 skipped (sched_fair_lb.fixture_matches_live_domains)"
    n = kt.counts(report)
    assert (n.passed, n.failed, n.crashed, n.skipped, n.errors, n.total) == (52, 0, 0, 1, 0, 53)
    assert {name.split(".")[0] for name, _ in kt.leaves(report)} == {"sched_fair_newidle",
                                                                     "sched_fair_lb"}


def test_counts_from_leaves_without_misc():
    n = kt.counts(report([("a", "PASS"), ("b", "SKIP"), ("c", "ERROR"), ("d", "FAIL")],
                         {"p": [("x", "PASS"), ("y", "FAIL")]}))
    assert (n.passed, n.failed, n.crashed, n.skipped, n.total) == (2, 2, 1, 1, 6)
    assert kt.counts({}).total == 0


def test_counts_follow_kunit_py_misc():
    # kunit.py counts a parameterised case that failed around passing
    # parameters once more than its leaves show.
    r = report([], {"p": [("x", "PASS")]})
    r["misc"] = {"tests": 2, "passed": 1, "failed": 1, "crashed": 0, "skipped": 0, "errors": 0}
    n = kt.counts(r)
    assert (n.passed, n.failed, n.total) == (1, 1, 2)


def test_load_report_missing_or_broken(tmp_path):
    assert kt.load_report(tmp_path / "none.json") is None
    (tmp_path / "bad.json").write_text("{")
    assert kt.load_report(tmp_path / "bad.json") is None
    (tmp_path / "list.json").write_text("[]")
    assert kt.load_report(tmp_path / "list.json") is None


def test_run_readme_command_hides_broken_kvm(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path))
    monkeypatch.setattr(vm, "kvm_works", lambda image: (False, "KVM hangs"))
    seen = {}

    def run(tree_path, build_dir, hide_kvm, env, cc=None, timeout=3600, arch=None):
        seen.update(tree=tree_path, build=build_dir, hide=hide_kvm, env=env)
        return kt.ToolResult(True, "52 passed, 0 failed, 1 skipped", 61.4,
                             tmp_path / "kunit-tool.log", hide_kvm)
    monkeypatch.setattr(kt, "run", run)
    assert kt.run_readme_command(Path("/t"), "debian-7.3", Path("/b/bzImage"))
    assert seen["tree"] == Path("/t") and seen["hide"] is True
    assert seen["build"] == tmp_path / "build" / "debian-7.3" / "kunit-tool"
    assert seen["env"]["KBUILD_BUILD_USER"] == "schedlab"
    out = capsys.readouterr().out.splitlines()
    assert out == ["  KVM: not usable (KVM hangs); /dev/kvm hidden from qemu (docs/kunit.md: TCG "
                   "fallback)",
                   "  kunit.py: 52 passed, 0 failed, 1 skipped",
                   f"  kunit.py: ok in 61s, build and boot included (log: "
                   f"{tmp_path / 'kunit-tool.log'})"]
