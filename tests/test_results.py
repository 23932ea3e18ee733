"""Run parsing, collecting, re-parsing, checking and merging (no boot)."""

import json
import re
import shutil
from pathlib import Path
from typing import List

import pytest

from schedlab.core.util import LabError
from schedlab.measuring import results as resmod
from schedlab.measuring import workloads as workmod

DATA = Path(__file__).parent / "data" / "tools"
REPO = Path(__file__).resolve().parents[1]
# The result sets kept in results/ (the rest of results/ is the lab's records).
KEPT_SETS = {p.name for p in (REPO / "results").iterdir()
             if p.is_dir() and p.name not in ("test-full", "soak", "peer-tests")}


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


STRESS = workmod.workload("stress-50")


def test_parse_complete_run(tmp_path):
    probe = ("Attaching 5 probes...\nschedlab: counting\nschedlab: stopped\n\n"
             "@lb_calls[2]: 300\n@lb_ns_sum[2]: 600000\n@on: 0\n"
             "@swb_calls: 200\n@swb_idle_probes: 1000\n@swb_ns_sum: 400000\n"
             "@swb_ns:\n[1K, 2K)             100 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
             "[2K, 4K)             100 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n")
    run = resmod.parse_run(make_run(tmp_path, probe), STRESS)
    assert run.complete, run.problems
    met = run.metrics
    assert met["idle_cpu probes in should_we_balance"]["value"] == 1000
    assert met["idle_cpu probes in should_we_balance per s"]["value"] == 100
    assert met["should_we_balance calls"]["kind"] == "count"
    assert met["idle_cpu probes per should_we_balance call"]["value"] == 5
    assert met["sched_balance_rq newidle calls"]["value"] == 300
    assert met["sched_balance_rq newidle mean time"]["value"] == 2000
    assert met["sched_balance_rq busy calls"]["value"] == 0   # never written: zero
    assert met["should_we_balance mean time (bpftrace)"]["value"] == 2000
    assert run.histograms["should_we_balance"]["buckets"] == [(1024, 2047, 100),
                                                             (2048, 4095, 100)]
    assert met["stress-ng cpu bogo-ops/s"]["value"] == 81.74
    assert "balance SMT idle" in met and "cpu busy" in met


def test_probe_that_did_not_attach_makes_the_run_incomplete(tmp_path):
    run = resmod.parse_run(make_run(tmp_path, "ERROR: kprobe attach failed"), STRESS)
    assert not run.complete
    assert any("did not attach" in p for p in run.problems)


def test_a_map_dump_cut_short_makes_the_run_incomplete(tmp_path):
    run = resmod.parse_run(make_run(tmp_path, "Attaching 8 probes...\nschedlab: counting\n"),
                           STRESS)
    assert not run.complete and "bpftrace printed no maps" in run.problems


def test_maps_printed_at_window_close_survive_a_killed_bpftrace(tmp_path):
    text = ("Attaching 8 probes...\nschedlab: counting\n@lb_calls[2]: 214\n"
            "@lb_ns_sum[2]: 428000\n@migrations: 9\nschedlab: stopped\n")
    d = make_run(tmp_path, text)
    (d / "notes.txt").write_text("bpftrace did not stop within 20 s after SIGINT: killed\n")
    run = resmod.parse_run(d, STRESS)
    assert run.complete, run.problems
    assert run.metrics["sched_balance_rq newidle calls"]["value"] == 214
    assert run.metrics["sched_balance_rq newidle mean time"]["value"] == 2000
    assert run.notes == ["bpftrace did not stop within 20 s after SIGINT: killed"]


def test_avgidle_metrics(tmp_path):
    text = ("Attaching 3 probes...\nschedlab: counting\n@ai_n: 200\n@ai_lt500: 50\n"
            "@ai_sum: 160000000\nschedlab: stopped\n")
    met = resmod.parse_run(make_run(tmp_path, text), STRESS, probes_used=["avgidle"]).metrics
    assert met["idle periods ended"]["value"] == 200
    assert met["avg_idle at newidle mean"]["value"] == 800        # us
    assert met["avg_idle at newidle below 500 us"]["value"] == 25  # %


def test_unfinished_and_timed_out_runs_are_incomplete(tmp_path):
    run = resmod.parse_run(tmp_path / "never-started", STRESS)
    assert not run.complete and "did not finish" in run.problems[0]
    run = resmod.parse_run(make_run(tmp_path, "Attaching 1 probe...\n", status="124"), STRESS)
    assert "workload hit its time limit" in run.problems


def _raw(tmp_path: Path, name: str = "raw") -> Path:
    raw = tmp_path / name
    raw.mkdir()
    for f, text in (("uname.txt", "7.3.4\n"), ("attach.txt", "kfunc\n"),
                    ("latency-tool.txt", "bpftrace\n"), ("probes-used.txt", "swb\n")):
        (raw / f).write_text(text)
    return raw


