"""The hardware kit's checks: what it needs of the kernel, the machine, the tools."""

from pathlib import Path

from schedlab import hw

SERIES_CONFIG = "\n".join(f"{k}=y" for k in hw.CONFIG_NEEDS) + "\nCONFIG_HZ=250\n"


def _debugfs(tmp: Path, features: str, knobs=("newidle_cost_pct",)) -> Path:
    d = tmp / "sched"
    d.mkdir()
    (d / "features").write_text(features)
    for k in knobs:
        (d / k).write_text("100\n")
    return d


def _cpus(tmp: Path, siblings: str, n: int = 4) -> Path:
    base = tmp / "cpu"
    for cpu in range(n):
        t = base / f"cpu{cpu}" / "topology"
        t.mkdir(parents=True)
        (t / "thread_siblings_list").write_text(siblings + "\n")
    return base


def test_a_kernel_with_the_series_passes(tmp_path):
    d = _debugfs(tmp_path, "GENTLE_FAIR_SLEEPERS NO_SIS_GROUP_IDLE NO_SG_STATS_REUSE\n")
    checks = hw.check_kernel(d, SERIES_CONFIG)
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]


def test_a_distribution_kernel_is_refused_with_each_piece_named(tmp_path):
    d = _debugfs(tmp_path, "GENTLE_FAIR_SLEEPERS\n", knobs=())
    missing = [c for c in hw.check_kernel(d, "CONFIG_DEBUG_FS=y\n") if not c.ok]
    names = " ".join(c.name for c in missing)
    for need in hw.KERNEL_NEEDS:
        assert need.patch in names
    assert "config CONFIG_SCHEDSTATS" in names
    assert all(c.fix for c in missing)


def test_no_debugfs_and_no_config_say_so(tmp_path):
    checks = hw.check_kernel(tmp_path / "absent", "")
    assert [c.name for c in checks if not c.ok][:1] == ["debugfs"]
    assert any(c.name == "kernel config" and not c.ok for c in checks)


def test_smt_is_counted_from_the_sibling_lists(tmp_path):
    assert hw.threads_per_core(_cpus(tmp_path / "a", "0-3,8-11")) == 8
    on = tmp_path / "on"
    on.write_text("1\n")
    ok = {c.name: c.ok for c in hw.check_machine(_cpus(tmp_path / "b", "0-3"), on, euid=0)}
    assert ok == {"root": True, "SMT": True}
    off = {c.name: c.ok for c in hw.check_machine(_cpus(tmp_path / "c", "0"), tmp_path / "x",
                                                    euid=1000)}
    assert off == {"root": False, "SMT": False}


def test_tools_name_their_fix_and_accept_any_alternative():
    have = {"funclatency", "bpftrace", "perf", "hackbench", "tbench", "stress-ng"}
    checks = hw.check_tools(lambda n: n if n in have else None)
    assert all(c.ok for c in checks)        # schbench is optional: left out
    sch = next(c for c in checks if c.name == "tool schbench")
    assert "left out" in sch.detail and "not packaged" in sch.fix
    bad = [c for c in hw.check_tools(lambda n: None) if not c.ok]
    assert "tool perf" in [c.name for c in bad] and "tool schbench" not in [c.name for c in bad]


def test_the_config_hash_ignores_comments_and_order():
    a = "# comment\nCONFIG_A=y\nCONFIG_B=m\n"
    b = "CONFIG_B=m\nCONFIG_A=y\n"
    assert hw.config_hash(a) == hw.config_hash(b) != hw.config_hash("CONFIG_A=y\n")


def test_preflight_text_marks_what_is_missing():
    pf = hw.Preflight([hw.Check("a", True, "fine"), hw.Check("b", False, "gone", "add b")])
    assert not pf.ok and [c.name for c in pf.missing()] == ["b"]
    assert "[MISSING] b: gone" in pf.text() and "fix: add b" in pf.text()


