"""Presets, free-form parsing, qemu arguments and the guest topology check."""

from pathlib import Path

import pytest

from schedlab.core import topology as t
from schedlab.core.util import LabError

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name,spec,cpus,nodes", [
    ("smt2", "2x4x2", 16, 1),
    ("smt4", "1x2x4", 8, 1),
    ("smt8", "1x2x8", 16, 1),
    ("smt4-numa", "2x2x4:numa", 16, 2),
])
def test_presets(name, spec, cpus, nodes):
    topo = t.parse_topology(name)
    assert topo.spec() == spec
    assert topo.cpus == cpus
    assert topo.nodes == nodes


def test_free_form():
    topo = t.parse_topology("2x4x8:numa")
    assert (topo.sockets, topo.cores, topo.threads, topo.numa) == (2, 4, 8, True)
    assert t.parse_topology("1x8x8").numa is False


@pytest.mark.parametrize("bad", ["smt16", "2x2", "2x2x0", "axbxc", "2x2x2:nodes", "4x16x8"])
def test_bad_topologies_are_rejected(bad):
    with pytest.raises(LabError):
        t.parse_topology(bad)


def test_unknown_preset_lists_presets():
    with pytest.raises(LabError) as err:
        t.parse_topology("smt3")
    for name in t.PRESETS:
        assert name in str(err.value)


def test_smp_argument():
    assert t.smp_arg(t.PRESETS["smt8"]) == "16,sockets=1,cores=2,threads=8"
    assert t.smp_arg(t.PRESETS["smt2"]) == "16,sockets=2,cores=4,threads=2"
    big = t.Topology(16, 15, 8)
    assert t.smp_arg(big, present=8) == "8,maxcpus=1920,sockets=16,cores=15,threads=8"
    assert t.smp_arg(big, present=1920) == "1920,sockets=16,cores=15,threads=8"
    with pytest.raises(LabError):
        t.smp_arg(big, present=0)


def test_numa_nodes_follow_sockets():
    assert t.numa_node_specs(t.PRESETS["smt4-numa"], 2048) == [
        "1024M,cpus=0-7", "1024M,cpus=8-15"]
    assert t.numa_node_specs(t.PRESETS["smt8"], 2048) == []


def test_maxcpus_for_fewer_online_cpus():
    topo = t.parse_topology("1x8x8")
    assert t.kernel_cpu_args(topo, 2) == ["maxcpus=2"]
    assert t.kernel_cpu_args(topo, None) == []
    assert t.kernel_cpu_args(topo, 64) == []


def test_siblings_are_consecutive_as_qemu_numbers_them():
    topo = t.PRESETS["smt4-numa"]
    assert topo.siblings_of(6) == [4, 5, 6, 7]
    assert topo.core_of(6) == 1 and topo.package_of(6) == 0
    assert topo.package_of(8) == 1 and topo.core_of(8) == 0


@pytest.mark.parametrize("name,domains", [
    ("smt4", ["SMT", "MC"]),
    ("smt8", ["SMT", "MC"]),
    ("smt2", ["SMT", "MC", "PKG"]),
    ("smt4-numa", ["SMT", "MC", "NUMA"]),
    ("1x4x1", ["MC"]),
])
def test_expected_domains(name, domains):
    assert t.parse_topology(name).expected_domains() == domains


def test_cpulist_round_trip():
    assert t.parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert t.format_cpulist([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"


def fake_report(topo, domains=None, online=None, swap=None):
    online = list(range(topo.cpus if online is None else online))
    lines = [f"nproc {len(online)}", f"possible 0-{topo.cpus - 1}",
             f"online {t.format_cpulist(online)}"]
    for cpu in online:
        sib = [c for c in topo.siblings_of(cpu) if c in online]
        if swap and cpu in swap:
            sib = swap[cpu]
        lines.append(f"cpu {cpu} {t.format_cpulist(sib)} {topo.core_of(cpu)} "
                     f"{topo.package_of(cpu)}")
    for node in range(topo.nodes):
        lines.append(f"node {node} {t.format_cpulist([c for c in topo.node_cpus(node) if c in online])}")
    for i, name in enumerate(domains if domains is not None else topo.expected_domains()):
        lines.append(f"domain {i} {name}")
    return "\n".join(lines) + "\n"


def test_check_passes_on_matching_view():
    topo = t.PRESETS["smt4-numa"]
    view = t.parse_guest_report(fake_report(topo))
    assert t.check_view(topo, view) == []


def test_check_catches_wrong_siblings_and_domains():
    topo = t.PRESETS["smt8"]
    view = t.parse_guest_report(fake_report(topo, domains=["SMT", "PKG"], swap={3: [3]}))
    problems = t.check_view(topo, view)
    assert any("cpu3: thread siblings" in p for p in problems)
    assert any("sched domains" in p for p in problems)


def test_check_catches_wrong_cpu_and_node_count():
    view = t.parse_guest_report(fake_report(t.PRESETS["smt4"]))
    problems = t.check_view(t.PRESETS["smt4-numa"], view)
    assert any("nproc is 8" in p for p in problems)
    assert any("NUMA node" in p for p in problems)


def test_check_with_fewer_online_cpus():
    topo = t.parse_topology("1x8x8")
    view = t.parse_guest_report(fake_report(topo, online=2, domains=["SMT"]))
    assert t.check_view(topo, view, online=2) == []
    assert t.check_view(topo, view) != []


@pytest.mark.parametrize("preset", sorted(p.stem.split("guest-")[1] for p in DATA.glob("guest-*.txt")))
def test_real_guest_reports(preset):
    """Reports captured from lab VMs (tests/data/guest-PRESET.txt) pass the check."""
    topo = t.parse_topology(preset)
    view = t.parse_guest_report((DATA / f"guest-{preset}.txt").read_text())
    assert t.check_view(topo, view) == []
    assert view.domains == topo.expected_domains()


def test_guest_probe_is_a_shipped_shellcheck_clean_script():
    import shutil
    import subprocess
    probe = t.guest_probe()
    assert probe.name == "topology-probe.sh" and probe.is_file()
    assert probe.read_text().startswith("#!/bin/bash\n")
    subprocess.run(["bash", "-n", str(probe)], check=True)
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck not installed (Debian package shellcheck)")
    proc = subprocess.run(["shellcheck", str(probe)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_guest_probe_prints_what_the_parser_reads():
    text = t.guest_probe().read_text()
    for key in ("nproc", "possible", "online", "cpu", "node", "domain"):
        assert f'echo "{key} ' in text, key


def test_format_view_shows_the_guest_and_the_expected_levels():
    topo = t.PRESETS["smt4"]
    lines = ["nproc 8", "possible 0-7", "online 0-7", "node 0 0-7", "domain 0 SMT",
             "domain 1 MC"]
    lines += [f"cpu {c} {c - c % 4}-{c - c % 4 + 3} {c // 4} 0" for c in range(8)]
    view = t.parse_guest_report("\n".join(lines))
    text = t.format_view(topo, view)
    assert text.splitlines() == [
        "  guest: 8 CPUs online of 8 possible, 1 NUMA node(s), cpu0 domains: SMT MC",
        "  SMT sibling sets: {0,1,2,3}, {4,5,6,7}",
        "  node0: 0-7",
        f"  expected: {topo.describe()}, domains SMT MC"]
    assert t.format_view(topo, view, mc_level=False).endswith("domains SMT PKG")
