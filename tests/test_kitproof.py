"""The kit's icount proof: its arms, and the check of one constant."""

import json

import pytest

from schedlab import ab, kitproof


def test_arms_are_each_patch_then_each_state():
    arms = kitproof.arms()
    assert [a.variant for a in arms[:5]] == ["base", "topic-swb@1", "topic-swb@2",
                                              "topic-swb@3", "topic-swb"]
    assert [a.knobs for a in arms[5:]] == [(("swb_state", str(k)),) for k in range(5)]
    assert all(a.variant == ab.KIT_VARIANT for a in arms[5:])
    # The command line the docs print parses back to the same arms.
    items = [w.split(" ", 1)[1] for w in kitproof.command().split(" \\\n    ")
             if w.startswith("--arm ")]
    assert ab.parse_arms(items) == arms


def _write(root, label, boot, run, level_values):
    d = root / label / f"boot-{boot}"
    d.mkdir(parents=True, exist_ok=True)
    metrics = {}
    for level, (median, mean) in level_values.items():
        metrics[f"{kitproof.MEDIAN}{level})"] = {"value": median}
        metrics[f"{kitproof.MEAN}{level})"] = {"value": mean}
    (d / f"run-stress-100-{run}.json").write_text(json.dumps(
        {"label": label, "workload": "stress-100", "run": run, "complete": True,
         "metrics": metrics}))


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setattr(kitproof.resmod, "results_dir", lambda label: tmp_path / label)
    return tmp_path


def _fill(root, kit_offset=2, odd=None):
    medians = {"v7.3": (103, 471), "busy": (105, 473), "one-cpu": (38, 482),
               "one-core": (38, 108), "prune": (40, 117)}
    for state, (smt, mc) in medians.items():
        for boot in range(2):
            for run in range(2):
                _write(root, f"{kitproof.PREFIX}-at-{state}", boot, run,
                       {"SMT": (smt, smt + 5.0), "MC": (mc, mc - 40.0)})
                extra = 1 if state == odd else 0
                _write(root, f"{kitproof.PREFIX}-kit-{state}", boot, run,
                       {"SMT": (smt + kit_offset + extra, smt + 6.0),
                        "MC": (mc + kit_offset, mc - 39.0)})


def test_one_constant_in_every_cell_is_the_proof(results):
    _fill(results)
    text, ok = kitproof.report()
    assert ok, text
    assert "plus 2 instructions, in every state and at every level" in text
    assert "| one-core | MC | 108 | 110 | 108 |" in text
    assert "4+4" in text


def test_a_state_off_by_one_instruction_fails(results):
    _fill(results, odd="one-cpu")
    text, ok = kitproof.report()
    assert not ok
    assert "more than one constant" in text and "one-cpu/SMT +3" in text


def test_missing_runs_fail(results):
    _fill(results)
    for f in (results / f"{kitproof.PREFIX}-kit-busy").rglob("*.json"):
        f.unlink()
    for d in sorted((results / f"{kitproof.PREFIX}-kit-busy").rglob("boot-*")):
        d.rmdir()
    text, ok = kitproof.report()
    assert not ok and "FAIL: busy, SMT: no runs of the kit" in text
    assert "FAIL: busy, MC: no runs of the kit" in text
    text, ok = kitproof.report("another-prefix")
    assert not ok and "FAIL: v7.3: no runs" in text
