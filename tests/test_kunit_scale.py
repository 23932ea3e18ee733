"""The probe table at scale: the 'swb-scale:' lines, v7.3's beside them, the
growth exponents, and the scale boot's verdict (the boot itself faked)."""

import math
from pathlib import Path

import pytest

from schedlab.core import topology as t
from schedlab.core.util import LabError
from schedlab.series import kunit as k
from schedlab.series import kunit_scale as ks

FIXTURES = (("smt8-2x12x8", 192, "SMT MC NUMA"), ("multi-llc-2x12x16x2", 768, "SMT MC PKG NUMA"),
            ("smt8-16x15x8", 1920, "SMT MC NUMA"))


def console(scale=1.0, exponent=1.0, drop=()):
    """A console of the scale case: probes per pass = scale x cpus^exponent,
    the top level holding half of them."""
    out = ["KTAP version 1", "    # swb_probe_counts_at_scale: a line that is not a count"]
    for name, cpus, levels in FIXTURES:
        for busy in ks.SCALE_BUSY:
            if (name, busy) in drop:
                continue
            probes = round(scale * cpus ** exponent)
            names = levels.split()
            per_level = [0] * (len(names) - 2) + [probes - probes // 2, probes // 2]
            lv = ",".join(f"{n}:{v}" for n, v in zip(names, per_level))
            out.append(f"[   12.5] # swb_probe_counts_at_scale: swb-scale: fixture={name} "
                       f"cpus={cpus} busy={busy} patterns=16 pass_probes={probes} "
                       f"pass_calls={cpus} max_call_probes=8 levels={lv}")
    return "\n".join(out) + "\n"


def test_lines_are_parsed_and_a_missing_fixture_named():
    rows = ks.parse_scale_lines(console())
    assert len(rows) == 9 and rows[0].fixture == "smt8-2x12x8" and rows[0].busy == 100
    assert rows[0].fields["cpus"] == "192" and rows[0].fields["pass_probes"] == "192"
    assert ks.missing(rows) == []
    rows = ks.parse_scale_lines(console(drop={("smt8-16x15x8", 50)}))
    assert ks.missing(rows) == ["smt8-16x15x8 50%"]


def test_growth_exponent_fits_a_power_law():
    pts = [(192.0, 3 * 192 ** 1.5), (768.0, 3 * 768 ** 1.5), (1920.0, 3 * 1920 ** 1.5)]
    assert math.isclose(ks.growth_exponent(pts), 1.5)
    assert math.isclose(ks.growth_exponent([(10.0, 7.0), (100.0, 7.0)]), 0.0)
    assert ks.growth_exponent([(10.0, 7.0)]) is None
    assert ks.growth_exponent([(10.0, 0.0), (100.0, 7.0)]) is None
    assert ks.growth_exponent([(10.0, 1.0), (10.0, 2.0)]) is None


def test_tables_put_upstream_beside_and_fit_both():
    rows = ks.merge(ks.parse_scale_lines(console(scale=0.5, exponent=1.0)),
                    ks.parse_scale_lines(console(scale=0.01, exponent=2.0)))
    lines = ks.report_lines(rows)
    assert lines[0] == ks.TABLE_HEADING and lines[2] == ks.GROWTH_HEADING
    table = lines[1].splitlines()
    assert table[2].startswith("| smt8-2x12x8 | 192 | 100 | 369 | 96 | 3.84x | 1.92 | 0.50 |")
    growth = lines[3].splitlines()
    assert growth[2].startswith("| 100 | 192/768/1920 | 2.00 | 1.00 | 2.00 | 1.00 |")
    assert ks.report_lines([]) == []
    assert ks.more_than_upstream(rows) == []
    alone = ks.report_lines(ks.parse_scale_lines(console()))
    assert ks.NO_REFERENCE in alone


def test_more_probes_than_upstream_fails_the_run(monkeypatch, tmp_path, capsys):
    _fake_kunit(monkeypatch, tmp_path, [console(0.5, 1.0), console(0.6, 1.0)])
    assert not k.run_scale(Path("/tree"), Path("/b/ours"), 60, "ppc64le",
                           reference=Path("/b/reference"))
    out = capsys.readouterr().out
    assert "    smt8-16x15x8 50% busy: 1152 probes per pass, upstream 960 (MORE than v7.3)" in out


def test_qemu_command_of_the_scale_boot():
    args = k.qemu_command(Path("/b/vmlinux"), k.SCALE_TOPOLOGY, kvm=False, online=None,
                          memory_mib=k.SCALE_MEMORY_MIB, filter_glob=k.SCALE_CASE,
                          arch="ppc64le", present=k.SCALE_PRESENT)
    assert args[args.index("-M") + 1] == "pseries"
    assert args[args.index("-smp") + 1] == "8,maxcpus=1920,sockets=16,cores=15,threads=8"
    assert args[args.index("-m") + 1] == "4096M"
    append = args[args.index("-append") + 1].split()
    assert f"kunit.filter_glob={k.SCALE_CASE}" in append
    assert not any(a.startswith("maxcpus=") for a in append)


def _fake_kunit(monkeypatch, tmp_path, texts, skipped=()):
    """run_kunit replaced: each boot's console is the next of TEXTS."""
    boots = []

    def fake(tree_path, image, topo, online, **kw):
        text = texts[len(boots)]
        log = tmp_path / f"boot{len(boots)}.log"
        log.write_text(text)
        boots.append((image.name, topo.cpus, kw["present"], kw["filter_glob"]))
        results = [(f"{k.SCALE_CASE}.{name}", "SKIP" if name in skipped else "PASS")
                   for name, _, _ in FIXTURES]
        return k.KunitResult(True, 3 - len(skipped), 0, len(skipped), "summary\n", [], [], log,
                             1.0, "tcg", results=results)
    monkeypatch.setattr(k, "run_kunit", fake)
    return boots


def test_run_scale_with_reference(monkeypatch, tmp_path, capsys):
    boots = _fake_kunit(monkeypatch, tmp_path, [console(0.01, 2.0), console(0.5, 1.0)])
    assert k.run_scale(Path("/tree"), Path("/b/ours"), 60, "ppc64le",
                       reference=Path("/b/reference"))
    assert boots == [("reference", 1920, 8, k.SCALE_CASE), ("ours", 1920, 8, k.SCALE_CASE)]
    out = capsys.readouterr().out
    assert ks.GROWTH_HEADING in out and "| 100 | 192/768/1920 | 2.00 | 1.00 |" in out


def test_run_scale_fails_on_a_skipped_fixture_and_on_x86(monkeypatch, tmp_path, capsys):
    _fake_kunit(monkeypatch, tmp_path, [console(drop={("smt8-16x15x8", b) for b in (100, 90, 50)})],
                skipped={"smt8-16x15x8"})
    assert not k.run_scale(Path("/tree"), Path("/b/ours"), 60, "ppc64le")
    out = capsys.readouterr().out
    assert f"is NR_CPUS 2048?): {k.SCALE_CASE}.smt8-16x15x8" in out
    assert "no probe counts for smt8-16x15x8 100%" in out
    with pytest.raises(LabError, match="--arch ppc64le"):
        k.run_scale(Path("/tree"), Path("/b/ours"), 60, "x86_64")


def test_scale_topology_is_the_largest_fixture():
    assert k.SCALE_TOPOLOGY.cpus == 1920 == FIXTURES[-1][1]
    assert isinstance(k.SCALE_TOPOLOGY, t.Topology)
