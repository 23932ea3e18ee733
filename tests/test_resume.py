"""Runs that resume: 'ab' and 'measure' stopped half-way and run again
(a fake VM: no build, no boot)."""

import json
import zlib
from pathlib import Path

import pytest

from schedlab.core.build import BuildResult
from schedlab.core.spec import TreeSpec
from schedlab.core.util import LabError
from schedlab.measuring import ab, measure
from schedlab.measuring import plan as planmod
from schedlab.measuring import plots as plotmod
from schedlab.measuring import results as resmod
from schedlab.measuring import resume
from schedlab.measuring import workloads as workmod

PLAN = planmod.Plan((workmod.workload("stress-50"), workmod.workload("stress-100")),
                    probes=("swb",), runs=2, seconds=1)
ARMS = tuple(ab.parse_arms(["base=base", "patched=patched",
                            "x4=patched:newidle_cost_pct=400"]))


class Interrupted(KeyboardInterrupt):
    pass


class FakeLab:
    """The builds and the VM of 'ab': measure_in_vm writes deterministic runs
    (a function of the arm's build, knobs, boot, workload and run) and, at
    call STOP_AT, writes what an interrupted boot leaves (the first run only)
    and raises KeyboardInterrupt; at call INCOMPLETE_AT, its first run is
    incomplete."""

    def __init__(self, root: Path, monkeypatch, stop_at=None, incomplete_at=None,
                 commit="c1"):
        self.root, self.calls = root, []
        self.stop_at, self.incomplete_at = stop_at, incomplete_at
        monkeypatch.setattr(resmod, "work_dir", lambda: root / "work")
        monkeypatch.setattr(resmod, "repo_dir", lambda: root / "repo")
        builds = {v: BuildResult(root / v, root / v / "bzImage", f"7.3.4-{v}", 0.0,
                                 f"{commit}-{v}") for v in ("base", "patched")}
        monkeypatch.setattr(ab, "_builds", lambda req, st: (None, builds))
        monkeypatch.setattr(ab.measuremod, "measure_in_vm", self.measure_in_vm)
        monkeypatch.setattr(plotmod, "write_plots", lambda *a, **k: [])
        monkeypatch.setattr(plotmod, "sweep_plot", lambda *a, **k: False)

    def measure_in_vm(self, tree, result, variant, label, plan, topology, online, timeout,
                      key="", arch=None):
        self.calls.append(label)
        stop = len(self.calls) == self.stop_at
        boot = int(label.rsplit("boot-", 1)[1]) if "boot-" in label else 0
        setting = resmod.Setting(topology=topology, config="probe+measure", arch="x86_64",
                                 variant=variant, commit=result.commit, seconds=plan.seconds,
                                 knobs=dict(plan.knobs), probe_tool="bpftrace/kfunc",
                                 latency_tool="none", probes=list(plan.probes),
                                 accel="tcg-single")
        out = resmod.results_dir(label)
        out.mkdir(parents=True, exist_ok=True)
        runs = []
        for w in plan.workloads:
            for i in range(plan.runs):
                seed = zlib.crc32(f"{result.commit}{plan.knobs}{boot}{w.name}{i}".encode())
                first = (w, i) == (plan.workloads[0], 0)
                done = not (stop and not first) and \
                    not (len(self.calls) == self.incomplete_at and first)
                metrics = {"idle_cpu probes per should_we_balance call": {
                    "value": 2.0 + seed % 100 / 100, "unit": "probes", "kind": "count",
                    "higher_is_better": False}, "stress-ng cpu bogo-ops/s": {
                    "value": 80.0 + seed % 13, "unit": "ops/s", "kind": "rate",
                    "higher_is_better": True}}
                run = resmod.Run(complete=done, problems=[] if done else ["did not finish"],
                                 metrics=metrics, label=label, workload=w.name, run=i,
                                 setting=setting, accel="tcg-single", key=key)
                resmod.write_json(out / f"run-{w.name}-{i}.json", run)
                runs.append(run)
        resmod.write_json(out / "plan.json", resmod.PlanMeta(plan.names(), plan.runs, None,
                                                             setting, key))
        if stop:
            raise Interrupted()
        return runs

    def outputs(self) -> dict:
        """Every file the run left under work/results/, as text (roots replaced)."""
        top = self.root / "work" / "results"
        return {str(p.relative_to(top)): p.read_text().replace(str(self.root), "ROOT")
                for p in sorted(top.rglob("*")) if p.is_file() and p.name != resume.RECORD}


