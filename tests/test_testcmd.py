"""The test tiers: stages as data, outcomes counted, the closing line in every case.

The stage bodies that boot or build are replaced by fakes: a fake builder
that fails one arch's build (or raises), and boot/KUnit/measure fakes that
pass.  The counts and the exit status must follow from the outcomes alone.
"""

import inspect
import json
from pathlib import Path

import pytest

from schedlab import testcmd
from schedlab.core import build as buildmod
from schedlab.core import stages as stagemod
from schedlab.core.stages import Stage
from schedlab.core.util import LabError


class FakeTree:
    key, path, base, description = "fake", Path("/nonexistent"), "0" * 40, "a fake tree"


@pytest.fixture
def fake_lab(monkeypatch, tmp_path):
    """Every stage body that would install, fetch, build or boot: a passing fake."""
    calls = []

    def ok(name, real=None):
        """A passing fake; given the REAL function, the call must fit its signature."""
        def fake(*a, **k):
            if real is not None:
                inspect.signature(real).bind(*a, **k)
            calls.append(name)
            return True
        return fake

    monkeypatch.setattr(testcmd, "_setup", ok("setup"))
    monkeypatch.setattr(testcmd, "_pytest", ok("pytest"))
    monkeypatch.setattr(testcmd, "_pytest_tree", ok("pytest tree"))
    monkeypatch.setattr(testcmd, "_lint", ok("lint"))
    monkeypatch.setattr(testcmd.TreeSpec, "resolve", lambda self: FakeTree())
    monkeypatch.setattr(testcmd.patchset, "read_series", lambda d: [])
    boot = ok("boot", testcmd.guests.check_topology)
    monkeypatch.setattr(testcmd.guests, "check_topology", lambda *a, **k: 0 if boot(*a, **k) else 1)
    for module, name in ((testcmd.kunit, "run_on"), (testcmd.kunit, "run_scale"),
                         (testcmd.kunit_tool, "run_readme_command"),
                         (testcmd.pipeline, "measure_integration"),
                         (testcmd.pipeline, "icount_integration"),
                         (testcmd.kselftest, "run_selftest"), (testcmd.soakmod, "run_for"),
                         (testcmd.peermod, "run_peer_tests")):
        monkeypatch.setattr(module, name, ok(name, getattr(module, name)))
    from schedlab.kit import rehearsal
    real_rehearsal = rehearsal.run

    def fake_rehearsal(req):
        inspect.signature(real_rehearsal).bind(req)
        calls.append("rehearsal")
        return rehearsal.RehearsalOutcome(True)
    monkeypatch.setattr(rehearsal, "run", fake_rehearsal)

    def text_and_verdict(module, attr, call):
        """A stand-in for a (text, ok) function: checks the arguments, passes."""
        real = getattr(module, attr)

        def fake(*a, **k):
            inspect.signature(real).bind(*a, **k)
            calls.append(call)
            return f"{call}: ok", True
        monkeypatch.setattr(module, attr, fake)
    text_and_verdict(testcmd.matrix, "run", "matrix")
    text_and_verdict(testcmd.objdiff, "run_all", "objdiff")
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "series").write_text("0001-x.patch\n")
    monkeypatch.setattr(testcmd, "repo_dir", lambda: tmp_path)
    monkeypatch.setattr(testcmd.patchset, "patches_dir", lambda: tmp_path / "patches")
    monkeypatch.setattr(testcmd, "git", lambda *a, **k: "f" * 40)
    return calls


def builder(fail_arch=None, raise_arch=None):
    built = []

    def build(tree, spec):
        arch = spec.arch or "x86_64"
        if arch == raise_arch:
            raise RuntimeError(f"a bug in the {arch} build")
        if arch == fail_arch:
            raise LabError(f"the {arch} build failed (log: build.log)")
        built.append((spec.name, spec.config, arch))
        return buildmod.BuildResult(Path("/b"), Path("/b/bzImage"), "7.3.4-schedlab", 1.0, "c")
    build.built = built  # type: ignore[attr-defined]
    return build


def closing(out):
    return [ln for ln in out.splitlines() if ln.startswith("test")][-1]


def test_fast_tier_passes_and_counts_every_stage(fake_lab, capsys):
    req = testcmd.TestRequest()
    n = len(testcmd.stages_for(req))
    assert testcmd.test_command(req, builder()) == 0
    out = capsys.readouterr().out
    assert closing(out) == f"test: {n} passed, 0 failed, 0 skipped"
    assert "warning: no passing './schedlab test --full' record" in out
    assert not any(s.tier == "full" for s in testcmd.stages_for(req))


