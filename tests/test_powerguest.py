"""The kit in the pseries guest: the initramfs's files, the results back
from the console, the SMT sweep's labels and checks."""

import base64
import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from schedlab.core import pseries as ps
from schedlab.core import topology as t
from schedlab.core.util import LabError, PACKAGE
from schedlab.kit import hw
from schedlab.kit import powerguest as pg
from schedlab.kit import rehearsal
from tests.test_pseries import read_newc

POWER = rehearsal.RehearsalRequest(arch="ppc64le", smt_modes=(8, 4, 2))
PATHS = rehearsal.GuestPaths("/lab", "python3", "/work", "/kit/config")


def test_write_cpio_streams_what_cpio_newc_holds(tmp_path):
    f = tmp_path / "big"
    f.write_bytes(b"x" * 4099)
    entries = [("a", stat.S_IFDIR | 0o755, b"", 0), ("a/f", stat.S_IFREG | 0o644, f, 0),
               ("a/l", stat.S_IFLNK | 0o777, b"f", 0)]
    with open(tmp_path / "out", "wb") as out:
        ps.write_cpio(out, entries)
    blob = (tmp_path / "out").read_bytes()
    assert blob == ps.cpio_newc([(p, m, d.read_bytes() if isinstance(d, Path) else d, r)
                                 for p, m, d, r in entries])
    assert [(n, d) for n, _, d, _, _ in read_newc(blob)] == [("a", b""), ("a/f", b"x" * 4099),
                                                              ("a/l", b"f")]


def test_a_root_becomes_entries_parents_first_links_kept(tmp_path):
    root = tmp_path / "root"
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/tool").write_text("#!/bin/sh\n")
    os.chmod(root / "usr/bin/tool", 0o755)
    (root / "lib64").symlink_to("/lib/powerpc64le-linux-gnu")   # absolute, for the guest
    (root / "bin").symlink_to("usr/bin")        # a link to a folder: not followed
    got = {e[0]: e for e in pg.tree_entries(root, "")}
    order = [e[0] for e in pg.tree_entries(root, "")]
    assert order.index("usr") < order.index("usr/bin") < order.index("usr/bin/tool")
    assert got["usr/bin/tool"][1] == stat.S_IFREG | 0o755
    assert got["lib64"][1] == stat.S_IFLNK | 0o777 and got["lib64"][2] == \
        b"/lib/powerpc64le-linux-gnu"
    assert got["bin"][2] == b"usr/bin" and "bin/tool" not in got
    under = [e[0] for e in pg.tree_entries(root, "work")]
    assert under[0] == "work" and "work/usr/bin/tool" in under


def test_fixups_make_what_maintainer_scripts_would(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "usr/share/doc/bash").mkdir(parents=True)
    pg.fixups(tmp_path)
    assert os.readlink(tmp_path / "bin/sh") == "dash"
    assert os.readlink(tmp_path / "usr/bin/awk") == "mawk"
    assert not (tmp_path / "usr/share/doc").exists()
    assert (tmp_path / "proc").is_dir() and (tmp_path / pg.WORK).is_dir()
    pg.fixups(tmp_path)     # again: nothing to do


