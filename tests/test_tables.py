"""tables.py, the ground floor of the tables: rows and the wall-clock note."""

from schedlab.measuring import tables


def _runs(accel, values, metric="should_we_balance mean time (funclatency)", unit="ns",
          kind="time"):
    return [{"workload": "stress-50", "complete": True, "accel": accel,
             "metrics": {metric: {"value": v, "unit": unit, "kind": kind,
                                  "higher_is_better": False}}} for v in values]


def test_short_functions_times_under_tcg_are_marked():
    (row,) = tables.rows(_runs("tcg-single", [1e4, 2e4]), _runs("tcg-single", [3e4, 2e4]))
    assert row.wallclock and row.label().endswith(tables.WALLCLOCK_MARK)
    assert "--accel icount" in tables.WALLCLOCK_NOTE
    # icount's ns are instructions; a workload's own time is no short function
    (row,) = tables.rows(_runs("icount", [1e4, 2e4]), _runs("icount", [3e4, 2e4]))
    assert not row.wallclock and row.label() == \
        "should_we_balance mean time (funclatency) (ns)"
    (row,) = tables.rows(*[_runs("tcg-single", [1.0, 2.0], "hackbench time", "s")] * 2)
    assert not row.wallclock
    # The accelerator of older runs is in their setting, or nowhere.
    assert tables.accel_of({"setting": {"accel": "tcg"}}) == "tcg"
    assert tables.accel_of({}) == "" and not tables.under_tcg([{}])
