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
    assert table[0].startswith("| fixture | busy % | probes/pass")
    assert "| smt8-2x12x8 | 100 | 4032 | 408 | 96 | SMT:192 MC:1536 NUMA:2304 |" in table
    assert k.probe_table([]) == ""