def test_full_tier_with_failing_ppc64le_build(fake_lab, capsys, tmp_path):
    """The pseries boots and KUnit runs that need the ppc64le build are skipped,
    not passed; everything else still runs; exit status 1; a record is written."""
    req = testcmd.TestRequest(full=True)
    stages = testcmd.stages_for(req)
    ppc_dependents = [s.name for s in stages if "build patched/lab ppc64le" in s.needs]
    assert len(ppc_dependents) == 1 + 3 + 1   # the smt8 boot, three KUnit boots, the scale boot
    fake = builder(fail_arch="ppc64le")
    assert testcmd.test_command(req, fake) == 1
    out = capsys.readouterr().out
    n = len(stages)
    assert closing(out) == (f"test --full: {n - 1 - len(ppc_dependents)} passed, 1 failed, "
                            f"{len(ppc_dependents)} skipped")
    assert "run_for" in fake_lab and "run_peer_tests" in fake_lab      # the rest ran
    assert "rehearsal" in fake_lab and "objdiff" in fake_lab
    rec = json.loads(next((tmp_path / "results" / "test-full").glob("*.json")).read_text())
    assert rec["passed"] is False and rec["closing_line"] == closing(out)
    assert rec["patches_sha256"] == testcmd.patches_hash(tmp_path / "patches")
    outcomes = {s["name"]: s["outcome"] for s in rec["stages"]}
    assert outcomes["build patched/lab ppc64le"] == "failed"
    assert all(outcomes[name] == "skipped" for name in ppc_dependents)


def test_a_stage_that_raises_fails_and_the_others_run(fake_lab, capsys):
    """A bug (not a LabError) in the x86_64 build: the stages needing it are
    skipped, those that do not (the probe build has its own) still run, and
    the closing line is printed."""
    req = testcmd.TestRequest()
    stages = testcmd.stages_for(req)
    fake = builder(raise_arch="x86_64")
    assert testcmd.test_command(req, fake) == 1
    out = capsys.readouterr().out
    lab_dependents = [s.name for s in stages if "build patched/lab" in s.needs]
    probe_dependents = [s.name for s in stages
                        if "build patched/probe + measurement series" in s.needs]
    skipped = len(lab_dependents) + len(probe_dependents)
    # Both x86_64 builds raise: 2 failed, their dependents skipped.
    assert closing(out) == f"test: {len(stages) - 2 - skipped} passed, 2 failed, {skipped} skipped"
    assert "RuntimeError: a bug in the x86_64 build" in out
    assert "pytest" in fake_lab and "boot" not in fake_lab


def test_interrupt_prints_the_closing_line_and_leaves_the_rest_not_run(capsys):
    def boom(ctx):
        raise KeyboardInterrupt
    stages = [Stage("a", lambda c: True), Stage("b", boom), Stage("c", lambda c: True)]
    with pytest.raises(KeyboardInterrupt):
        stagemod.run("test", stages, None)
    out = capsys.readouterr().out
    assert "not run stages: b, c" in out
    assert out.rstrip().splitlines()[-1] == "test: 1 passed, 0 failed, 0 skipped"


def test_stage_lists_are_checked():
    with pytest.raises(ValueError, match="needs"):
        stagemod.check_stages([Stage("b", lambda c: True, ("a",))])
    with pytest.raises(ValueError, match="twice"):
        stagemod.check_stages([Stage("a", lambda c: True), Stage("a", lambda c: True)])
    for req in (testcmd.TestRequest(), testcmd.TestRequest(full=True),
                testcmd.TestRequest(unit_only=True), testcmd.TestRequest(arch="ppc64le")):
        stagemod.check_stages(testcmd.stages_for(req))


def test_record_status(fake_lab, capsys, tmp_path):
    digest = testcmd.patches_hash(tmp_path / "patches")
    testcmd.say_record_status(digest)
    assert "warning: no passing" in capsys.readouterr().out
    path = testcmd.record_path(digest)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"passed": True, "patches_sha256": digest,
                                "started": "2026-11-27T00:00:00Z", "closing_line": "x"}))
    testcmd.say_record_status(digest)
    assert "a passing record exists" in capsys.readouterr().out
    (tmp_path / "patches" / "series").write_text("0001-y.patch\n")
    assert testcmd.patches_hash(tmp_path / "patches") != digest


def test_the_matrix_stage_prints_the_report_on_the_fetched_tree(monkeypatch, capsys):
    monkeypatch.setattr(testcmd.matrix, "run", lambda tree, tier: (f"report {tier} {tree}", False))
    ctx = testcmd.TestContext(testcmd.TestRequest(), lambda tree, spec: None)
    with pytest.raises(LabError, match="fetch stage has not run"):
        testcmd._matrix("full")(ctx)
    ctx.tree = "T"
    assert testcmd._matrix("full")(ctx) is False
    assert "report full T" in capsys.readouterr().out


def test_a_timed_block_is_a_stage_of_the_report(capsys):
    report = stagemod.Report("ab")
    with report.stage("build"):
        pass
    with pytest.raises(LabError):
        with report.stage("boot"):
            raise LabError("no image")
    assert [(r.name, r.outcome) for r in report.results] == [
        ("build", stagemod.Outcome.PASSED), ("boot", stagemod.Outcome.FAILED)]
    assert "<== boot: failed" in capsys.readouterr().out
    assert report.closing_line() == "ab: 1 passed, 1 failed, 0 skipped"
