"""The hardware kit's rehearsal: what the guest runs, and what is checked."""

import json
from pathlib import Path

from schedlab.kit import arms as armmod
from schedlab.kit import rehearsal

REQ = rehearsal.RehearsalRequest()
X86 = rehearsal.GuestPaths("/lab", "work/venv/bin/python", "/w/guest", "/b/.config")


def test_the_guest_runs_the_kit_as_a_user_and_says_what_is_left():
    s = rehearsal.guest_script(REQ, X86)
    assert "-m schedlab hw --rounds 1 --max-rounds 1 --runs 1 --seconds 3 --bench stress-100 " \
        "--no-plots --fresh" in s
    for a in REQ.arms:
        assert f"--arm {a}" in s
    assert "SCHEDLAB_WORK=/w/guest" in s and "SCHEDLAB_KERNEL_CONFIG=/b/.config" in s
    # The marks come whatever the kit's status.
    assert "; echo @@rehearsal hw-rc=$?;" in s
    assert "pgrep -f -d, '[b]pftrace|[f]unclatency|" in s
    s = rehearsal.guest_script(rehearsal.RehearsalRequest(rounds=2, runs=3), X86)
    assert "hw --rounds 2 --max-rounds 2 --runs 3 --seconds 3" in s and "--c2c" not in s
    s = rehearsal.guest_script(rehearsal.RehearsalRequest(c2c=True), X86)
    assert s.count("--c2c") == 1


def test_marks_are_read_from_the_console():
    out = ("boot noise\n@@rehearsal hw-rc=0\r\n@@rehearsal swb_state=4\n"
           "@@rehearsal left=\n")
    assert rehearsal.parse_marks(out) == {"hw-rc": "0", "swb_state": "4", "left": ""}


def _report(done=("1 of 1", "1 of 1", "1 of 1", "1 of 1")):
    rows = "\n".join(f"| {a} | x | none | {d} |" for a, d in zip(REQ.arms, done))
    return f"| arm | what | writes | runs finished |\n{rows}\n| stress-100 | cpu busy (%) |"


def _reports(report):
    """The two passes' reports: the probe pass has no stock kernel's arm."""
    probes = "\n".join(ln for ln in report.splitlines() if not ln.startswith("| stock |"))
    return {"hw-tp": report, "hw": probes}


GOOD = {"kit": {"hw-rc": "75", "swb_state": "4", "left": ""},
        "stock": {"hw-rc": "0", "swb_state": "cat: no such file", "left": ""}}


def test_a_good_rehearsal_passes():
    # Two boots: the kit's kernel, whose kit waits for the stock kernel's
    # arm (status 75), then the stock kernel's.
    assert rehearsal.kernels(REQ) == ["kit", "stock"]
    assert rehearsal.check(GOOD, _reports(_report()), REQ) == []
    one = rehearsal.RehearsalRequest(arms=("series", "swb-v7.3"))
    assert rehearsal.kernels(one) == ["kit"]
    rows = "\n".join(f"| {a} | x | none | 1 of 1 |" for a in one.arms)
    report = f"{rows}\n| stress-100 | cpu busy (%) |"
    assert rehearsal.check({"kit": {"hw-rc": "0", "swb_state": "4", "left": ""}},
                           _reports(report), one) == []


def test_each_failure_is_named():
    marks = {"kit": {"hw-rc": "1", "swb_state": "0", "left": "123,456"},
             "stock": {"hw-rc": "75", "left": ""}}
    problems = " / ".join(rehearsal.check(marks, {
        "hw-tp": _report(), "hw": _report(("1 of 1", "0 of 1", "1 of 1", "1 of 1"))},
        REQ))
    for what in ("the kit exited on the kit kernel with status 1, not 75",
                 "the kit exited on the stock kernel with status 75, not 0",
                 "swb_state after the kit on the kit kernel: '0'",
                 "left running in the guest on the kit kernel: 123,456",
                 "the probes pass: arm series-again: 0 of 1"):
        assert what in problems
    assert "the throughput pass: arm" not in problems
    assert "no mark" in " ".join(rehearsal.check({}, _reports(_report()), REQ))
    assert "the throughput pass: no report" in rehearsal.check(GOOD, {"hw": _report()},
                                                               REQ)
    bare = _report().replace("| stress-100 |", "| other |")
    assert any("benchmark stress-100" in p
               for p in rehearsal.check(GOOD, _reports(bare), REQ))
    s = rehearsal.guest_script(REQ, X86, fresh=False)
    assert "--fresh" not in s       # the second boot goes on with the first one's runs


