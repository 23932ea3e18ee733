"""KUnit boots: the qemu command line, the console through kunit.py parse --json
(consoles captured from lab runs), what './schedlab kunit' prints."""

import json
import re
import shutil
from pathlib import Path

import pytest

from schedlab.core import topology as t
from schedlab.core import vm
from schedlab.series import kunit as k
from schedlab.series import kunit_report, kunit_tool

DATA = Path(__file__).parent / "data"
CONSOLE = DATA / "kunit-console-2x12x8.txt"
UPSTREAM = DATA / "kunit-console-2x12x8-upstream.txt"
# What the tree's 'kunit.py parse --json=FILE' wrote for UPSTREAM.
UPSTREAM_JSON = DATA / "kunit-console-2x12x8-upstream.json"

KUNIT_PY = "tools/testing/kunit/kunit.py"


def test_qemu_command_many_possible_few_online():
    args = k.qemu_command(Path("/b/bzImage"), t.parse_topology("2x12x8"), kvm=False, online=2)
    assert args[:3] == ["qemu-system-x86_64", "-accel", "tcg"]
    assert args[args.index("-smp") + 1] == "192,sockets=2,cores=12,threads=8"
    append = args[args.index("-append") + 1].split()
    assert {"kunit.enable=1", "kunit_shutdown=poweroff", "maxcpus=2"} <= set(append)
    assert "-no-reboot" in args and "-numa" not in args


def test_qemu_command_numa_nodes_and_filter():
    args = k.qemu_command(Path("/b/bzImage"), t.PRESETS["smt4-numa"], kvm=True, online=None,
                          memory_mib=2048, filter_glob="sched_fair_lb.swb*")
    assert args[2] == "kvm"
    numa = [args[i + 1] for i, a in enumerate(args) if a == "-numa"]
    assert numa == ["node,nodeid=0,cpus=0-7,memdev=mem0", "node,nodeid=1,cpus=8-15,memdev=mem1"]
    objs = [args[i + 1] for i, a in enumerate(args) if a == "-object"]
    assert objs == ["memory-backend-ram,id=mem0,size=1024M",
                    "memory-backend-ram,id=mem1,size=1024M"]
    append = args[args.index("-append") + 1]
    assert "kunit.filter_glob=sched_fair_lb.swb*" in append and "maxcpus" not in append


def test_counts_and_results_from_kunit_py_json():
    report = json.loads(UPSTREAM_JSON.read_text())
    n = kunit_tool.counts(report)
    assert (n.passed, n.failed, n.crashed, n.skipped, n.errors, n.total) == (44, 0, 0, 1, 0, 45)
    results = dict(kunit_tool.leaves(report))
    assert len(results) == 45
    assert results["sched_fair_lb.fixture_matches_live_domains"] == "SKIP"
    assert results["sched_fair_lb.swb_probe_counts_per_pass.smt8-2x12x8"] == "PASS"


@pytest.mark.tree
@pytest.mark.parametrize("console,want", [(CONSOLE, (30, 0, 0, 1)), (UPSTREAM, (44, 0, 0, 1))])
def test_parse_console_with_the_trees_kunit_py(kernel_tree, tmp_path, console, want):
    tree = kernel_tree(KUNIT_PY)
    parsed = k.parse_console(tree, console, tmp_path / "r.json")
    assert parsed.returncode == 0 and parsed.report is not None
    n = kunit_tool.counts(parsed.report)
    assert (n.passed, n.failed, n.crashed, n.skipped) == want
    # kunit.py's own text, without the line naming the JSON file.
    assert f"Ran {sum(want)} tests: passed: {want[0]}, skipped: 1" in parsed.output
    assert "Test results stored in" not in parsed.output
    if console == UPSTREAM:
        assert parsed.report == json.loads(UPSTREAM_JSON.read_text())


@pytest.mark.tree
def test_parse_console_without_ktap(kernel_tree, tmp_path):
    tree = kernel_tree(KUNIT_PY)
    (tmp_path / "console.log").write_text("Kernel panic - not syncing: VFS\n")
    parsed = k.parse_console(tree, tmp_path / "console.log", tmp_path / "r.json")
    assert parsed.returncode != 0 and parsed.report is not None
    n = kunit_tool.counts(parsed.report)
    assert n.total == 0 and n.errors == 1


def _fake_boot(monkeypatch, tmp_path, console: Path):
    """run_kunit without qemu: the boot 'writes' a captured console."""
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path / "work"))
    monkeypatch.setattr(vm, "kvm_works", lambda image: (False, "test"))

    def boot(cmd, log, timeout, what):
        shutil.copyfile(console, log)
        return 0
    monkeypatch.setattr(k, "run_in_group", boot)
    image = tmp_path / "bzImage"
    image.write_text("")
    return image


@pytest.mark.tree
def test_run_on_prints_results_tables_and_targets(kernel_tree, monkeypatch, tmp_path, capsys):
    tree = kernel_tree(KUNIT_PY)
    image = _fake_boot(monkeypatch, tmp_path, UPSTREAM)
    assert k.run_on(tree, image, "2x12x8", 2, None, 60)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "  accelerator: tcg (test)"
    assert re.search(r"Testing complete\. Ran 45 tests: passed: 44, skipped: 1", out)
    assert "Test results stored in" not in out
    for heading in (kunit_report.PROBES_HEADING, kunit_report.CALLS_HEADING,
                    kunit_report.TARGETS_HEADING):
        assert heading in lines
    assert "    smt8-2x12x8 90% busy: 2.38x fewer probes per pass, target >= 3.5x: MISSED" in lines
    assert re.match(r"  KUnit on 2x12x8: 44 passed, 0 failed, 1 skipped in \d+\.\ds under tcg "
                    r"\(console: .*kunit-2x12x8\.log\)$", lines[-1])
    assert (tmp_path / "work" / "logs" / "kunit-2x12x8.json").is_file()


@pytest.mark.tree
def test_run_kunit_result_and_a_boot_without_tests(kernel_tree, monkeypatch, tmp_path, capsys):
    tree = kernel_tree(KUNIT_PY)
    image = _fake_boot(monkeypatch, tmp_path, CONSOLE)
    res = k.run_kunit(tree, image, t.parse_topology("2x12x8"), 2)
    assert (res.ok, res.passed, res.failed, res.skipped, res.crashed) == (True, 30, 0, 1, 0)
    assert len(res.results) == 31 and len(res.rows) == 24 and res.calls == []
    empty = tmp_path / "empty.txt"
    empty.write_text("kunit: disabled\n")
    _fake_boot(monkeypatch, tmp_path, empty)
    assert not k.run_on(tree, image, "2x12x8", 2, None, 60)
    out = capsys.readouterr().out
    assert "no KUnit test ran (kunit.enable was not honoured)" in out
    assert "KUnit on 2x12x8: 0 passed, 0 failed, 0 skipped" in out