def request(**over):
    kw = dict(tree=TreeSpec(), plan=PLAN, topology="smt4", arms=ARMS, prefix="ab-t", boots=2)
    kw.update(over)
    return ab.AbRequest(**kw)


def test_ab_stopped_half_way_resumes_at_the_first_missing_boot(tmp_path, monkeypatch):
    whole = FakeLab(tmp_path / "whole", monkeypatch)
    ab.run(request())
    order = [f"ab-t-{a}/boot-{b}" for b in range(2) for a in ("base", "patched", "x4")]
    assert whole.calls == order

    lab = FakeLab(tmp_path / "stopped", monkeypatch, stop_at=5)
    with pytest.raises(Interrupted):
        ab.run(request())
    assert lab.calls == order[:5]
    rec = resume.read(tmp_path / "stopped/work/results/ab-t")
    assert rec.finished == [("base", 0), ("patched", 0), ("x4", 0), ("base", 1)]
    assert rec.builds == {"base": {"commit": "c1-base", "release": "7.3.4-base"},
                          "patched": {"commit": "c1-patched", "release": "7.3.4-patched"}}

    lab.calls.clear()
    lab.stop_at = None
    ab.run(request())
    assert lab.calls == order[4:]          # the interrupted boot, then the one after
    assert lab.outputs() == whole.outputs()
    assert {"ab-t/compare-base-vs-patched.txt", "ab-t/headline-base-vs-x4.md", "ab-t/sweep.md",
            "ab-t-x4/run-stress-50-3.json", "ab-t-x4/boot-1/plan.json"} <= set(lab.outputs())

    # Run once more: every boot is there, nothing is measured.
    lab.calls.clear()
    ab.run(request())
    assert lab.calls == [] and lab.outputs() == whole.outputs()


def test_more_boots_of_the_same_request_keep_the_boots_finished(tmp_path, monkeypatch):
    whole = FakeLab(tmp_path / "whole", monkeypatch)
    ab.run(request(boots=3))
    lab = FakeLab(tmp_path / "grown", monkeypatch)
    ab.run(request())
    lab.calls.clear()
    ab.run(request(boots=3))
    assert lab.calls == [f"ab-t-{a}/boot-2" for a in ("base", "patched", "x4")]
    assert lab.outputs() == whole.outputs()      # the three boots pooled as one run's
    assert resume.read(tmp_path / "grown/work/results/ab-t").request["boots"] == 3
    assert resume.more_boots({"boots": 2, "runs": 2}, {"boots": 3, "runs": 2})
    for old, new in (({"boots": 1}, {"boots": 2}), ({"boots": 3}, {"boots": 2}),
                     ({"boots": 2, "runs": 2}, {"boots": 3, "runs": 3})):
        assert not resume.more_boots(old, new)


def test_a_boot_with_incomplete_runs_is_measured_again(tmp_path, monkeypatch):
    lab = FakeLab(tmp_path, monkeypatch, incomplete_at=2)
    ab.run(request(boots=1, arms=ARMS[:2]))
    assert lab.calls == ["ab-t-base", "ab-t-patched"]
    lab.calls.clear()
    lab.incomplete_at = None
    ab.run(request(boots=1, arms=ARMS[:2]))
    assert lab.calls == ["ab-t-patched"]


