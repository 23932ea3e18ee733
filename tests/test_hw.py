"""The hardware kit's checks: what it needs of the kernel, the machine, the tools."""

import json
from contextlib import contextmanager
from contextlib import nullcontext as _no_raise
from pathlib import Path

import pytest

from schedlab.core.util import LabError
from schedlab.kit import arms as armmod
from schedlab.kit import benchmarks as benchmod
from schedlab.kit import hw, hwreport, machine, noise, rounds

ARM = {a.name: a for a in armmod.KIT_ARMS}
SERIES_CONFIG = "\n".join(f"{k}=y" for k in machine.CONFIG_NEEDS) + "\nCONFIG_HZ=250\n"


def _debugfs(tmp: Path, features: str, knobs=("newidle_cost_pct", "swb_state")) -> Path:
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
    checks = machine.check_kernel(d, SERIES_CONFIG)
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]


def test_a_distribution_kernel_is_refused_with_each_piece_named(tmp_path):
    d = _debugfs(tmp_path, "GENTLE_FAIR_SLEEPERS\n", knobs=())
    missing = [c for c in machine.check_kernel(d, "CONFIG_DEBUG_FS=y\n") if not c.ok]
    names = " ".join(c.name for c in missing)
    for need in machine.KERNEL_NEEDS:
        assert need.patch in names
    assert "config CONFIG_SCHEDSTATS" in names
    assert all(c.fix for c in missing)


def test_the_stock_kernel_passes_without_the_series_and_is_told_apart(tmp_path, monkeypatch):
    d = _debugfs(tmp_path, "GENTLE_FAIR_SLEEPERS\n", knobs=())
    checks = machine.check_kernel(d, SERIES_CONFIG, stock=True)
    assert all(c.ok for c in checks)
    assert any(c.name == "the stock kernel" for c in checks)
    assert not any(c.name.startswith("series:") for c in checks)
    monkeypatch.delenv(armmod.REHEARSAL_ENV, raising=False)
    kit = {"variant": "patched"}
    assert machine.running_kernel(["swb_state"], kit) == "kit"
    assert machine.running_kernel([], {"variant": "base"}) == "stock"
    assert machine.running_kernel([], {"variant": ""}) == ""       # a distribution's
    monkeypatch.setenv(armmod.REHEARSAL_ENV, "1")                   # the rehearsal's base
    assert machine.running_kernel([], {"variant": ""}) == "stock"


def _domains(d, levels):
    """cpu0's domains in debugfs: (min_interval, flags) bottom-up."""
    for i, (weight, flags) in enumerate(levels):
        dom = d / "domains" / "cpu0" / f"domain{i}"
        dom.mkdir(parents=True)
        (dom / "min_interval").write_text(f"{weight}\n")
        (dom / "flags").write_text(flags + " \n")


LLC = "SD_BALANCE_NEWIDLE SD_SHARE_LLC"


def _llc_checks(d, cpu_dir=None):
    return [c for c in machine.check_kernel(d, SERIES_CONFIG, cpu_dir or d / "no-cpus")
            if c.name == "cache aware scheduling"]


def _caches(root, llc, online):
    """cpu0's last cache level shared with LLC, and the ONLINE CPUs (sysfs)."""
    (root / "cpu0" / "cache" / "index3").mkdir(parents=True)
    (root / "cpu0" / "cache" / "index1").mkdir()
    (root / "cpu0" / "cache" / "index3" / "shared_cpu_list").write_text(llc + "\n")
    (root / "cpu0" / "cache" / "index1" / "shared_cpu_list").write_text("0,8\n")
    (root / "online").write_text(online + "\n")
    return root


def test_cache_aware_scheduling_active_is_named_without_refusing(tmp_path):
    d = _debugfs(tmp_path, "NO_SG_STATS_REUSE\n")
    assert not _llc_checks(d)
    (d / "llc_balancing").mkdir()
    (d / "llc_balancing" / "enabled").write_text("1\n")
    # Two sockets of 2 SMT4 cores, one LLC each: the LLC domain has a parent.
    _domains(d, [(4, "SD_SHARE_CPUCAPACITY " + LLC), (8, LLC), (16, "SD_NUMA")])
    llc = _llc_checks(d)
    assert len(llc) == 1 and llc[0].ok
    assert "several LLCs" in llc[0].detail and "SG_STATS_REUSE keeps no sums" in llc[0].detail
    assert "lbstats arm turns it off" in llc[0].detail and not llc[0].fix
    assert machine._llc_record(d, tmp_path / "none") == "1 (active: several LLCs)"
    (d / "llc_balancing" / "enabled").write_text("0\n")
    llc = _llc_checks(d)
    assert llc[0].ok and "measures the reuse" in llc[0].detail and not llc[0].fix
    assert machine._llc_record(d, tmp_path / "none") == "0"


def test_cache_aware_scheduling_needs_several_llcs(tmp_path):
    # One socket, one LLC (the lab's smt8): the switch reads 1 and is not
    # active, so the reuse keeps its sums and the lbstats arm measures it.
    d = _debugfs(tmp_path, "NO_SG_STATS_REUSE\n")
    (d / "llc_balancing").mkdir()
    (d / "llc_balancing" / "enabled").write_text("1\n")
    _domains(d, [(8, "SD_SHARE_CPUCAPACITY " + LLC), (16, LLC)])
    llc = _llc_checks(d)
    assert "not active" in llc[0].detail and "measures the reuse" in llc[0].detail
    assert not llc[0].fix and machine._llc_record(d, tmp_path / "none") == "1 (not active)"
    assert machine.several_llcs(d, tmp_path / "none") is False
    # No domains in debugfs (sched/verbose off, the default): sysfs's cache
    # levels say, and where they do not, it may be active.
    (tmp_path / "b").mkdir()
    d2 = _debugfs(tmp_path / "b", "NO_SG_STATS_REUSE\n")
    (d2 / "llc_balancing").mkdir()
    (d2 / "llc_balancing" / "enabled").write_text("1\n")
    llc = _llc_checks(d2)
    assert "nor sysfs shows" in llc[0].detail and "write 0" in llc[0].detail
    assert machine.several_llcs(d2, tmp_path / "none") is None
    two = _caches(tmp_path / "two", "0-7", "0-15")
    assert machine.several_llcs(d2, two) is True and machine._llc_record(d2, two).endswith("several LLCs)")
    one = _caches(tmp_path / "one", "0-15", "0-15")
    assert machine.several_llcs(d2, one) is False and "not active" in _llc_checks(d2, one)[0].detail
    # Sub-NUMA clusters: L3 spans the package, the LLC domain one node.
    (tmp_path / "node").mkdir()
    (tmp_path / "node" / "online").write_text("0-1\n")
    snc = _caches(tmp_path / "cpu", "0-15", "0-15")
    assert machine.several_llcs(d2, snc) is True


def test_no_debugfs_and_no_config_say_so(tmp_path):
    checks = machine.check_kernel(tmp_path / "absent", "")
    assert [c.name for c in checks if not c.ok][:1] == ["debugfs"]
    assert any(c.name == "kernel config" and not c.ok for c in checks)