def test_collect_keeps_partial_plans(tmp_path, monkeypatch):
    monkeypatch.setattr(resmod, "results_dir", lambda label: tmp_path / "results" / label)
    raw = _raw(tmp_path)
    make_run(tmp_path, "Attaching 3 probes...\n@on: 0\n@swb_calls: 5\n").rename(
        raw / "stress-50-0")
    runs = resmod.collect("lbl", raw, [STRESS], 2, resmod.Setting(topology="x"), "tcg")
    assert [r.complete for r in runs] == [True, False]
    assert runs[0].setting.probe_tool == "bpftrace/kfunc"
    assert (tmp_path / "results" / "lbl" / "run-stress-50-1.json").is_file()


def _run(metrics, probes=("swb", "migrate"), complete=True):
    return resmod.Run(workload="stress-50", run=0, complete=complete, problems=["x"],
                      setting=resmod.Setting(probes=list(probes)),
                      metrics={k: {"value": v} for k, v in metrics.items()})


def test_check_runs_wants_every_metric():
    good = {"should_we_balance calls per s": 400.0,
            "idle_cpu probes in should_we_balance per s": 700.0,
            "idle_cpu probes per should_we_balance call": 1.7,
            "should_we_balance mean time (bpftrace)": 3e4, "migrations per s": 40.0,
            "balance SMT busy": 3.0, "cpu busy": 60.0}
    assert resmod.check_runs([_run(good)], ["swb", "migrate"]) == []
    bad = dict(good, **{"migrations per s": 0.0})
    del bad["cpu busy"]
    problems = resmod.check_runs([_run(bad, probes=("swb",))], ["swb", "migrate", "latency"])
    assert any("probe migrate was not used" in p for p in problems)
    assert any("probe latency was not used" in p for p in problems)
    assert any("CPU busy" in p for p in problems)
    assert any("incomplete" in p for p in resmod.check_runs([_run(good, complete=False)],
                                                            ["swb"]))
    nan = dict(good, **{"cpu busy": float("nan")})
    assert any("cpu busy = nan" in p for p in resmod.check_runs([_run(nan)], ["swb"]))
    no_swb = dict(good)
    del no_swb["idle_cpu probes per should_we_balance call"]
    assert any("no 'idle_cpu probes per should_we_balance call'" in p
               for p in resmod.check_runs([_run(no_swb)], ["swb"]))


def test_merge_boots_pools_runs_with_their_boot(tmp_path, monkeypatch):
    monkeypatch.setattr(resmod, "results_dir", lambda label: tmp_path / "results" / label)
    for boot in range(2):
        raw = _raw(tmp_path, f"raw{boot}")
        for i in range(2):
            base = tmp_path / f"b{boot}{i}"
            base.mkdir()
            make_run(base, f"Attaching 3 probes...\n@on: 0\n@swb_calls: {10 * boot + i + 1}\n"
                     ).rename(raw / f"stress-50-{i}")
        resmod.collect(f"ab-base/boot-{boot}", raw, [STRESS], 2,
                       resmod.Setting(topology="x"), "tcg", "k")
    top = tmp_path / "results" / "ab-base"
    stale = top / "run-stress-50-9.json"
    stale.write_text("{}")
    runs = resmod.merge_boots(top, 2, "k2")
    assert [(r.boot, r.run) for r in runs] == [(0, 0), (0, 1), (1, 2), (1, 3)]
    assert not stale.exists()
    assert sorted(p.name for p in top.glob("run-*.json")) == [
        f"run-stress-50-{i}.json" for i in range(4)]
    meta = json.loads((top / "plan.json").read_text())
    assert meta["runs"] == 4 and meta["boots"] == 2 and meta["key"] == "k2"
    assert all(r.label == "ab-base" for r in runs)


