"""KUnit boots: qemu command line, console parsing (captured from a lab run)."""

from pathlib import Path

from schedlab import kunit as k
from schedlab import topology as t

CONSOLE = (Path(__file__).parent / "data" / "kunit-console-2x12x8.txt").read_text()


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


def test_totals_from_real_console():
    assert k.totals(CONSOLE) == (30, 0, 1, 31)
    assert k.totals("no tests here") == (0, 0, 0, 0)


def test_probe_lines_from_real_console():
    rows = k.parse_probe_lines(CONSOLE)
    assert len(rows) == 24
    smt8 = {r.busy: r for r in rows if r.fixture == "smt8-2x12x8"}
    assert sorted(smt8) == [0, 50, 90, 100]
    assert smt8[100].fields["pass_probes"] == "4032"
    assert smt8[100].fields["levels"] == "SMT:192,MC:1536,NUMA:2304"


def test_probe_table_markdown():
    rows = k.parse_probe_lines(CONSOLE)
    table = k.probe_table(rows).splitlines()
    assert table[0].startswith("| fixture | busy % | upstream probes/pass | probes/pass")
    # A console from before the upstream comparison: its columns stay empty.
    assert "| smt8-2x12x8 | 100 |  | 4032 |  | 408 | 96 | SMT:192 MC:1536 NUMA:2304 |" in table
    assert k.probe_table([]) == ""


def _row(fixture, busy, ours, up):
    return k.ProbeRow(fixture, busy, {"pass_probes": str(ours),
                                      "upstream_pass_probes": str(up)})


def test_probe_ratio_and_targets():
    assert k.probe_ratio(_row("f", 100, 500, 4000)) == 8.0
    assert k.probe_ratio(_row("f", 0, 0, 0)) == 1.0
    assert k.probe_ratio(k.ProbeRow("f", 0, {"pass_probes": "3"})) is None
    rows = [_row("smt8-2x12x8", 100, 600, 4032), _row("smt8-2x12x8", 90, 1000, 3222),
            _row("smt8-2x12x8", 50, 1300, 1860), _row("smt4-2x12x4", 100, 300, 1632),
            _row("smt2-x86-2x16x2", 100, 200, 1216), _row("numa-ring-4x4x2", 0, 130, 128)]
    lines = k.check_targets(rows)
    assert "smt8-2x12x8 100% busy: 6.72x fewer probes per pass, target >= 6x: met" in lines
    assert "smt8-2x12x8 90% busy: 3.22x fewer probes per pass, target >= 3.5x: MISSED" in lines
    assert "smt8-2x12x8 50% busy: 1.43x fewer probes per pass, target >= 1.5x: MISSED" in lines
    assert any("numa-ring-4x4x2 0% busy: 130 probes per pass, more than upstream's 128"
               in line for line in lines)
    assert all("MISSED" not in line for line in k.check_targets(rows[:1] + [
        _row("smt8-2x12x8", 90, 900, 3222), _row("smt8-2x12x8", 50, 1000, 1860),
        _row("smt4-2x12x4", 100, 300, 1632), _row("smt2-x86-2x16x2", 100, 200, 1216)]))
    assert all("MISSED" in line for line in k.check_targets([]))


def test_call_lines_and_table():
    console = ("[  9.1]     # swb_decides_as_upstream: swb-calls: fixture=smt8-2x12x8 "
               "patterns=8006 calls=4611456 probes=15650372 upstream_probes=71119054 "
               "max_call_probes=96 upstream_max_call_probes=98 stale_probes=29022102 "
               "stale_max_call_probes=97\n")
    lines = k.parse_call_lines(console)
    assert lines[0]["fixture"] == "smt8-2x12x8" and lines[0]["calls"] == "4611456"
    table = k.call_table(lines).splitlines()
    assert table[2] == ("| smt8-2x12x8 | 8006 | 4611456 | 15.42 | 3.39 | 4.54x | 96 (98) | "
                        "6.29 (97) |")
    assert k.call_table([]) == "" and k.call_table([{"fixture": "x"}]) == ""


def test_parsed_counts_from_kunit_py_summary():
    # What kunit.py parse prints for a run filtered with kunit.filter_glob,
    # whose console has no '# Totals:' line.
    line = "[17:08:29] \x1b[1;32mTesting complete. Ran 1 tests: passed: 1\x1b[0m\n"
    assert k.parsed_counts(line) == (1, 0, 0, 1)
    assert k.parsed_counts("Testing complete. Ran 5 tests: passed: 2, failed: 1, "
                           "crashed: 1, skipped: 1") == (2, 2, 1, 5)
    assert k.parsed_counts("nothing") == (0, 0, 0, 0)