def test_smt_is_counted_from_the_sibling_lists(tmp_path):
    assert machine.threads_per_core(_cpus(tmp_path / "a", "0-3,8-11")) == 8
    on = tmp_path / "on"
    on.write_text("1\n")
    ok = {c.name: c.ok for c in machine.check_machine(_cpus(tmp_path / "b", "0-3"), on, euid=0)}
    assert ok == {"root": True, "SMT": True}
    off = {c.name: c.ok for c in machine.check_machine(_cpus(tmp_path / "c", "0"), tmp_path / "x",
                                                    euid=1000)}
    assert off == {"root": False, "SMT": False}


def test_tools_name_their_fix_and_accept_any_alternative():
    have = {"funclatency", "bpftrace", "perf", "hackbench", "tbench", "stress-ng"}
    checks = machine.check_tools(lambda n: n if n in have else None)
    assert all(c.ok for c in checks)        # schbench is optional: left out
    sch = next(c for c in checks if c.name == "tool schbench")
    assert "left out" in sch.detail and "not packaged" in sch.fix
    bad = [c for c in machine.check_tools(lambda n: None) if not c.ok]
    assert "tool perf" in [c.name for c in bad] and "tool schbench" not in [c.name for c in bad]


def test_the_config_hash_ignores_comments_and_order():
    a = "# comment\nCONFIG_A=y\nCONFIG_B=m\n"
    b = "CONFIG_B=m\nCONFIG_A=y\n"
    assert machine.config_hash(a) == machine.config_hash(b) != machine.config_hash("CONFIG_A=y\n")


def test_preflight_text_marks_what_is_missing():
    pf = machine.Preflight([machine.PreflightCheck("a", True, "fine"), machine.PreflightCheck("b", False, "gone", "add b")])
    assert not pf.ok and [c.name for c in pf.missing()] == ["b"]
    assert "[MISSING] b: gone" in pf.text() and "fix: add b" in pf.text()


def test_the_arms_are_those_whose_pieces_the_kernel_has(tmp_path):
    d = _debugfs(tmp_path, "NO_SG_STATS_REUSE GENTLE_FAIR_SLEEPERS\n", knobs=())
    present = machine.kernel_pieces(d)
    assert present == ["SG_STATS_REUSE"]
    ok, missing = armmod.arms_here(present)
    assert [a.name for a in ok] == ["series", "series-again", "stock", "lbstats"]
    assert {a.needs for a in missing} == {"swb_state", "newidle_cost_pct", "SIS_GROUP_IDLE"}
    assert machine.kernel_pieces(tmp_path / "absent") == []


def test_the_lbstats_arm_turns_cache_aware_scheduling_off_only_where_active():
    every = [n.name for n in machine.KERNEL_NEEDS]
    lb, series, off = ARM["lbstats"], ARM["series"], ARM["llc-off"]
    # One LLC or no such switch: nobody writes it, llc-off does not run.
    assert all(k != "llc_balancing/enabled" for a in armmod.KIT_ARMS
               for k, _ in armmod.arm_knobs(a, every))
    assert off not in armmod.arms_here(every)[0] and off not in armmod.arms_here(every)[1]
    # Active: lbstats and llc-off write 0, every other kit arm 1 (as the
    # machine had it); the stock kernel none.
    active = every + [armmod.LLC_ACTIVE]
    assert off in armmod.arms_here(active)[0]
    assert ("llc_balancing/enabled", "0") in armmod.arm_knobs(lb, active)
    assert ("llc_balancing/enabled", "0") in armmod.arm_knobs(off, active)
    assert ("llc_balancing/enabled", "1") in armmod.arm_knobs(series, active)
    assert armmod.arm_knobs(ARM["stock"], active) == ()
    # llc-off is the series in every other switch, so lbstats against it
    # is the feature alone.
    assert [kv for kv in armmod.arm_knobs(off, active) if kv[0] != "llc_balancing/enabled"] \
        == [kv for kv in armmod.arm_knobs(series, active) if kv[0] != "llc_balancing/enabled"]
    assert ("llc-off", "lbstats") in armmod.patch_pairs([series, off, lb])
    # The report's titles say so where lbstats turned it off and the
    # reference did not.
    states = [hwreport.ArmState(a.name, a.what, armmod.arm_knobs(a, active), 0, 1, a.before)
              for a in (series, off, lb)]
    titles = [t for _, _, t in hwreport.pairs(states)]
    assert "lbstats against series (cache aware scheduling off in lbstats only)" in titles
    assert "lbstats against llc-off: the patch's own effect" in titles
    plain = [hwreport.ArmState(a.name, a.what, armmod.arm_knobs(a, every), 0, 1, a.before)
             for a in (series, lb)]
    assert [t for _, _, t in hwreport.pairs(plain)] == ["lbstats against series"]
    # The mail's heading too.
    from schedlab.kit import reporttext
    assert reporttext.pair_block("series", "lbstats", [], [], {}, {}, title=titles[0])[0] \
        == titles[0]


def test_the_plan_names_every_arm_and_benchmark_and_a_duration():
    text = hw.plan_text(["swb_state", "newidle_cost_pct", "SIS_GROUP_IDLE", "SG_STATS_REUSE"],
                        5, 1, 30)
    for a in armmod.KIT_ARMS:
        assert a.name in text
    assert "NOT HERE" not in text and "none of the series" not in text
    assert "10 arms x 5 rounds" in text and " h" in text
    bare = hw.plan_text([], 5, 1, 30)
    assert "none of the series" in bare and bare.count("NOT HERE") == 7
    assert hw.estimate(2, 2, 1, 30, ["stress-100"]) == 2 * hw.estimate(1, 2, 1, 30,
                                                                        ["stress-100"])
    # Here and booted into the series, with the arms and benchmarks asked for.
    assert "3 arms x 5 rounds" in bare and "10 arms x 5 rounds" in bare
    few = hw.plan_text([], 5, 1, 30, ["series", "swb-v7.3"], ["stress-100"], cpus=16)
    assert "the throughput pass's benchmarks on 16 CPUs: stress-100\n" in few
    assert "the probes pass's benchmarks on 16 CPUs: stress-100\n" in few
    assert "lbstats" not in few
    assert "1 arms x 5 rounds x 1 run(s), 30s a run, here" in few
    assert "2 arms x 5 rounds x 1 run(s), 30s a run, booted" in few
    # Every pass's own benchmarks by default, swept on the CPUs given; no
    # schbench binary: left out, and said.
    full = hw.plan_text([], 5, 1, 30, cpus=16)
    assert "hackbench-thread-pipe-g4, " in full and "tbench-c32" in full
    assert "schbench-m2" not in full and "schbench: not here" in full
    assert "schbench-m2-t8" in hw.plan_text([], 5, 1, 30, cpus=16,
                                            schbench=Path("/x/schbench"))
    # Refused before anything: one arm, an empty benchmark, a count of 0.
    for args, what in (((["series"],), "at least two arms"),
                       ((None, ["stress", ""]), "an empty name"),
                       ((None, ["hackbench-process-socket-g0"]), "counts start at 1")):
        with pytest.raises(LabError, match=what):
            hw.plan_text([], 5, 1, 30, *args)
    # The probe pass runs the kit kernel's arms: with one of them, none.
    one = hw.plan_text([], 5, 1, 30, ["series", "stock"], ["stress-100"])
    assert "no probes pass" in one and "1 pass(es) x" in one
    # A label has folders of its own, which no arm's or pass's can be.
    assert hw.THROUGHPUT.labelled("series").prefix == "hw-tp@series"
    for bad in ("SMT 4", "smt8-llc-off"):     # a -: LABEL-ARM could be a label's folder
        with pytest.raises(LabError, match="--label"):
            hw.THROUGHPUT.labelled(bad)
    with pytest.raises(LabError, match="unknown arm"):
        hw.plan_text([], 5, 1, 30, ["nope"])


