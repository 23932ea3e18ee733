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


def _latency_runs(ns):
    return [{"workload": "stress-100", "metrics": {
        "should_we_balance mean time (funclatency)": {"value": v, "unit": "ns"}}} for v in ns]


def test_the_probe_mail_sets_the_cost_model_beside_funclatency():
    runs = {"series": _latency_runs([400, 600]), "swb-v7.3": _latency_runs([900, 1100])}
    genoa = {"lscpu": "Architecture: x86_64\nModel name:   AMD EPYC 9654 96-Core Processor\n"}
    text = "\n".join(reporttext.model_block(genoa | {"threads_per_core": 2}, runs))
    flat = " ".join(text.split())
    assert "cost model of should_we_balance(): a model, not a measurement" in text
    assert "in a 16-CPU guest: 2 cores of 8 threads, one LLC" in flat
    assert "This machine has 2 threads a core" in flat
    assert "CPU: AMD EPYC 9654 96-Core Processor: AMD EPYC Zen 4 (Genoa)" in flat
    assert ("funclatency mean: swb-v7.3 1,000 ns, series 500 ns; swb-v7.3 less series: "
            "500 ns") in flat
    model = [ln for ln in text.splitlines() if ln.startswith("    model, ")]
    assert len(model) == 1 and model[0].startswith("    model, AMD EPYC Zen 4 (Genoa): swb-v7.3 ")
    # perf's messaging is priced with the VM's hackbench; stress-90 has no count.
    other_loads = {k: [dict(r, workload=w) for r in v for w in ("perf-messaging-g4",
                                                                "stress-90")]
                   for k, v in runs.items()}
    flat = " ".join(reporttext.model_block(genoa, other_loads))
    assert "perf-messaging-g4 (priced with the VM's hackbench-process)" in flat
    assert "  stress-90 " in flat and "no VM count of this load to price" in flat
    assert "priced with the VM's )" not in flat
    assert all(len(ln) < 80 for ln in text.splitlines())
    # A CPU of no family: every family's line, POWER10's without a prediction.
    other = "\n".join(reporttext.model_block({"lscpu": "Model name: QEMU TCG CPU\n"}, runs))
    assert other.count("    model, ") == len(reporttext.costmodel.FAMILIES)
    assert "model, IBM POWER10: no published latency, no prediction" in other
    # Without both arms, or without funclatency (the throughput pass): nothing.
    assert reporttext.model_block(genoa, {"series": runs["series"]}) == []
    assert reporttext.model_block(genoa, {"series": [{"workload": "stress-100",
                                                      "metrics": {}}],
                                          "swb-v7.3": runs["swb-v7.3"]}) == []
