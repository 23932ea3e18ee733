"""report.txt: the kit's report as plain text to mail."""

import json
from pathlib import Path

from schedlab.kit import reporttext, significance


def _arm(folder: Path, values) -> Path:
    folder.mkdir(parents=True)
    for i, v in enumerate(values):
        (folder / f"run-stress-100-{i}.json").write_text(json.dumps({
            "workload": "stress-100", "run": i, "complete": True, "metrics": {
                "stress-ng cpu bogo-ops/s": {"value": v, "unit": "ops/s", "kind": "rate",
                                             "higher_is_better": True},
                "cpu busy": {"value": 99.0 + i % 2 / 10, "unit": "%", "kind": "count",
                             "higher_is_better": None}}}))
    return folder


MACHINE = {"model": "IBM 9080-HEX POWER10 with a name long enough to wrap the line somewhere "
                    "past the eightieth column of a mail",
           "threads_per_core": 8, "smt_mode": "SMT=8",
           "identity": {"release": "7.3.4-schedlab-patched-0123abcd", "variant": "patched",
                        "sources": "0123abcd", "config": "1a2b3c4d5e6f"},
           "noise": {"governor": "performance x 192", "busy processes": []}}


def test_the_mailed_report_is_plain_text_under_80_columns(tmp_path):
    folders = {"series": _arm(tmp_path / "series", [1000, 1010, 990, 1005, 995]),
               "series-again": _arm(tmp_path / "again", [1002, 1008, 992, 1000, 998]),
               "swb-v7.3": _arm(tmp_path / "v73", [900, 905, 895, 902, 898])}
    pairs = [("series", "series-again"), ("series", "swb-v7.3")]
    family = significance.headline_tests(folders, pairs)
    sig = {(t.a, t.b, t.workload, t.metric): t.significant for t in family}
    argv = ["./schedlab", "hw", "--arm", "series", "--arm", "series-again", "--arm",
            "swb-v7.3", "--bench", "stress-100", "--rounds", "5", "--seed", "7"]
    path = reporttext.write(tmp_path / "out", "The series on a box: the throughput pass",
                            "This is the kit's throughput pass: nothing was attached.",
                            pairs, folders, "series-again", sig, MACHINE,
                            {"rounds": 5, "arm order": "shuffled every round with seed 7"},
                            argv)
    text = path.read_text()
    assert path.name == "report.txt" and all(len(ln) < 80 for ln in text.splitlines())
    assert "swb-v7.3 against series" in text
    assert "stress-100: stress-ng cpu bogo-ops/s (ops/s, higher is better)" in text
    # The reference's (harmonic) mean and %stddev, the change, the arm's,
    # the A/A margin of series and series-again.
    lines = text.splitlines()
    metric = "stress-100: stress-ng cpu bogo-ops/s (ops/s, higher is better)"
    first, second = [lines[i + 1].split() for i, ln in enumerate(lines) if ln == metric]
    assert first[:4] == ["999.9", "0.8%", "+0.0%", "1,000"] and "*" not in " ".join(first)
    assert second[:4] == ["999.9", "0.8%", "-10.0%*", "900"]
    assert second[5] == first[5] != "-"
    for what in ("kernel: 7.3.4-schedlab-patched-0123abcd", "sources: patched 0123abcd",
                 "config hash: 1a2b3c4d5e6f", "governor: performance x 192",
                 "arm order: shuffled every round with seed 7", "--rounds 5 --seed 7"):
        assert what in text
    assert "stress-100: cpu busy (%, no better direction)" in text
    # With the kernels of the arms on record, they stand for the one the
    # record was taken on.
    both = dict(MACHINE, kernels={"kit": MACHINE["identity"], "stock": {
        "release": "7.3.4-schedlab-base-89abcdef", "sources": "89abcdef"}})
    text = reporttext.write(tmp_path / "out2", "t", "a", pairs, folders, "series-again", sig,
                            both, {}, argv).read_text()
    flat = " ".join(text.split())
    assert "the kit kernel: 7.3.4-schedlab-patched-0123abcd, sources 0123abcd, config " \
        "1a2b3c4d5e6f" in flat
    assert "the stock kernel: 7.3.4-schedlab-base-89abcdef, sources 89abcdef" in flat
    assert "  kernel: " not in text


def test_a_pair_without_runs_says_so(tmp_path):
    folders = {"series": _arm(tmp_path / "series", [1, 2, 3]), "lbstats": tmp_path / "none"}
    text = reporttext.write(tmp_path / "out", "t", "a", [("series", "lbstats")], folders,
                            None, {}, {}, {}, ["./schedlab", "hw"]).read_text()
    assert "no finished runs of both arms" in text and "no A/A margin" in " ".join(text.split())
    assert "no record of the machine" in text