def test_the_runs_are_an_ab_request_on_this_machine():
    req = hw.request(armmod.KIT_ARMS[:2], rounds=3, runs=2, seconds=20)
    assert req.host and req.tree is None and req.boots == 3
    assert [a.name for a in req.arms] == ["series", "series-again"]
    assert {a.variant for a in req.arms} == {"kit"}       # the kernel they run on
    assert req.plan.runs == 2 and req.plan.seconds == 20
    assert req.plan.names() == benchmod.expand(hw.PROBE_PASS.bench, hw.ncpu())
    assert req.plan.warmup and req.plan.warm == tuple(benchmod.first_points(req.plan.names()))
    assert req.record()["tree"] == "host"


def _host_ab(tmp_path, monkeypatch, measured):
    """'ab' on this machine, the host's setting and config made up, each
    arm's round measured by MEASURED(label, plan)."""
    from schedlab.measuring import measure as measuremod
    from schedlab.measuring import plan as planmod
    from schedlab.measuring import results as resmod
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path))
    monkeypatch.setattr(resmod, "results_dir", lambda label: tmp_path / "results" / label)
    monkeypatch.setattr(measuremod, "host_setting",
                        lambda plan, variant: resmod.Setting(topology="host: test",
                                                             config="host-config:x"))
    monkeypatch.setattr(planmod.Plan, "check_tools", lambda self: None)
    monkeypatch.setattr(resmod, "merge_boots", lambda *a, **k: [])
    monkeypatch.setattr(measuremod, "measure_host",
                        lambda label, plan, setting, timeout, key="": measured(label, plan))


def test_the_arms_interleave_round_by_round_with_their_knobs(tmp_path, monkeypatch):
    from schedlab.core.stages import Report
    from schedlab.measuring import ab
    calls = []
    _host_ab(tmp_path, monkeypatch, lambda label, plan:
             calls.append((label, dict(plan.knobs))) or [])
    arms = (armmod.KIT_ARMS[0], ARM["lbstats"])
    ab._measure(hw.request(arms, rounds=2, runs=1, seconds=5), Report("ab"))
    assert calls == [("hw-series/boot-0", {}),
                     ("hw-lbstats/boot-0", {"features": "SG_STATS_REUSE"}),
                     ("hw-series/boot-1", {}),
                     ("hw-lbstats/boot-1", {"features": "SG_STATS_REUSE"})]


def test_the_kernel_identity_names_the_labs_variant_and_sources():
    ident = machine.kernel_identity("7.3.4-schedlab-patched-0123abcd", SERIES_CONFIG)
    assert ident == {"release": "7.3.4-schedlab-patched-0123abcd", "variant": "patched",
                     "sources": "0123abcd", "config": machine.config_hash(SERIES_CONFIG)}
    assert machine.kernel_identity("6.1.0-27-amd64", "")["sources"] == ""


def test_a_kernel_rebuilt_from_a_changed_series_is_refused_on_resume(tmp_path, monkeypatch):
    from collections import namedtuple

    from schedlab.core.stages import Report
    from schedlab.measuring import ab
    from schedlab.measuring import results as resmod
    done = resmod.Run(complete=True)
    calls = []
    # The first round finished, the next not.
    _host_ab(tmp_path, monkeypatch,
             lambda label, plan: calls.append(label) or ([done] if len(calls) < 3 else []))
    uname = namedtuple("uname", "release")
    req = hw.request((armmod.KIT_ARMS[0], ARM["lbstats"]), rounds=3, runs=1, seconds=5)
    monkeypatch.setattr(ab.os, "uname", lambda: uname("7.3.4-schedlab-patched-0123abcd"))
    ab._measure(req, Report("ab"))
    monkeypatch.setattr(ab.os, "uname", lambda: uname("7.3.4-schedlab-patched-89abcdef"))
    with pytest.raises(LabError, match="builds: kit: .*0123abcd.* there, .*89abcdef.* now"):
        ab._measure(req, Report("ab"))


def test_a_named_config_stands_in_for_the_running_kernels(tmp_path, monkeypatch):
    conf = tmp_path / "config"
    conf.write_text(SERIES_CONFIG)
    monkeypatch.setenv(machine.CONFIG_ENV, str(conf))
    assert machine.config_text() == SERIES_CONFIG
    monkeypatch.setenv(machine.CONFIG_ENV, str(tmp_path / "absent"))
    assert machine.config_text() == ""


def test_arms_and_benchmarks_are_picked_by_name_before_any_run():
    from schedlab.core.util import LabError
    arms = hw.pick(armmod.KIT_ARMS, ["series", "lbstats"], ["stress-100"])
    assert [a.name for a in arms] == ["series", "lbstats"]
    assert hw.pick(armmod.KIT_ARMS, None, None) == list(armmod.KIT_ARMS)
    assert hw.pick(armmod.KIT_ARMS, None, ["hackbench", "tbench-c3", "schbench-m2-t8",
                                           "hackbench-overload"])
    for names, bench in ((["nope", "series"], None), (["series"], None),
                         (["series", "lbstats"], ["nope"])):
        with pytest.raises(LabError):
            hw.pick(armmod.KIT_ARMS, names, bench)
    with pytest.raises(LabError, match="cannot run"):
        hw.pick(armmod.KIT_ARMS[:2], ["series", "lbstats"], None)


def test_the_arms_run_in_the_order_given_and_the_first_is_the_reference():
    arms = hw.pick(armmod.KIT_ARMS, ["swb-v7.3", "series", "swb-busy"], None)
    assert [a.name for a in arms] == ["swb-v7.3", "series", "swb-busy"]
    req = hw.request(arms, rounds=3, runs=1, seconds=5)
    assert [a.name for a in req.arms] == ["swb-v7.3", "series", "swb-busy"]
    states = [hwreport.ArmState(a.name, a.what, a.knobs, 0, 1, a.before) for a in arms]
    assert [(a, b) for a, b, _ in hwreport.pairs(states)][:2] == [
        ("swb-v7.3", "series"), ("swb-v7.3", "swb-busy")]
    present = [n.name for n in machine.KERNEL_NEEDS]
    text = hw.plan_text(present, 5, 1, 30, ["lbstats", "series"])
    assert text.index("  lbstats") < text.index("  series")