def _tar(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_results_that_do_not_unpack_leave_the_last_ones(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out/kept.txt").write_text("x")
    with pytest.raises(LabError, match="do not unpack"):
        pg.unpack_results(_tar({"./a": b"1"})[:-20], tmp_path / "out")
    assert (tmp_path / "out/kept.txt").read_text() == "x"


def test_results_come_back_from_the_console_among_kernel_lines(tmp_path):
    blob = _tar({"./results/hw-tp@smt8/report.txt": b"report\n", "./hw/run.json": b"{}"})
    text = base64.b64encode(blob).decode()
    lines = [text[i:i + 76] for i in range(0, len(text), 76)]
    console = ("boot\r\n" + pg.RESULTS_BEGIN + "\r\n" + "\r\n".join(lines[:1])
               + "\r\n[  12.3] rcu: INFO: a kernel line\r\n" + "\r\n".join(lines[1:])
               + "\r\n" + pg.RESULTS_END + "\r\nreboot: Power down\r\n")
    data = pg.results_from(console)
    assert data == blob
    pg.unpack_results(data, tmp_path / "out")
    assert (tmp_path / "out/results/hw-tp@smt8/report.txt").read_text() == "report\n"
    assert pg.results_from("no marks") is None
    assert pg.results_from(pg.RESULTS_BEGIN + "\nAAAA\n") is None     # cut off


def test_the_init_script_prints_the_marks_the_host_reads():
    init = (PACKAGE / pg.INIT_SCRIPT).read_text()
    assert pg.RESULTS_BEGIN in init and pg.RESULTS_END in init
    assert f"/{pg.RUN}" in init and f"-C /{pg.WORK}" in init
    for fs in ("debugfs", "tracefs", "bpf", "devtmpfs"):
        assert f"-t {fs} " in init
    assert init.rstrip().endswith("poweroff -f")


def test_the_kit_guest_runs_tcg_in_one_thread():
    args = ps.TARGET.qemu_command(Path("/b/vmlinux"), t.PRESETS["smt8"], [],
                                  single_thread=True)
    assert args[args.index("-accel") + 1] == "tcg,thread=single"
    plain = ps.TARGET.qemu_command(Path("/b/vmlinux"), t.PRESETS["smt8"], [])
    assert plain[plain.index("-accel") + 1] == "tcg"


def test_smt_modes_default_to_halving_and_bad_ones_are_refused():
    assert rehearsal.smt_modes(None, "ppc64le", "smt8") == (8, 4, 2)
    assert rehearsal.smt_modes(None, "ppc64le", "smt4") == (4, 2)
    assert rehearsal.smt_modes("4,8", "ppc64le", "smt8") == (4, 8)
    assert rehearsal.smt_modes(None, "x86_64", "smt8") == ()
    for bad, why in (("1", "2 threads a core or more"), ("16", "have 8"),
                     ("8,8", "repeat"), ("8,x", "comma-separated")):
        with pytest.raises(LabError, match=why):
            rehearsal.smt_modes(bad, "ppc64le", "smt8")
    with pytest.raises(LabError, match="pseries guest"):
        rehearsal.smt_modes("4", "x86_64", "smt8")


def test_each_smt_mode_is_set_then_the_kit_runs_under_its_label():
    s = rehearsal.guest_script(POWER, PATHS, True, "/kit/schbench")
    assert s.startswith("cd /lab && export SCHEDLAB_WORK=/work PYTHONPATH=src "
                        "SCHEDLAB_KERNEL_CONFIG=/kit/config")
    at = [s.index(f"ppc64_cpu --smt={m} && python3 -m schedlab hw ") for m in (8, 4, 2)]
    assert at == sorted(at)
    for m in (8, 4, 2):
        run = s[s.index(f"--smt={m} "):]
        run = run[:run.index("}")]
        assert f"--label smt{m};" in run and f"@@rehearsal smt{m}.hw-rc=$?" in run
        assert "--bench-dir /kit/schbench" in run and "--fresh" in run
    marks = rehearsal.parse_marks("@@rehearsal smt4.hw-rc=75\n@@rehearsal smt4.left=\n")
    assert marks == {"smt4.hw-rc": "75", "smt4.left": ""}
    assert "@@rehearsal smt4.online=$(cat /sys/devices/system/cpu/online)" in s
    assert "online=" not in rehearsal.guest_script(rehearsal.RehearsalRequest(), PATHS)
    assert [rehearsal.online_count(x) for x in ("0-3,8-11", "0", "", "0-x")] == [8, 1, 0, 0]


def _report(arms):
    rows = "\n".join(f"| {a} | x | none | 1 of 1 |" for a in arms)
    return f"{rows}\n| stress-100 | cpu busy (%) |"


def test_every_mode_of_every_boot_is_checked_apart():
    online = {8: "0-15", 4: "0-3,8-11", 2: "0-1,8-9"}
    good = {k: {f"smt{m}.{n}": v for m in (8, 4, 2)
                for n, v in (("hw-rc", rc), ("swb_state", "4"), ("left", ""),
                             ("online", online[m]))}
            for k, rc in (("kit", "75"), ("stock", "0"))}
    probes = [a for a in POWER.arms if a != "stock"]
    reports = {f"{p}@smt{m}": _report(POWER.arms if p == "hw-tp" else probes)
               for m in (8, 4, 2) for p in ("hw-tp", "hw")}
    assert rehearsal.check(good, reports, POWER) == []
    bad = {k: dict(v) for k, v in good.items()}
    bad["kit"]["smt4.hw-rc"] = "1"
    bad["kit"]["smt2.online"] = "0-15"      # ppc64_cpu did nothing
    del bad["stock"]["smt2.left"]
    missing = dict(reports)
    del missing["hw@smt2"]
    problems = rehearsal.check(bad, missing, POWER)
    assert problems == [
        "the kit exited on the kit kernel (smt4) with status 1, not 75",
        "CPUs online on the kit kernel (smt2): 0-15, not 4 (the SMT mode did not take)",
        "left running in the guest on the stock kernel (smt2): (no mark)",
        "the probes (smt2) pass: no report"]
    # The passes of each mode count the CPUs that mode has online.
    assert [(k.prefix, n) for k, n in rehearsal.passes(POWER)] == [
        ("hw-tp@smt8", 16), ("hw@smt8", 16), ("hw-tp@smt4", 8), ("hw@smt4", 8),
        ("hw-tp@smt2", 4), ("hw@smt2", 4)]


def test_the_switch_is_checked_in_each_mode(tmp_path):
    for label, old in (("smt8", 2.9), ("smt4", 0.2)):
        for arm, v in (("swb-v7.3", old), ("series", 0.4)):
            d = tmp_path / f"{hw.PROBE_PASS.labelled(label).prefix}-{arm}"
            d.mkdir(parents=True)
            (d / "run-stress-100-0.json").write_text(
                '{"workload": "stress-100", "metrics": {"%s": {"value": %s}}}'
                % (rehearsal.SWITCH_METRIC, v))
    assert rehearsal.check_switch(rehearsal.switch_values(tmp_path, "stress-100", "smt8"),
                                  POWER) == []
    assert "did not take effect" in rehearsal.check_switch(
        rehearsal.switch_values(tmp_path, "stress-100", "smt4"), POWER)[0]


def test_bpftrace_attaches_by_kprobe_where_no_trampoline_can():
    ppc = "CONFIG_FUNCTION_TRACER=y\nCONFIG_DEBUG_INFO_BTF=y\n"
    assert hw.attach_method(ppc) == "kprobe"
    assert hw.attach_method(ppc + "CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS=y\n") == "auto"
    assert hw.attach_method("") == "auto"       # no config read: run-plan.sh decides


def test_a_resume_under_another_smt_mode_is_refused(tmp_path, monkeypatch):
    from schedlab.measuring import resume
    monkeypatch.setattr(hw, "online_cpus", lambda: "0-15")
    arms = [a for a in hw.KIT_ARMS if a.name in ("series", "swb-v7.3")]
    req = hw.request(arms, 3, 1, 3, bench=["stress-100"])
    assert req.record()["cpus"] == "0-15"
    record = resume.start(tmp_path, "ab", req.record(), False, [])
    record.finished = [("series", 0)]
    resume.write(tmp_path, record)
    monkeypatch.setattr(hw, "online_cpus", lambda: "0-3,8-11")
    again = hw.request(arms, 3, 1, 3, bench=["stress-100"])
    with pytest.raises(LabError, match="cpus"):
        resume.start(tmp_path, "ab", again.record(), False, [])


def test_the_pseries_rehearsal_refuses_what_it_cannot_run_before_a_build(monkeypatch):
    from schedlab.core.spec import TreeSpec
    monkeypatch.setattr(TreeSpec, "resolve", lambda self: pytest.fail("no tree before"))
    for req, why in ((rehearsal.RehearsalRequest(arch="ppc64le", smt_modes=(8, 1)), "threads"),
                     (rehearsal.RehearsalRequest(arch="ppc64le", smt_modes=(8,),
                                                 bench=("schbench-m2-t4",)), "schbench"),
                     (rehearsal.RehearsalRequest(arch="ppc64le", smt_modes=(8,),
                                                 bench_dir=Path("/s")), "schbench"),
                     (rehearsal.RehearsalRequest(smt_modes=(4,)), "pseries guest")):
        with pytest.raises(LabError, match=why):
            rehearsal.run(req)


@pytest.mark.parametrize("argv, why", [
    (["hw", "--arch", "ppc64le"], "go with --rehearse"),
    (["hw", "--switch-proof", "--arch", "ppc64le"], "go with --rehearse"),
    (["hw", "--smt-modes", "4"], "go with --rehearse"),
    (["hw", "--rehearse", "--label", "x"], "drop --label"),
    (["hw", "--rehearse", "--smt-modes", "4"], "pseries guest")])
def test_the_pseries_options_are_refused_out_of_place(argv, why, capsys, monkeypatch):
    from schedlab import cli
    from schedlab.core.spec import TreeSpec
    monkeypatch.setattr(TreeSpec, "resolve", lambda self: pytest.fail("no tree before"))
    assert cli.main(argv) != 0
    assert why in capsys.readouterr().err


def test_the_pseries_probe_kernel_has_bpf_and_what_the_userspace_needs():
    from schedlab.core import build as b
    frags = [f.name for f in b.config_fragments("probe", b.get_arch("ppc64le"))]
    assert frags == ["ppc64le.config", "lab.config", "trace.config", "probe.config",
                     "pseries-kit.config"]
    kit = b.parse_config((b.CONFIG_DIR / "pseries-kit.config").read_text())
    for opt in ("CONFIG_NET", "CONFIG_UNIX", "CONFIG_INET", "CONFIG_TMPFS", "CONFIG_JUMP_LABEL"):
        assert kit[opt] == "y"
    # the lab kernel stays small: no BPF tools on it
    assert [f.name for f in b.config_fragments("lab", b.get_arch("ppc64le"))] == [
        "ppc64le.config", "lab.config", "pseries-cpus.config"]


def test_the_packages_are_fetched_with_the_log_where_none_was(tmp_path, monkeypatch):
    # The rehearsal fetches them before anything else made its folder.
    from types import SimpleNamespace
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(pg.aptmirror, "machine_mirror",
                        lambda: SimpleNamespace(suites=["bookworm"], origin="test",
                                                uris=["http://mirror.invalid/debian"],
                                                signed_by=""))
    asked = []

    def fake_run(argv, log=None, check=True, **kw):
        asked.append(argv[-1] if argv[-1] != "update" else "update")
        archives = tmp_path / "cache/schedlab/apt-ppc64el/cache/archives"
        for p in pg.PACKAGES:
            (archives / f"{p}_1_ppc64el.deb").write_text("")
        return SimpleNamespace(returncode=0)
    monkeypatch.setattr(pg, "run", fake_run)
    log = tmp_path / "new/folder/userspace.log"
    debs = pg.fetch_debs(log)
    assert log.parent.is_dir() and asked[0] == "update" and asked[-1] == pg.PACKAGES[-1]
    assert len(debs) == len(pg.PACKAGES)