def test_reparse_reads_the_raw_outputs_again(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    make_run(raw, "Attaching 2 probes...\nschedlab: counting\n@lb_calls[0]: 3\n"
                  "@lb_ns_sum[0]: 300\nschedlab: stopped\n").rename(raw / "stress-50-0")
    folder = tmp_path / "results"
    folder.mkdir()
    old = {"workload": "stress-50", "run": 0, "raw_dir": str(raw), "complete": True,
           "setting": {"probes": ["lb"], "latency_tool": "none", "topology": "smt4"},
           "metrics": {}, "accel": "tcg-single"}
    (folder / "run-stress-50-0.json").write_text(json.dumps(old))
    (run,) = resmod.reparse(folder)
    assert run.metrics["sched_balance_rq busy calls"]["value"] == 3
    assert run.metrics["sched_balance_rq newidle total time"]["value"] == 0
    assert run.accel == "tcg-single" and run.setting.topology == "smt4"
    assert json.loads((folder / "run-stress-50-0.json").read_text())["metrics"] == run.metrics
    (raw / "knob-error.txt").write_text("k: writing 9 gave 7\n")
    (run,) = resmod.reparse(folder)
    assert not run.complete and "knob: k: writing 9 gave 7" in run.problems


def test_scratch_labels_go_under_work(tmp_path, monkeypatch):
    monkeypatch.setattr(resmod, "work_dir", lambda: tmp_path / "work")
    assert resmod.results_dir(resmod.SCRATCH + "ci-integration") == \
        tmp_path / "work/results/ci-integration"
    assert resmod.results_dir("swb-smt8").parts[-2:] == ("results", "swb-smt8")


def test_labels_go_under_work_unless_they_name_a_place(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(resmod, "work_dir", lambda: tmp_path / "work")
    monkeypatch.setattr(resmod, "repo_dir", lambda: tmp_path / "repo")
    work, kept = tmp_path / "work/results", tmp_path / "repo/results"
    assert resmod.results_dir("ab-smt4-base") == work / "ab-smt4-base"
    assert resmod.results_dir("ab-smt4-base/boot-1") == work / "ab-smt4-base/boot-1"
    assert resmod.results_dir("results/ab-smt4") == kept / "ab-smt4"
    assert resmod.results_dir("work/results/x") == work / "x"
    # docs/ holds no result sets: such a label is a plain one, under work/.
    assert resmod.results_dir("docs/results/data/x") == work / "docs/results/data/x"
    # By label: your own run first, then results/.
    with pytest.raises(LabError, match="no result set 'ab-smt4-base'"):
        resmod.find("ab-smt4-base")
    (kept / "ab-smt4-base").mkdir(parents=True)
    assert resmod.find("ab-smt4-base") == kept / "ab-smt4-base"
    (work / "ab-smt4-base").mkdir(parents=True)
    capsys.readouterr()
    assert resmod.find("ab-smt4-base") == work / "ab-smt4-base"
    assert f"also in {kept / 'ab-smt4-base'}:" in capsys.readouterr().out
    assert resmod.find("results/ab-smt4-base") == kept / "ab-smt4-base"
    assert resmod.find(str(kept / "ab-smt4-base")) == kept / "ab-smt4-base"


def _expand(path: str) -> List[str]:
    """{a,b} as the shell expands it."""
    alts = [path]
    while any("{" in a for a in alts):
        a = next(a for a in alts if "{" in a)
        head, rest = a.split("{", 1)
        inner, tail = rest.split("}", 1)
        alts.remove(a)
        alts += [head + x + tail for x in inner.split(",")]
    return alts


def test_every_kept_result_a_page_names_is_there(monkeypatch):
    # Every file or folder under results/ a page of docs/ names exists, and
    # the label-based commands of the pages find theirs in results/.
    monkeypatch.setattr(resmod, "work_dir", lambda: REPO / "no-work-here")
    monkeypatch.setattr(resmod, "repo_dir", lambda: REPO)
    pages = sorted((REPO / "docs").rglob("*.md"))
    cited = labels = 0
    for page in pages:
        text = page.read_text()
        for m in re.finditer(r"(?:\(|`)((?:\.\./)*results/[^)`\s]+)", text):
            path = m.group(1)
            base = page.parent if path.startswith("..") else REPO
            if not path.startswith("..") and path.split("/")[1] not in KEPT_SETS:
                continue                 # a label to write (--label results/NAME)
            for a in _expand(path):
                a = re.sub(r"ARM|A-vs-B|LABEL|NAME", "*", a.rstrip(".:,"))
                assert list(base.glob(a)), f"{page.name}: {a}"
                cited += 1
        kept = [lab for lab in re.findall(r"\./schedlab compare ([A-Za-z0-9-]+)",
                                          text) if lab in KEPT_SETS]
        for label in kept:
            assert resmod.find(label).parent == REPO / "results", label
            labels += 1
    assert cited > 10 and labels > 0       # the pages' citations were looked at


def test_docs_hold_no_data_or_scripts():
    files = [p for p in (REPO / "docs").rglob("*") if p.is_file()]
    assert files
    assert not [p for p in files if p.suffix not in (".md", ".png")]
    assert not (REPO / "docs/results/data").exists()


@pytest.mark.parametrize("pattern", ["*/run-*.json", "*/boot-*/run-*.json", "*/plan.json",
                                     "*/boot-*/plan.json"])
def test_committed_results_read_and_write_back_unchanged(pattern):
    files = sorted((REPO / "results").glob(pattern))
    assert files, pattern
    cls = resmod.PlanMeta if pattern.endswith("plan.json") else resmod.Run
    for f in files:
        text = f.read_text()
        assert json.dumps(cls.from_json(json.loads(text)).to_json(), indent=1) + "\n" == text, f