def test_fewer_than_three_rounds_are_refused_but_in_the_rehearsal(monkeypatch, capsys):
    from schedlab import cli
    from schedlab.kit import rehearsal
    monkeypatch.delenv(armmod.REHEARSAL_ENV, raising=False)
    monkeypatch.setattr(machine, "preflight", lambda: pytest.fail("checked the machine"))
    for argv in (["hw", "--rounds", "2"], ["hw", "--plan", "--rounds", "1"]):
        assert cli.main(argv) != 0
        assert "at least 3 rounds" in capsys.readouterr().err
    armmod.check_rounds(3)
    monkeypatch.setenv(armmod.REHEARSAL_ENV, "1")
    armmod.check_rounds(1)
    script = rehearsal.guest_script(rehearsal.RehearsalRequest(), rehearsal.GuestPaths(
        "/lab", "work/venv/bin/python", "/w/guest", "/b/.config"))
    assert f"{armmod.REHEARSAL_ENV}=1" in script and "--rounds 1" in script


def test_every_arm_writes_every_switch_its_own_value_over_the_posted_one():
    present = [n.name for n in machine.KERNEL_NEEDS]
    for arm in armmod.KIT_ARMS:
        knobs = armmod.arm_knobs(arm, present)
        if arm.kernel == armmod.STOCK:      # the tree without the series: no switch
            assert knobs == ()
            continue
        assert [k for k, _ in knobs] == ["swb_state", "newidle_cost_pct", "features"], arm
        values = dict(knobs)
        assert sorted(f.removeprefix("NO_") for f in values["features"].split()) == \
            ["SG_STATS_REUSE", "SIS_GROUP_IDLE"]
        for k, v in arm.knobs:
            assert (v in values[k].split()) if k == "features" else values[k] == v
    assert dict(armmod.arm_knobs(ARM["wake-tg"], present)) == {
        "swb_state": "4", "newidle_cost_pct": "100",
        "features": "SIS_GROUP_IDLE NO_SG_STATS_REUSE"}
    # Only the switches this kernel has, beside the arm's own.
    assert armmod.arm_knobs(ARM["swb-v7.3"], ["swb_state"]) == (("swb_state", "0"),)
    assert armmod.arm_knobs(ARM["lbstats"], ["swb_state"]) == (("swb_state", "4"),
                                                           ("features", "SG_STATS_REUSE"))


def test_the_seed_of_an_unfinished_run_orders_the_run_that_resumes_it(tmp_path, monkeypatch):
    from schedlab.measuring import resume
    monkeypatch.setattr(hw.resmod, "results_dir", lambda label: tmp_path / label)
    assert hw.order_seed(hw.PROBE_PASS, False, 11) == 11
    record = resume.Record("ab", {"order_seed": 1234})
    resume.write(tmp_path / "hw", record)
    fresh = hw.order_seed(hw.PROBE_PASS, False, None)     # nothing finished: a new seed
    assert isinstance(fresh, int)
    record.finish("series", 0)
    resume.write(tmp_path / "hw", record)
    assert hw.order_seed(hw.PROBE_PASS, False, None) == 1234
    assert hw.order_seed(hw.PROBE_PASS, False, 5) == 5
    seeds = {hw.order_seed(hw.PROBE_PASS, True, None) for _ in range(4)}
    assert 1234 not in seeds and len(seeds) > 1


# ------------------------------------------------------------------ the report

# What the kit rehearsal wrote (its plots left empty: the report only links them).
REHEARSAL = Path(__file__).resolve().parent / "data" / "hw-rehearsal-smt8"


def _rehearsal_report(tmp_path):
    import json
    import shutil

    from schedlab.kit import hwreport
    results = tmp_path / "hw"
    shutil.copytree(REHEARSAL / "hw", results)
    machine = json.loads((REHEARSAL / "machine.json").read_text())
    arms = [hwreport.ArmState("series", armmod.KIT_ARMS[0].what, (), 2, 2),
            hwreport.ArmState("lbstats", ARM["lbstats"].what, ARM["lbstats"].knobs, 1, 2)]
    path = hwreport.write(results, machine, arms,
                          ["./schedlab", "hw", "--arm", "series", "--arm", "lbstats"],
                          missing=["wake-tg"], left_out=["schbench"],
                          settings={"rounds": 1, "seconds": 3})
    return path, path.read_text()


def test_the_report_has_the_machine_the_command_and_each_arm(tmp_path):
    path, text = _rehearsal_report(tmp_path)
    assert path == tmp_path / "hw" / "report.md"
    assert "| threads per core | 8 |" in text and "| CPUs | 16 |" in text
    assert "./schedlab hw --arm series --arm lbstats" in text
    assert "`echo SG_STATS_REUSE > /sys/kernel/debug/sched/features`" in text
    assert "| lbstats |" in text and "1 of 2 |" in text
    # The rehearsal had one pair, so 'ab' wrote the untagged tables.
    assert "### lbstats against series" in text
    assert "stress-ng cpu bogo-ops/s" in text
    for link in ("plots/latency-stress-100.png", "plots/counts.png"):
        assert f"]({link})" in text and (path.parent / link).exists()
    assert (path.parent / "machine.json").exists()


def test_the_report_says_what_is_not_in_it(tmp_path):
    _, text = _rehearsal_report(tmp_path)
    gaps = text.split("## Not in this report")[1]
    assert "the arm wake-tg" in gaps and "the benchmark schbench" in gaps
    assert "lbstats: 1 run(s) not finished" in gaps and "series:" not in gaps
    assert "No A/A margin" in text      # the rehearsal ran no repeated arm


def test_a_report_before_any_comparison_says_so(tmp_path):
    from schedlab.kit import hwreport
    arms = [hwreport.ArmState(a.name, a.what, a.knobs, 0, 5) for a in armmod.KIT_ARMS[:3]]
    text = hwreport.write(tmp_path / "hw", {}, arms, ["./schedlab", "hw"]).read_text()
    assert text.count("Not compared yet") == 2
    assert "No record of the machine" in text


def _fake_kit(tmp_path, monkeypatch, behaviour):
    from schedlab.measuring import ab
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path))
    monkeypatch.setattr(machine, "preflight", lambda: machine.Preflight([]))
    monkeypatch.setattr(machine, "machine_record", lambda: {"model": "test box"})
    monkeypatch.setattr(machine, "kernel_pieces", lambda d: [n.name for n in machine.KERNEL_NEEDS])
    monkeypatch.setattr(noise, "record", lambda: {"governor": "powersave x 4",
                                                  "busy processes": []})
    pins = []

    @contextmanager
    def pinned(pin):
        pins.append(pin)
        yield "performance set on 4 CPU(s), put back after" if pin else "left"
    pinned.pins = pins      # type: ignore[attr-defined]
    monkeypatch.setattr(noise, "pinned", pinned)
    asked = []

    def fake(req, tables_only=False):
        asked.append((tables_only, req))
        return behaviour(req)
    monkeypatch.setattr(ab, "run", fake)
    return asked