def test_the_arms_are_those_whose_pieces_the_kernel_has(tmp_path):
    d = _debugfs(tmp_path, "NO_SG_STATS_REUSE GENTLE_FAIR_SLEEPERS\n", knobs=())
    present = hw.kernel_pieces(d)
    assert present == ["SG_STATS_REUSE"]
    ok, missing = hw.arms_here(present)
    assert [a.name for a in ok] == ["series", "series-again", "lbstats"]
    assert {a.needs for a in missing} == {"newidle_cost_pct", "SIS_GROUP_IDLE"}
    assert hw.kernel_pieces(tmp_path / "absent") == []


def test_the_plan_names_every_arm_and_benchmark_and_a_duration():
    text = hw.plan_text(["newidle_cost_pct", "SIS_GROUP_IDLE", "SG_STATS_REUSE"], 5, 1, 30)
    for a in hw.ARMS:
        assert a.name in text
    assert "NOT HERE" not in text and "none of the series" not in text
    assert "5 arms x 5 rounds" in text and " h" in text
    bare = hw.plan_text([], 5, 1, 30)
    assert "none of the series" in bare and bare.count("NOT HERE") == 3
    assert hw.estimate(2, 2, 1, 30) == 2 * hw.estimate(1, 2, 1, 30)


def test_the_runs_are_an_ab_request_on_this_machine():
    req = hw.request(hw.ARMS[:2], rounds=3, runs=2, seconds=20)
    assert req.host and req.tree is None and req.boots == 3
    assert [a.name for a in req.arms] == ["series", "series-again"]
    assert {a.variant for a in req.arms} == {"host"}
    assert req.plan.runs == 2 and req.plan.seconds == 20
    assert set(hw.BENCHMARKS) <= set(req.plan.names())
    assert req.record()["tree"] == "host"


def test_the_arms_interleave_round_by_round_with_their_knobs(tmp_path, monkeypatch):
    from schedlab import ab
    from schedlab import measure as measuremod
    from schedlab import plan as planmod
    from schedlab import results as resmod
    from schedlab.util import Stages
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path))
    monkeypatch.setattr(resmod, "results_dir", lambda label: tmp_path / "results" / label)
    monkeypatch.setattr(measuremod, "host_setting",
                        lambda plan, variant: resmod.Setting(topology="host: test",
                                                             config="host-config:x"))
    monkeypatch.setattr(planmod.Plan, "check_tools", lambda self: None)
    monkeypatch.setattr(resmod, "merge_boots", lambda *a, **k: [])
    calls = []
    monkeypatch.setattr(measuremod, "measure_host",
                        lambda label, plan, setting, timeout, key="":
                        calls.append((label, dict(plan.knobs))) or [])
    arms = (hw.ARMS[0], hw.ARMS[4])
    ab._measure(hw.request(arms, rounds=2, runs=1, seconds=5), Stages())
    assert calls == [("hw-series/boot-0", {}),
                     ("hw-lbstats/boot-0", {"features": "SG_STATS_REUSE"}),
                     ("hw-series/boot-1", {}),
                     ("hw-lbstats/boot-1", {"features": "SG_STATS_REUSE"})]


def test_a_named_config_stands_in_for_the_running_kernels(tmp_path, monkeypatch):
    conf = tmp_path / "config"
    conf.write_text(SERIES_CONFIG)
    monkeypatch.setenv(hw.CONFIG_ENV, str(conf))
    assert hw.config_text() == SERIES_CONFIG
    monkeypatch.setenv(hw.CONFIG_ENV, str(tmp_path / "absent"))
    assert hw.config_text() == ""


def test_arms_and_benchmarks_are_picked_by_name_before_any_run():
    import pytest
    from schedlab.util import LabError
    arms, bench = hw.pick(hw.ARMS, ["series", "lbstats"], ["stress-100"])
    assert [a.name for a in arms] == ["series", "lbstats"] and bench == ["stress-100"]
    assert hw.pick(hw.ARMS, None, None) == (list(hw.ARMS), list(hw.BENCHMARKS))
    for names, bench in ((["nope", "series"], None), (["series"], None),
                         (["series", "lbstats"], ["nope"])):
        with pytest.raises(LabError):
            hw.pick(hw.ARMS, names, bench)
    with pytest.raises(LabError, match="cannot run"):
        hw.pick(hw.ARMS[:2], ["series", "lbstats"], None)
