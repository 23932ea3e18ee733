"""The task-group gathering study: its parser and the depth 1 vs 2 table."""

import json

import pytest

from schedlab import parsers, tgstudy
from schedlab.util import LabError


def _metric(v, kind="count", hib=True):
    return {"value": v, "unit": "", "kind": kind, "higher_is_better": hib}


def write(folder, workload, ratios, entitled, tput, i0=0):
    folder.mkdir(exist_ok=True)
    for i, (r, t) in enumerate(zip(ratios, tput)):
        run = {"label": folder.name, "workload": workload, "complete": True,
               "metrics": {"tg achieved/entitled": _metric(r),
                           "tg cpus entitled": _metric(entitled),
                           "tg cpus used": _metric(r * entitled / 100),
                           "dbench throughput": _metric(t, "rate")}}
        (folder / f"run-{workload}-{i0 + i}.json").write_text(json.dumps(run))


def test_depth_two_against_depth_one(tmp_path, monkeypatch):
    d = tmp_path / "tg"
    write(d, "tg-dbench-d1-seed-t8", [95, 96, 94], 8 / 3, [300, 310, 290])
    write(d, "tg-dbench-d2-seed-t8", [50, 52, 48], 8 / 9, [60, 62, 58])
    write(d, "tg-cpu-d2-seed-t8", [80, 80, 80], 8 / 9, [1, 1, 1])
    text = tgstudy.table(str(d))
    row = [ln.split() for ln in text.splitlines() if ln.split()[:4] == ["dbench", "seed",
                                                                          "8", "2"]][0]
    # achieved/entitled 95 -> 50 (-47.4%); throughput per entitled CPU 112.5 -> 67.5 (-40%)
    assert row[-3:] == ["-47.4%*", "/", "-40.0%*"]
    assert row[7] == "62"                # 50 / 80: of the control at depth 2
    assert "| waker |" in tgstudy.table(str(d), markdown=True)


def test_no_tg_runs(tmp_path):
    d = tmp_path / "x"
    d.mkdir()
    (d / "run-stress-100-0.json").write_text(json.dumps({"workload": "stress-100",
                                                         "metrics": {}}))
    with pytest.raises(LabError, match="no runs of tg-"):
        tgstudy.table(str(d))


TG_OUT = """tg: waker switch
tg: depth 2
tg: cgroup_id 4242
tg: weight 29
tg: cpus 8
tg: tasks 8
tg: entitled_by_weight 1.0078
tg: entitled 1.0078
tg: usage_usec 3000000
tg: window_usec 10000000
tg: waker_status 0
Attaching 6 probes...
tg: counting
@rt[0]: 800000000
@rt[3]: 150000000
@rt[5]: 50000000
@mig: 12
@wakes: 1000
@wakes_busy: 900
@wakes_moved: 100
@flips:
[0, 4)               900 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[4, 8)               100 |@@@@@                                               |

@wflips:
[0, 4)              1000 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

tg: stopped

@mig: 0
@rt[7]: 1

stress-ng: metrc: [123] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
stress-ng: metrc: [123]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
stress-ng: metrc: [123] switch           200000     10.00      1.00      4.00     20000.00       40000.00
"""


def test_parser():
    m = parsers.tg_gather(TG_OUT)
    assert m["tg cpus used"].value == pytest.approx(0.3)
    assert m["tg achieved/entitled"].value == pytest.approx(100 * 0.3 / 1.0078)
    assert m["tg cpus carrying >=10% of its time"].value == 2      # 80% and 15%
    assert m["tg largest cpu share"].value == pytest.approx(80.0)
    assert m["tg migrations per s"].value == pytest.approx(1.2)
    assert m["tg wakeups placed on a busy cpu"].value == pytest.approx(90.0)
    assert m["tg wakeups moved"].value == pytest.approx(10.0)
    assert m["tg wakee wakee_flips median"].value == pytest.approx(1.5)
    assert m["stress-ng switch bogo-ops/s"].value == pytest.approx(20000.0)
    assert parsers.tg_gather("tg: waker switch\n") == {}