def test_the_report_is_written_after_ctrl_c(tmp_path, monkeypatch):
    import json

    from schedlab.measuring import ab

    def interrupted(req):
        req.on_start()
        raise KeyboardInterrupt
    asked = _fake_kit(tmp_path, monkeypatch, interrupted)
    stale = tmp_path / "results" / "hw-tp" / "plots-old"
    stale.mkdir(parents=True)
    (tmp_path / "results" / "hw-tp" / "headline-series-vs-lbstats.md").write_text("old")
    with pytest.raises(KeyboardInterrupt):
        rounds.run(False, hw.KitRun(3, 3, seconds=5, arms=("series", "lbstats"),
                                bench=("stress-100",), argv=("./schedlab", "hw", "--rounds", "3"),
                                seed=7))
    # No tables after an interruption: they need every round pooled. The
    # throughput pass comes first, and the probe pass does not start.
    assert [t for t, _ in asked] == [False]
    req = asked[0][1]
    assert req.prefix == "hw-tp" and req.plan.probes == () and req.plan.clean
    assert req.plan.warmup      # each benchmark once before its runs, not recorded
    # The reference writes every switch as the series posts it: no arm runs
    # in another's leftover.
    assert req.arms[0].knobs == (("swb_state", "4"), ("newidle_cost_pct", "100"),
                                 ("features", "NO_SIS_GROUP_IDLE NO_SG_STATS_REUSE"))
    assert req.order_seed == 7
    record = json.loads((tmp_path / "hw-tp" / rounds.RUN_RECORD).read_text())
    assert record["pass"] == "throughput" and not (tmp_path / "hw" / rounds.RUN_RECORD).exists()
    assert record["arms"] == ["series", "lbstats"] and record["rounds"] == 3
    assert record["machine"]["model"] == "test box" and record["order_seed"] == 7
    assert record["machine"]["noise"]["governor"] == "powersave x 4"
    results = tmp_path / "results" / "hw-tp"
    text = (results / "report.md").read_text()
    assert text.startswith("# The series on test box: the hardware kit's report, the "
                           "throughput pass")
    assert "nothing was attached to the runs" in text
    # What else moves the numbers, on record.
    assert "| governor | powersave x 4 |" in text
    assert "| governor for the runs | performance set on 4 CPU(s), put back after |" in text
    assert "| other busy processes (over 5% of a CPU for 1 s before the runs) | none |" in text
    assert "test box" in text and "./schedlab hw --rounds 3" in text
    assert "series: 3 run(s) not finished" in text
    assert "| series | the series, every experimental feature off: the reference | " \
        "`echo 4 > /sys/kernel/debug/sched/swb_state`; " \
        "`echo 100 > /sys/kernel/debug/sched/newidle_cost_pct`; " \
        "`echo NO_SIS_GROUP_IDLE NO_SG_STATS_REUSE > /sys/kernel/debug/sched/features` |" \
        not in text     # several features are several writes
    assert "`echo NO_SIS_GROUP_IDLE > /sys/kernel/debug/sched/features`; " \
        "`echo NO_SG_STATS_REUSE > /sys/kernel/debug/sched/features` |" in text
    orders = ab.round_orders(["series", "lbstats"], 7, 3)
    assert "arm order: shuffled every round with seed 7 (" + "; ".join(
        ", ".join(o) for o in orders) + ")" in text
    # An earlier run's tables are gone, not shown as this run's.
    assert not stale.exists() and not (results / "headline-series-vs-lbstats.md").exists()
    assert "old" not in text and text.count("Not compared yet") == 1
    assert rounds.report_again() == 0


def test_the_kit_runs_the_throughput_pass_then_the_probe_pass(tmp_path, monkeypatch):
    def finished(req):
        req.on_start()
        return 0
    asked = _fake_kit(tmp_path, monkeypatch, finished)
    assert rounds.run(False, hw.KitRun(3, 3, seconds=5, arms=("series", "lbstats"),
                                   bench=("stress-100",))) == 0
    runs = [req for tables, req in asked if not tables]
    assert [r.prefix for r in runs] == ["hw-tp", "hw"]
    assert runs[0].plan.probes == () and list(runs[1].plan.probes) == hw.PROBES.split(",")
    for prefix, name in (("hw-tp", "throughput"), ("hw", "probes")):
        text = (tmp_path / "results" / prefix / "report.md").read_text()
        assert text.splitlines()[0].endswith(f", the {name} pass")
    assert "not results" in hw.PROBE_PASS.about and "benchmarks' own" in hw.THROUGHPUT.about
    for prefix in ("hw-tp", "hw"):
        (tmp_path / "results" / prefix / "report.md").unlink()
    assert rounds.report_again() == 0
    assert all((tmp_path / "results" / p / "report.md").is_file() for p in ("hw-tp", "hw"))
    # The governor is pinned for the runs unless --no-pin; not for --check.
    rounds.run(False, hw.KitRun(3, 3, seconds=5, arms=("series", "lbstats"),
                            bench=("stress-100",), pin=False))
    rounds.run(True)
    assert noise.pinned.pins == [True, False, False]
    plan = hw.plan_text([n.name for n in machine.KERNEL_NEEDS], 5, 1, 30, ["series", "lbstats"])
    assert "passes, one after the other: throughput, probes" in plan
    assert "2 pass(es) x 2 arms x 5 rounds" in plan


def test_the_rounds_go_on_until_every_headline_interval_is_narrow_enough(tmp_path,
                                                                          monkeypatch):
    # Synthetic runs: one per arm and round, the spread falling as rounds
    # come; a 95% interval of 49.7% of the mean at 3 rounds, 13.3% at 6.
    values = [90, 110, 100, 100, 100, 100, 100, 100, 100, 100]
    boots = []

    def measured(req):
        req.on_start()
        boots.append(req.boots)
        for arm in req.arms:
            d = tmp_path / "results" / f"{req.prefix}-{arm.name}"
            for old in d.glob("run-*.json") if req.fresh else ():   # as 'ab' clears them
                old.unlink()
            d.mkdir(parents=True, exist_ok=True)
            for k in range(req.boots):
                (d / f"run-stress-100-{k}.json").write_text(json.dumps({
                    "workload": "stress-100", "run": k, "complete": True, "metrics": {
                        "stress-ng cpu bogo-ops/s": {"value": values[k], "unit": "ops/s",
                                                     "kind": "rate",
                                                     "higher_is_better": True}}}))
        return 0
    _fake_kit(tmp_path, monkeypatch, measured)
    kit = hw.KitRun(3, 10, 15.0, seconds=5, arms=("series", "lbstats"), bench=("stress-100",),
                    kinds=(hw.THROUGHPUT,))
    assert rounds.run(False, kit) == 0
    assert boots == [3, 4, 5, 6]
    record = json.loads((tmp_path / "hw-tp" / rounds.RUN_RECORD).read_text())
    assert record["rounds"] == 6 and record["stopping"]["met"]
    # Run again (a resume): the rounds the rule added stand.
    from schedlab.measuring import resume
    rec = resume.Record("ab", {"boots": 6})
    for arm in ("series", "lbstats"):
        for b in range(6):
            rec.finish(arm, b)
    resume.write(tmp_path / "results" / "hw-tp", rec)
    assert hw.resumed(hw.THROUGHPUT, "boots") == 6
    boots.clear()
    assert rounds.run(False, kit) == 0 and boots == [6]
    text = (tmp_path / "results" / "hw-tp" / "report.md").read_text()
    assert "rounds stopped at: 6: every headline interval within 15.0% of its mean" in text
    assert "### What survives the correction for many comparisons" in text
    mail = (tmp_path / "results" / "hw-tp" / "report.txt").read_text()
    assert "lbstats against series" in mail and all(len(ln) < 80 for ln in mail.splitlines())
    assert "| lbstats | series | stress-100 | stress-ng cpu bogo-ops/s (ops/s) | +0.00 | 1 | 1 |" \
        in text
    boots.clear()
    assert rounds.run(False, hw.KitRun(3, 5, 15.0, seconds=5, arms=("series", "lbstats"),
                                   bench=("stress-100",), kinds=(hw.THROUGHPUT,),
                                   fresh=True)) == 0
    assert boots == [3, 4, 5]
    record = json.loads((tmp_path / "hw-tp" / rounds.RUN_RECORD).read_text())
    assert record["rounds"] == 5 and not record["stopping"]["met"]
    assert record["stopping"]["widest"].startswith("series stress-100 stress-ng cpu bogo-ops/s")
    for bad, what in ((hw.KitRun(5, 4), "--max-rounds 4 is below --rounds 5"),
                      (hw.KitRun(width=0), "--ci-width 0")):
        with pytest.raises(LabError, match=what):
            rounds.run(False, bad)