def test_another_request_is_refused_with_what_differs(tmp_path, monkeypatch):
    lab = FakeLab(tmp_path, monkeypatch, stop_at=3)
    with pytest.raises(Interrupted):
        ab.run(request())
    lab.calls.clear()
    lab.stop_at = None
    with pytest.raises(LabError, match=r"runs: 2 there, 3 now") as exc:
        ab.run(request(plan=PLAN.with_(runs=3)))
    assert "--fresh" in str(exc.value)
    other = ab.parse_arms(["base=base", "patched=patched", "x4=patched:newidle_cost_pct=200"])
    with pytest.raises(LabError, match=r"arms: .*400.* there, .*200.* now"):
        ab.run(request(arms=tuple(other)))
    with pytest.raises(LabError, match="plan: .*stress-50.* there"):
        ab.run(request(plan=PLAN.with_(workloads=PLAN.workloads[:1])))
    with pytest.raises(LabError, match="boots: 2 there, 1 now"):
        ab.run(request(boots=1))
    assert lab.calls == []
    # The series changed since: refused after the builds, naming them.
    FakeLab(tmp_path, monkeypatch, commit="c2")
    with pytest.raises(LabError, match="builds: base: .*c1-base.* there, .*c2-base.* now"):
        ab.run(request())
    # --fresh measures everything again, with the new builds.
    lab = FakeLab(tmp_path, monkeypatch, commit="c2")
    ab.run(request(fresh=True))
    assert len(lab.calls) == 6
    assert resume.read(tmp_path / "work/results/ab-t").builds["base"]["commit"] == "c2-base"


def test_results_without_a_record_are_not_taken_over(tmp_path, monkeypatch):
    lab = FakeLab(tmp_path, monkeypatch)
    old = tmp_path / "work/results/ab-t-base"
    old.mkdir(parents=True)
    (old / "run-stress-50-0.json").write_text("{}")
    with pytest.raises(LabError, match="without a record of their request"):
        ab.run(request())
    ab.run(request(fresh=True))
    assert len(lab.calls) == 6 and not (old / "run-stress-50-0.json").read_text() == "{}"


def test_ab_writes_under_work_unless_the_label_says_results(tmp_path, monkeypatch):
    FakeLab(tmp_path, monkeypatch)
    ab.run(request(boots=1, arms=ARMS[:2]))
    assert (tmp_path / "work/results/ab-t/compare.txt").is_file()
    assert not (tmp_path / "repo").exists()
    ab.run(request(boots=1, arms=ARMS[:2], prefix="results/ab-t"))
    assert (tmp_path / "repo/results/ab-t/headline.md").is_file()
    assert (tmp_path / "repo/results/ab-t-patched/run-stress-100-1.json").is_file()


def test_tables_only_finds_the_kept_runs_and_writes_under_work(tmp_path, monkeypatch,
                                                                capsys):
    FakeLab(tmp_path, monkeypatch)
    ab.run(request(boots=1, arms=ARMS[:2], prefix="results/ab-t"))
    docs = tmp_path / "repo/results"
    for f in docs.glob("ab-t/*"):
        f.unlink()
    capsys.readouterr()
    ab.run(request(boots=1, arms=ARMS[:2]), tables_only=True)
    out = capsys.readouterr().out
    assert (tmp_path / "work/results/ab-t/compare.md").is_file()
    assert not list(docs.glob("ab-t/*"))
    assert "base vs patched, the headline:" in out
    assert f"every metric: {tmp_path / 'work/results/ab-t/compare.txt'}" in out


class FakeTree:
    kernel = base = None

    def resolve(self):
        return None


def test_measure_keeps_its_finished_boot_and_refuses_another_request(tmp_path, monkeypatch):
    lab = FakeLab(tmp_path, monkeypatch)
    monkeypatch.setattr(measure, "measure_in_vm", lab.measure_in_vm)
    monkeypatch.setattr("schedlab.core.deps.setup", lambda: None)
    monkeypatch.setattr(planmod.Plan, "check_tools", lambda self: None)
    result = BuildResult(tmp_path, tmp_path / "bzImage", "7.3.4", 0.0, "c1")
    monkeypatch.setattr("schedlab.measuring.measure.built", lambda tree, spec: result)

    def go(plan=PLAN, fresh=False):
        return measure.measure_build(FakeTree(), "patched", "m", plan, "smt4", None, 60,
                                     fresh=fresh)
    lab.stop_at = 1
    with pytest.raises(Interrupted):
        go()
    go()
    assert lab.calls == ["m", "m"]
    runs = go()
    assert lab.calls == ["m", "m"] and len(runs) == 4 and all(r.complete for r in runs)
    with pytest.raises(LabError, match="seconds: 1 there, 2 now"):
        go(PLAN.with_(seconds=2))
    go(PLAN.with_(seconds=2), fresh=True)
    assert lab.calls == ["m"] * 3
    assert json.loads((tmp_path / "work/results/m/request.json").read_text())[
        "request"]["seconds"] == 2
