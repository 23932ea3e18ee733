"""plots: the PNGs of a comparison (matplotlib is a dependency of the venv)."""

import json

import pytest

from schedlab.measuring import compare as c
from schedlab.measuring import plots

SETTING = {"topology": "smt4", "config": "probe", "probe_tool": "bpftrace/kfunc"}


def runs(folder, probes, buckets):
    folder.mkdir()
    for i, v in enumerate(probes):
        run = {"label": folder.name, "workload": "stress-100", "complete": True,
               "setting": SETTING,
               "metrics": {"idle_cpu probes in should_we_balance per s":
                           {"value": v, "unit": "1/s", "kind": "rate",
                            "higher_is_better": False}},
               "histograms": {"should_we_balance": {"tool": "bpftrace", "unit": "ns",
                                                    "buckets": buckets}}}
        (folder / f"run-stress-100-{i}.json").write_text(json.dumps(run))
    return c.load_runs(folder)


def test_plot_data_sums_histograms(tmp_path):
    a = runs(tmp_path / "base", [100.0, 110.0], [[512, 1023, 3], [1024, 2047, 1]])
    b = runs(tmp_path / "patched", [20.0, 22.0], [[256, 511, 2]])
    data = plots.plot_data(a, b, c.rows(a, b), "base", "patched")
    (h,) = data["histograms"]
    assert dict(h["a"]) == {512: 6, 1024: 2} and dict(h["b"]) == {256: 4}
    (row,) = data["rows"]
    assert row["a_mean"] == pytest.approx(2 / (1 / 100 + 1 / 110))  # harmonic: a rate and row["a_half"] > 0


def test_write_plots_makes_pngs(tmp_path):
    a = runs(tmp_path / "base", [100.0, 110.0, 105.0], [[512, 1023, 3]])
    b = runs(tmp_path / "patched", [20.0, 22.0, 21.0], [[256, 511, 2]])
    files = plots.write_plots(a, b, c.rows(a, b), "base", "patched", tmp_path / "plots")
    names = sorted(f.name for f in files)
    assert names == ["counts.png", "latency-stress-100.png"]
    for f in files:
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_times_under_tcg_carry_the_wall_clock_note(tmp_path):
    def side(folder, values, accel):
        folder.mkdir()
        for i, v in enumerate(values):
            run = {"workload": "stress-100", "complete": True, "accel": accel,
                   "setting": SETTING, "metrics": {"sched_balance_rq newidle mean time": {
                       "value": v, "unit": "ns", "kind": "time", "higher_is_better": False}}}
            (folder / f"run-stress-100-{i}.json").write_text(json.dumps(run))
        return c.load_runs(folder)
    a = side(tmp_path / "a", [1e5, 2e5], "tcg-single")
    b = side(tmp_path / "b", [1e5, 3e5], "tcg-single")
    assert plots.plot_data(a, b, c.rows(a, b), "a", "b")["wallclock"]
    (png,) = plots.write_plots(a, b, c.rows(a, b), "a", "b", tmp_path / "plots")
    assert png.name == "times.png" and png.read_bytes()[:4] == b"\x89PNG"
    i = side(tmp_path / "i", [1e5, 2e5], "icount")
    assert not plots.plot_data(i, i, c.rows(i, i), "a", "b")["wallclock"]


def test_without_matplotlib_the_plots_say_what_to_install(monkeypatch):
    import builtins

    from schedlab.core.util import LabError
    real_import = builtins.__import__

    def no_matplotlib(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(LabError, match=r"schedlab\[plots\].*--no-plots"):
        plots._pyplot()