def test_the_stock_kernels_arm_runs_after_a_reboot_into_it(tmp_path, monkeypatch, capsys):
    from schedlab.measuring import ab
    from schedlab.measuring import results as resmod
    measured = []

    def measure(label, plan):
        measured.append(label)
        return [resmod.Run(complete=True)]
    _host_ab(tmp_path, monkeypatch, measure)
    tables = []
    monkeypatch.setattr(ab, "tables", lambda out, arms, *a, **k: tables.append(out.name))
    monkeypatch.setattr(machine, "preflight", lambda: machine.Preflight([]))
    monkeypatch.setattr(noise, "record", lambda: {})
    kit_kernel = {"release": "7.3.4-schedlab-patched-0123abcd", "variant": "patched"}
    stock_kernel = {"release": "7.3.4-schedlab-base-89abcdef", "variant": "base"}
    box = {"identity": kit_kernel}
    monkeypatch.setattr(machine, "machine_record", lambda: dict(box))
    monkeypatch.setattr(machine, "kernel_pieces",
                        lambda d: [] if box["identity"]["variant"] == "base"
                        else [n.name for n in machine.KERNEL_NEEDS])
    monkeypatch.setattr(ab.os, "uname", lambda: type("u", (), {
        "release": box["identity"]["release"]}))
    kit = hw.KitRun(3, 3, arms=("series", "stock", "swb-v7.3"), bench=("stress-100",),
                    kinds=(hw.THROUGHPUT,), fresh=True,
                    argv=("./schedlab", "hw", "--arm", "series", "--fresh"))
    # On the kit's kernel: its arms, then the stock kernel's wait.
    assert rounds.run(False, kit) == rounds.OTHER_KERNEL
    assert measured and not any("stock" in m for m in measured) and tables == []
    said = capsys.readouterr().out
    assert "stock run on the stock kernel (./schedlab build --host-config --variant base" in said
    assert "then the same command goes on with its arms: ./schedlab hw --arm series\n" in said
    # After the reboot into the stock kernel, the same command without --fresh.
    box["identity"] = stock_kernel
    measured.clear()
    assert rounds.run(False, hw.KitRun(3, 3, arms=("series", "stock", "swb-v7.3"),
                                        bench=("stress-100",), kinds=(hw.THROUGHPUT,))) == 0
    assert measured == [f"hw-tp-stock/boot-{b}" for b in range(3)]
    assert tables == ["hw-tp"]
    # The report names both kernels, each by the boot that ran its arms.
    text = (tmp_path / "results" / "hw-tp" / "report.md").read_text()
    assert "| the kit kernel | 7.3.4-schedlab-patched-0123abcd |" in text
    assert "| the stock kernel | 7.3.4-schedlab-base-89abcdef |" in text
    from schedlab.measuring import resume
    rec = resume.read(tmp_path / "results" / "hw-tp")
    assert set(rec.builds) == {"kit", "stock"}
    # A stock kernel rebuilt from other sources is refused.
    box["identity"] = {"release": "7.3.4-schedlab-base-00000000", "variant": "base"}
    with pytest.raises(LabError, match="builds: stock: .*89abcdef.* there, .*00000000.* now"):
        rounds.run(False, hw.KitRun(3, 4, arms=("series", "stock", "swb-v7.3"),
                                    bench=("stress-100",), kinds=(hw.THROUGHPUT,), width=0.001))
    # On the stock kernel, a run of the kit kernel's arms only measures
    # nothing here and sends the user back.
    measured.clear()
    assert rounds.run(False, hw.KitRun(3, 3, arms=("series", "swb-v7.3"),
                                        bench=("stress-100",), kinds=(hw.THROUGHPUT,),
                                        fresh=True)) == rounds.OTHER_KERNEL
    assert measured == []


@pytest.mark.parametrize("llc", [False, True])
def test_the_stock_boot_takes_the_kit_boots_arms_without_being_told(tmp_path, monkeypatch,
                                                                     llc):
    # No --arm: the stock boot must make the request the kit boot made, also
    # where cache aware scheduling is active (llc-off joins) or the kit
    # kernel lacks a piece.
    from schedlab.measuring import ab
    from schedlab.measuring import results as resmod
    measured = []

    def measure(label, plan):
        measured.append(label)
        return [resmod.Run(complete=True)]
    _host_ab(tmp_path, monkeypatch, measure)
    monkeypatch.setattr(ab, "tables", lambda *a, **k: None)
    monkeypatch.setattr(machine, "preflight", lambda: machine.Preflight([]))
    monkeypatch.setattr(noise, "record", lambda: {})
    monkeypatch.setattr(machine, "llc_balancing_state", lambda d: ("1", llc))
    box = {"identity": {"release": "7.3.4-schedlab-patched-0123abcd", "variant": "patched"}}
    monkeypatch.setattr(machine, "machine_record", lambda: dict(box))
    monkeypatch.setattr(machine, "kernel_pieces",
                        lambda d: [] if box["identity"]["variant"] == "base"
                        else ["swb_state", "SG_STATS_REUSE"])
    monkeypatch.setattr(ab.os, "uname", lambda: type("u", (), {
        "release": box["identity"]["release"]}))
    assert rounds.run(False, hw.KitRun(3, 3, bench=("stress-100",), kinds=(hw.THROUGHPUT,),
                                       fresh=True)) == rounds.OTHER_KERNEL
    kit_arms = {m.split("/")[0] for m in measured}
    assert ("hw-tp-llc-off" in kit_arms) == llc and "hw-tp-wake-tg" not in kit_arms
    box["identity"] = {"release": "7.3.4-schedlab-base-89abcdef", "variant": "base"}
    measured.clear()
    assert rounds.run(False, hw.KitRun(3, 3, bench=("stress-100",),
                                       kinds=(hw.THROUGHPUT,))) == 0
    assert measured == [f"hw-tp-stock/boot-{b}" for b in range(3)]