def _run(folder: Path, arm: str, value: float) -> None:
    d = folder / f"hw-{arm}"
    d.mkdir(parents=True)
    metric = {rehearsal.SWITCH_METRIC: {"value": value}}
    (d / "run-stress-100-0.json").write_text(json.dumps({"workload": "stress-100",
                                                         "metrics": metric}))
    # Another benchmark's run in the same folder is not counted.
    (d / "run-stress-50-0.json").write_text(json.dumps({
        "workload": "stress-50", "metrics": {rehearsal.SWITCH_METRIC: {"value": 99.0}}}))


def test_the_switch_must_take_effect(tmp_path):
    _run(tmp_path, "swb-v7.3", 2.805)
    _run(tmp_path, "series", 0.475)
    values = rehearsal.switch_values(tmp_path, "stress-100")
    assert values == {"swb-v7.3": 2.805, "series": 0.475}
    assert rehearsal.check_switch(values, REQ) == []
    same = {"swb-v7.3": 0.475, "series": 0.475}
    assert "did not take effect" in rehearsal.check_switch(same, REQ)[0]
    assert "unseen" in rehearsal.check_switch({"series": 0.4}, REQ)[0]
    # A rehearsal without v7.3's state has nothing to compare.
    assert rehearsal.check_switch({}, rehearsal.RehearsalRequest(arms=("series", "lbstats"))) == []


def test_the_full_tier_rehearses_the_stock_kernel_the_a_a_pair_and_the_switch(monkeypatch):
    from schedlab import testcmd
    asked = []
    monkeypatch.setattr(rehearsal, "run", lambda req: asked.append(req) or
                        rehearsal.RehearsalOutcome(True))
    ctx = testcmd.TestContext(testcmd.TestRequest(), lambda tree, spec: None)
    assert testcmd._rehearsal(ctx)
    req, = asked
    assert req.arms == rehearsal.REHEARSAL_ARMS and rehearsal.kernels(req) == ["kit", "stock"]
    assert {armmod.STOCK, "series", "series-again"} | set(rehearsal.SWITCH_PAIR) == \
        set(req.arms)
    assert set(req.arms) <= {a.name for a in armmod.KIT_ARMS}


def test_the_lb_share_pass_is_rehearsed_with_its_row():
    req = rehearsal.RehearsalRequest(arms=rehearsal.SHARE_ARMS, share=True)
    s = rehearsal.guest_script(req, X86)
    assert s.count("--lb-share") == 1 and "--arm lbstats" in s
    marks = {"kit": {"hw-rc": "0", "swb_state": "4", "left": ""}}
    rows = "\n".join(f"| {a} | x | none | 1 of 1 |" for a in req.arms)
    # The report's text names the metric; only a table row counts.
    report = (f"`{rehearsal.SHARE_METRIC} (LEVEL)` is the share\n{rows}\n"
              "| stress-100 | cpu busy (%) |")
    assert rehearsal.check(marks, {"hw-share": report}, req) == [
        "the lb-share pass: the lb-share pass's report has no 'group reads sums could serve' "
        "row"]
    report += "\n| stress-100 | group reads sums could serve (MC) (%) |"
    assert rehearsal.check(marks, {"hw-share": report}, req) == []


def _clean_runs(folder: Path, arm: str, watches) -> None:
    d = folder / f"hw-tp-{arm}"
    d.mkdir(parents=True)
    for i, watch in enumerate(watches):
        (d / f"run-stress-100-{i}.json").write_text(json.dumps({
            "workload": "stress-100", "run": i, "complete": True, "watch": watch}))


