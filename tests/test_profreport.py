"""The profile report: sampled shares and the cost probe's lower bound."""

import json

import pytest

from schedlab import profreport
from schedlab.util import LabError


def _m(v):
    return {"value": v, "unit": "", "kind": "count", "higher_is_better": False}


def _write(folder, workload, i, metrics, seconds=2.0):
    folder.mkdir(exist_ok=True)
    run = {"label": folder.name, "workload": workload, "run": i, "complete": True,
           "seconds": seconds, "metrics": {k: _m(v) for k, v in metrics.items()}}
    (folder / f"run-{workload}-{i}.json").write_text(json.dumps(run))


def test_sampled_shares_mean_sd_and_pooled_samples(tmp_path):
    d = tmp_path / "prof"
    for i, share in enumerate((0.5, 1.5)):
        _write(d, "stress-100", i, {"profile busy samples": 10000,
                                    "should_we_balance share (profile)": share})
    head, rows = profreport.sample_table([str(d)])
    cell = rows[0][head.index("should_we_balance ‰")]
    assert cell.startswith("1.000 ± 0.707") and cell.endswith("(20)")
    assert rows[0][2] == "2"


def test_a_result_set_without_profile_runs_is_refused(tmp_path):
    d = tmp_path / "plain"
    _write(d, "stress-100", 0, {"cpu busy": 50})
    with pytest.raises(LabError, match="no profile runs"):
        profreport.sample_table([str(d)])


def test_cost_share_is_calls_times_mean_over_a_billion_a_second(tmp_path):
    d = tmp_path / "cost"
    _write(d, "stress-100", 0, {
        "should_we_balance calls (SMT)": 1000, "should_we_balance calls (MC)": 500,
        "should_we_balance instructions per call, mean (SMT)": 100,
        "should_we_balance instructions per call, mean (MC)": 400}, seconds=2.0)
    head, rows = profreport.cost_table([str(d)])
    # (1000 * 100 + 500 * 400) / 2e9 = 0.15 per mille
    assert rows[0][2] == "should_we_balance"
    assert rows[0][4] == rows[0][5] == "0.150" and "MC 0.100" in rows[0][6]


def test_cost_share_of_a_probe_without_keys(tmp_path):
    d = tmp_path / "wake"
    _write(d, "hackbench-process", 0, {
        "select_task_rq_fair calls": 4000,
        "select_task_rq_fair instructions per call, mean": 500}, seconds=1.0)
    head, rows = profreport.cost_table([str(d)])
    assert rows[0][2:] == ["select_task_rq_fair", "1", "2.000", "2.000", "-"]