def test_the_probe_pass_runs_the_kit_kernels_arms_only(tmp_path, monkeypatch, capsys):
    def finished(req):
        req.on_start()
        return 0
    asked = _fake_kit(tmp_path, monkeypatch, finished)
    rounds.run(False, hw.KitRun(3, 3, arms=("series", "stock", "swb-v7.3"),
                                bench=("stress-100",)))
    runs = {req.prefix: [a.name for a in req.arms] for tables, req in asked if not tables}
    # The stock kernel inlines the probed functions: no probe pass for it.
    assert runs == {"hw-tp": ["series", "stock", "swb-v7.3"], "hw": ["series", "swb-v7.3"]}
    asked.clear()
    rounds.run(False, hw.KitRun(3, 3, arms=("series", "stock"), bench=("stress-100",)))
    assert [req.prefix for tables, req in asked if not tables] == ["hw-tp"]
    assert "no probes pass: it runs the arms of kit kernel, of which series is asked" in \
        capsys.readouterr().out


def test_a_pass_is_picked_by_name_and_its_probes_must_fit(capsys):
    from schedlab import cli
    for argv, what in ((["hw", "--pass", "throughput", "--c2c"], "throughput pass has none"),
                       (["hw", "--lb-share", "--pass", "probes"], "without --pass"),
                       (["hw", "--pass", "nosuch"], "invalid choice")):
        with pytest.raises(SystemExit) if what == "invalid choice" else _no_raise():
            assert cli.main(argv) != 0
        assert what in capsys.readouterr().err


def test_a_refused_request_leaves_the_last_run_alone(tmp_path, monkeypatch):
    from schedlab.core.util import LabError

    def refused(req):
        raise LabError("resume: a different request")
    _fake_kit(tmp_path, monkeypatch, refused)
    results = tmp_path / "results" / "hw-tp"
    results.mkdir(parents=True)
    (results / "report.md").write_text("the last run's report")
    with pytest.raises(LabError):
        rounds.run(False, hw.KitRun(3, 3, seconds=5, arms=("series", "lbstats"),
                                bench=("stress-100",)))
    assert not (tmp_path / "hw-tp" / rounds.RUN_RECORD).exists()
    assert (results / "report.md").read_text() == "the last run's report"


def test_only_complete_runs_count_as_finished(tmp_path):
    import json

    from schedlab.kit import hwreport
    for boot, complete in ((0, True), (1, False)):
        d = tmp_path / f"boot-{boot}"
        d.mkdir()
        (d / "run-stress-100-0.json").write_text(json.dumps({"complete": complete}))
    assert hwreport.runs_done(tmp_path) == 1


def test_report_again_needs_a_run(tmp_path, monkeypatch):
    from schedlab.core.util import LabError
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path))
    with pytest.raises(LabError, match="no run to report on"):
        rounds.report_again()


def test_the_swb_arms_walk_the_topic_patch_by_patch():
    from schedlab.series import patchset as series_mod
    from schedlab.series import topics
    swb = [a for a in armmod.KIT_ARMS if a.needs == "swb_state"]
    # v7.3 (state 0), then the topic up to each of its patches but the last,
    # which is the whole series: the reference arm.
    count = len(topics.get_topic("swb").patches(series_mod.read_series()))
    assert count >= 2
    assert [dict(a.knobs)["swb_state"] for a in swb] == [str(i) for i in range(count)]
    # The series' own state (4) is the reference's: it writes nothing.
    assert armmod.KIT_ARMS[0].knobs == () and "swb_state" in {n.name for n in machine.KERNEL_NEEDS}
    from schedlab.measuring import plan as planmod
    assert planmod.parse_knobs(["swb_state=0"]) == {"swb_state": "0"}


def test_the_kit_builds_on_the_whole_series_and_the_measurement_series():
    from schedlab.core.spec import BuildSpec
    from schedlab.core.util import LabError
    from schedlab.series import patchset
    assert BuildSpec("patched", kit=True).name == "patched+measure+kit" == patchset.KIT
    assert BuildSpec("patched", measure=True).name == "patched+measure"
    with pytest.raises(LabError, match="whole series"):
        patchset.variant_patches("base", False, kit=True)
    names = [p.name for p in patchset.variant_patches("patched", False, kit=True)]
    posted, kit = patchset.read_series(), patchset.read_series(patchset.kit_dir())
    assert posted and kit
    assert names[:len(posted)] == [p.name for p in posted]
    assert names[-len(kit):] == [p.name for p in kit]


def test_the_kit_check_finds_a_copy_that_is_not_its_patch():
    from schedlab.series import kit_copies
    def fn(name, body):
        return (f"static __always_inline int\n{name}(struct lb_env *env, struct cpumask *m)\n"
                f"{{\n\t{body}\n}}\n")
    originals = [fn("__should_we_balance", "return 0;"), fn("__should_we_balance", "return 1;")]
    good = "x\n" + fn("__should_we_balance_s0", "return 0;") + \
        fn("__should_we_balance_s1", "return 1;")
    assert kit_copies.function_text(good, "__should_we_balance_s1") == \
        fn("__should_we_balance_s1", "return 1;")
    assert kit_copies.compare(good, originals) == []
    stale = good.replace("return 1;", "return 2;")
    assert "state 1" in kit_copies.compare(stale, originals)[0]
    cut = good.split("static __always_inline int\n__should_we_balance_s1")[0]
    assert "no __should_we_balance_s1()" in kit_copies.compare(cut, originals)[0]
    extra = good + fn("__should_we_balance_s2", "return 2;")
    assert "a state 2" in kit_copies.compare(extra, originals)[0]


def test_each_swb_state_is_also_compared_with_the_state_before():
    from schedlab.kit import hwreport
    arms = list(armmod.KIT_ARMS)
    assert armmod.patch_pairs(arms) == (("stock", "series"), ("swb-one-core", "series"),
                                        ("swb-v7.3", "swb-busy"), ("swb-busy", "swb-one-cpu"),
                                        ("swb-one-cpu", "swb-one-core"), ("llc-off", "lbstats"))
    assert hw.request(arms, 1, 1, 5).pairs == armmod.patch_pairs(arms)
    # Without the state before, no such pair.
    assert armmod.patch_pairs([ARM["series"], ARM["swb-busy"]]) == ()
    states = [hwreport.ArmState(a.name, a.what, a.knobs, 0, 1, a.before, a.baseline)
              for a in arms]
    titles = [t for _, _, t in hwreport.pairs(states)]
    assert "series against stock: against the kernel users run" in titles
    assert "swb-busy against series" in titles
    assert "swb-busy against swb-v7.3: the patch's own effect" in titles
    assert "series against swb-one-core: the patch's own effect" in titles