def test_the_throughput_pass_must_be_clean_with_checks_during_each_run(tmp_path):
    good = ["before: clean", "during 1: clean", "after: clean"]
    req = rehearsal.RehearsalRequest(arms=("series", "swb-v7.3"))
    _clean_runs(tmp_path, "series", [good, good])
    _clean_runs(tmp_path, "swb-v7.3", [good, ["before: clean", "after: clean"],
                                       ["before: clean", "during 1: process 9 bpftrace",
                                        "after: clean"]])
    assert rehearsal.check_clean(tmp_path, req) == [
        "the throughput pass: swb-v7.3 stress-100 #1: no check during the run",
        "the throughput pass: swb-v7.3 stress-100 #2: attached beside a clean run: "
        "during 1: process 9 bpftrace"]
    assert rehearsal.check_clean(tmp_path, rehearsal.RehearsalRequest(
        arms=("series", "swb-v7.3"), pass_name="probes")) == []
    assert "no runs of lbstats" in rehearsal.check_clean(
        tmp_path, rehearsal.RehearsalRequest(arms=("series", "lbstats")))[0]
    s = rehearsal.guest_script(rehearsal.RehearsalRequest(pass_name="throughput"),
                               X86)
    assert s.count("--pass throughput") == 1


def test_each_pass_leaves_a_mail_under_80_columns(tmp_path):
    from schedlab.kit import reporttext
    req = rehearsal.RehearsalRequest(arms=("series", "swb-v7.3"))
    model = "cost model of should_we_balance()\n    model, AMD EPYC Zen 4 (Genoa): 78 ns\n"
    for prefix in ("hw-tp", "hw"):
        (tmp_path / prefix).mkdir()
        (tmp_path / prefix / reporttext.REPORT).write_text("swb-v7.3 against series\n" + model)
    assert rehearsal.check_mail(tmp_path, req) == []
    (tmp_path / "hw" / reporttext.REPORT).write_text("x" * 80 + "\n")
    (tmp_path / "hw-tp" / reporttext.REPORT).unlink()
    assert rehearsal.check_mail(tmp_path, req) == [
        "the throughput pass: no report.txt",
        "the probes pass: report.txt has lines of 80 columns or more (line 1)",
        "the probes pass: report.txt has no cost model's prediction beside funclatency",
        "the probes pass: report.txt has no swb-v7.3 against series"]
    # The throughput pass runs no funclatency: no model there.
    (tmp_path / "hw-tp" / reporttext.REPORT).write_text("swb-v7.3 against series\n")
    (tmp_path / "hw" / reporttext.REPORT).write_text("swb-v7.3 against series\n" + model)
    assert rehearsal.check_mail(tmp_path, req) == []


def test_the_throughput_mail_has_every_percentile_of_schbench(tmp_path):
    from schedlab.kit import reporttext
    req = rehearsal.RehearsalRequest(arms=("series", "swb-v7.3"),
                                     bench=("stress-100", "schbench-m2-t2"))
    rows = "".join(f"schbench-m2-t2: {m} (us, lower is better)\n"
                   for m in rehearsal.SCHBENCH_ROWS)
    rows += "cost model of should_we_balance()\n    model, IBM POWER10: no prediction\n"
    for prefix in ("hw-tp", "hw"):
        (tmp_path / prefix).mkdir()
        (tmp_path / prefix / reporttext.REPORT).write_text("swb-v7.3 against series\n" + rows)
    assert rehearsal.check_mail(tmp_path, req) == []
    (tmp_path / "hw-tp" / reporttext.REPORT).write_text(
        "swb-v7.3 against series\nschbench-m2-t2: schbench wakeup p99 (us, lower is better)\n")
    assert rehearsal.check_mail(tmp_path, req) == [
        f"the throughput pass: report.txt has no schbench-m2-t2: {m}"
        for m in rehearsal.SCHBENCH_ROWS if m != "schbench wakeup p99"]