def test_a_window_on_another_clock_than_cpu_stat_divides_nothing():
    # Every group together used more CPUs than the machine has over the
    # window: the window's clock ran slow (qemu icount), so no rate or share.
    text = TG_OUT.replace("tg: usage_usec 3000000\n",
                          "tg: usage_usec 3000000\ntg: busy_usage_usec 900000000\n")
    assert "tg: cpus " in text
    m = parsers.tg_gather(text)
    assert m["tg window check failed"].value == 1
    for name in ("tg cpus used", "tg achieved/entitled", "tg wakeups per s",
                 "tg migrations per s"):
        assert name not in m
    assert m["tg wakeups moved"].value == pytest.approx(10.0)     # counts stay
    assert "stress-ng switch bogo-ops/s" not in m                  # the same clock
    ok = parsers.tg_gather(TG_OUT.replace("tg: usage_usec 3000000\n",
                                          "tg: usage_usec 3000000\ntg: busy_usage_usec 50000000\n"))
    assert "tg achieved/entitled" in ok


def test_a_load_is_part_of_the_share_the_control_is_matched_on():
    assert tgstudy.setting_of("tg-hackbench-d2-seed-t8-l1.5") == ("hackbench", "seed l1.5", "8", "2")
    assert tgstudy.setting_of("tg-cpu-d1-s2-t8") == ("cpu", "s2", "8", "1")


def test_depth_two_loss_beyond_the_control(tmp_path):
    d = tmp_path / "tg"
    write(d, "tg-switch-d1-seed-t8-l2", [80], 8 / 3, [300])
    write(d, "tg-switch-d2-seed-t8-l2", [40], 8 / 9, [60])
    write(d, "tg-cpu-d1-seed-t8-l2", [100], 8 / 3, [1])
    write(d, "tg-cpu-d2-seed-t8-l2", [80], 8 / 9, [1])
    row = [ln.split() for ln in tgstudy.table(str(d)).splitlines()
           if ln.split()[:5] == ["switch", "seed", "l2", "8", "2"]][0]
    # switch halves (0.5), the control loses a fifth (0.8): 0.5 / 0.8 - 1 = -37.5%
    assert row[-1] == "-37.5%"


def _boot_runs(folder, boot, w1, w2, c1, c2):
    for workload, v in (("tg-switch-d1-seed-t8-l2", w1), ("tg-switch-d2-seed-t8-l2", w2),
                        ("tg-cpu-d1-seed-t8-l2", c1), ("tg-cpu-d2-seed-t8-l2", c2)):
        folder.mkdir(exist_ok=True)
        run = {"label": folder.name, "workload": workload, "complete": True, "boot": boot,
               "metrics": {"tg achieved/entitled": _metric(v)}}
        (folder / f"run-{workload}-{boot}.json").write_text(json.dumps(run))


def test_beyond_control_per_boot_and_versus(tmp_path):
    base, on = tmp_path / "base", tmp_path / "on"
    # base: depth 2 keeps 50%, 60%, 55% of depth 1 where the control keeps 100%
    for b, w2 in enumerate((50, 60, 55)):
        _boot_runs(base, b, 100, w2, 80, 80)
    # on: 80%, 85%, 90%; the control's ratio 1.0 again
    for b, w2 in enumerate((80, 85, 90)):
        _boot_runs(on, b, 100, w2, 70, 70)
    got = tgstudy.beyond_by_boot(str(base))
    assert list(got) == [("switch", "seed l2", "8")]
    assert got[("switch", "seed l2", "8")] == pytest.approx({0: -50.0, 1: -40.0, 2: -45.0})
    text = tgstudy.versus_table([str(base), str(on)])
    row = [ln.split() for ln in text.splitlines() if str(on) in ln][0]
    # loss 45 -> 15 points: +30.0 points, 67% of the loss closed, significant
    assert row[-3:] == ["+30.0", "67", "*"]
    first = [ln for ln in text.splitlines() if str(base) in ln][0]
    assert "-50.0, -40.0, -45.0" in first


def test_versus_needs_both_depths_and_control(tmp_path):
    d = tmp_path / "x"
    write(d, "tg-dbench-d2-seed-t8", [50], 1, [1])
    with pytest.raises(LabError, match="no boot with both depths"):
        tgstudy.versus_table([str(d)])