def test_ab_compares_the_extra_pairs_too(tmp_path, monkeypatch):
    from schedlab.measuring import ab
    seen = []
    monkeypatch.setattr(ab, "_pair_tables",
                        lambda out, tag, a, b, plots: seen.append(tag) or ("", out / "x"))
    monkeypatch.setattr(ab.tablemod, "load_runs", lambda folder: [])
    monkeypatch.setattr(ab.comparemod, "sweep_table", lambda sets, md=True: "")
    monkeypatch.setattr(ab.plotmod, "sweep_plot", lambda *a: None)
    arms = [ab.Arm(n, "host", k) for n, k in (("series", ()), ("swb-v7.3", (("swb_state", "0"),)),
                                              ("swb-busy", (("swb_state", "1"),)))]
    ab.tables(tmp_path, arms, {a.name: tmp_path / a.name for a in arms},
              (("swb-v7.3", "swb-busy"), ("nope", "series")))
    assert seen == ["-series-vs-swb-v7.3", "-series-vs-swb-busy", "-swb-v7.3-vs-swb-busy"]


def test_a_rehearsal_leaves_the_plots_to_the_host(tmp_path, monkeypatch):
    from schedlab.measuring import ab
    assert hw.request(armmod.KIT_ARMS[:2], 1, 1, 5, plots=False).plots is False
    seen = []
    monkeypatch.setattr(ab, "_pair_tables",
                        lambda out, tag, a, b, plots: seen.append(plots) or ("", out / "x"))
    arms = [ab.Arm("a", "host"), ab.Arm("b", "host")]
    ab.tables(tmp_path, arms, {a.name: tmp_path / a.name for a in arms}, plots=False)
    assert seen == [False]


def _runs_saying(root, prefix, arms, key, line):
    """One run per arm whose record has LINE under KEY."""
    for arm in arms:
        d = root / f"{prefix}-{arm}"
        d.mkdir()
        (d / "run-stress-100-0.json").write_text(json.dumps({key: [line]}))


def test_the_report_names_the_measurements_this_machine_could_not_take(tmp_path):
    no_pmu = "cycles: perf stat counts no cycles here (no PMU?): <not supported>,,cycles,0,100.00,,"
    _runs_saying(tmp_path, "hw", ("series", "swb-v7.3"), "probes_missing", no_pmu)
    (tmp_path / "hw-swb-v7.3" / "run-bad.json").write_text("{")
    found = hwreport.probes_missing([tmp_path / "hw-series", tmp_path / "hw-swb-v7.3",
                                     tmp_path / "hw-absent"])
    assert found == [no_pmu]
    arms = [hwreport.ArmState("series", "ref", (), 1, 1),
            hwreport.ArmState("swb-v7.3", "v7.3", (), 1, 1)]
    text = hwreport.write(tmp_path / "hw", {}, arms, ["./schedlab", "hw"],
                          probes_missing=found).read_text()
    assert f"## Not in this report\n\n- a measurement: {no_pmu}" in text
    assert "## Notes of the runs" not in text


def test_the_report_lists_the_runs_notes_once(tmp_path):
    note = "lb-share: jiffies fell 248 behind the clock over the window"
    _runs_saying(tmp_path, "hw-share", ("series", "lbstats"), "notes", note)
    found = hwreport.run_notes([tmp_path / "hw-share-series", tmp_path / "hw-share-lbstats"])
    assert found == [note]
    arms = [hwreport.ArmState("series", "ref", (), 1, 1),
            hwreport.ArmState("lbstats", "on", (), 1, 1)]
    text = hwreport.write(tmp_path / "hw-share", {}, arms, ["./schedlab", "hw"],
                          notes=found).read_text()
    assert "## Notes of the runs" in text and text.count(note) == 1


def test_the_report_names_cache_aware_scheduling_when_recorded():
    rows = "\n".join(hwreport.machine_section({"model": "box",
                                               "llc_balancing": "1 (not active)"}))
    assert "cache aware scheduling" in rows and "| 1 (not active) |" in rows
    assert "cache aware scheduling" not in "\n".join(hwreport.machine_section({"model": "box"}))


def test_the_lb_share_pass_has_its_own_probe_arms_and_folders(tmp_path, monkeypatch):
    import json

    def finished(req):
        req.on_start()
        return 0
    asked = _fake_kit(tmp_path, monkeypatch, finished)
    main_report = tmp_path / "results" / "hw" / "report.md"
    main_report.parent.mkdir(parents=True)
    main_report.write_text("the benchmarks' report")
    assert rounds.run(False, hw.KitRun(3, 3, seconds=5, argv=("./schedlab", "hw", "--lb-share"),
                                   kinds=(hw.SHARE,))) == 0
    req = asked[0][1]
    # Only its probes: lb-share's programs on should_we_balance() would add
    # to what funclatency times there; lb-time gives its replay the
    # machine's time of a runqueue's read.
    assert list(req.plan.probes) == ["lb-share", "lb-time"] and req.prefix == "hw-share"
    assert [a.name for a in req.arms] == ["series", "lbstats"]
    assert req.plan.names() == list(hw.SHARE.bench)
    record = json.loads((tmp_path / "hw-share" / rounds.RUN_RECORD).read_text())
    assert record["pass"] == "lb-share"
    text = (tmp_path / "results" / "hw-share" / "report.md").read_text()
    assert "SG_STATS_REUSE's rule" in text and "work/measure/hw-share-ARM-DATE" in text
    # The benchmarks' pass keeps its record and report.
    assert not (tmp_path / "hw" / rounds.RUN_RECORD).exists()
    assert main_report.read_text() == "the benchmarks' report"
    assert rounds.report_again(kinds=(hw.SHARE,)) == 0
    with pytest.raises(Exception, match="no run to report on"):
        rounds.report_again()
    plan = hw.plan_text([n.name for n in machine.KERNEL_NEEDS], 5, 1, 30, kinds=(hw.SHARE,))
    assert "1 pass(es) x 2 arms x 5 rounds x 1 run(s)" in plan
    assert "benchmarks on " in plan and ": stress-100, stress-90, hackbench-process\n" in plan


def test_the_lb_share_pass_without_the_feature_repeats_the_reference():
    here = [a for a in armmod.KIT_ARMS if a.name != "lbstats"]
    assert hw.default_arms(hw.SHARE, here) == ["series", "series-again"]
    assert hw.default_arms(hw.PROBE_PASS, here) is None


def test_the_stock_boot_reads_the_kit_boots_switches_unless_fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path))
    rec = tmp_path / hw.THROUGHPUT.prefix / rounds.RUN_RECORD
    rec.parent.mkdir(parents=True)
    rec.write_text(json.dumps({"kernels": {"kit": {}}, "switches": ["swb_state"]}))
    every = [n.name for n in machine.KERNEL_NEEDS]
    assert rounds.kit_switches((hw.THROUGHPUT,), []) == ["swb_state"]
    assert rounds.kit_switches((hw.THROUGHPUT,), [armmod.LLC_ACTIVE], fresh=True) == \
        every + [armmod.LLC_ACTIVE]
    rec.write_text(json.dumps({"kernels": {"stock": {}}, "switches": ["swb_state"]}))
    assert rounds.kit_switches((hw.THROUGHPUT,), []) == every
