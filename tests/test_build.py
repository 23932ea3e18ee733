"""Config fragments: parsing, merging, mismatch detection, ccache environment."""

from pathlib import Path

import pytest

from schedlab.core import build as b
from schedlab.core.util import LabError


def test_parse_config_set_unset_and_strings():
    cfg = b.parse_config('CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C="x y"\n'
                         "CONFIG_D=256\n# plain comment\nCONFIG_E=n\n")
    assert cfg == {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_C": '"x y"',
                   "CONFIG_D": "256", "CONFIG_E": "n"}


def test_later_fragments_override_earlier():
    merged = b.merge_fragments(["CONFIG_A=y\nCONFIG_B=y\n", "# CONFIG_A is not set\n"])
    assert merged == {"CONFIG_A": "n", "CONFIG_B": "y"}


def test_mismatches():
    requested = {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_N": "256", "CONFIG_S": '"x"'}
    final = {"CONFIG_A": "y", "CONFIG_N": "64", "CONFIG_S": "x"}
    assert b.config_mismatches(requested, final) == {"CONFIG_N": ("256", "64")}


def test_lab_config_has_what_the_issue_asks():
    frags = b.config_fragments("lab", b.get_arch("x86_64"))
    merged = b.merge_fragments([f.read_text() for f in frags])
    for sym in ("SMP", "SCHED_SMT", "SCHED_MC", "NUMA", "FAIR_GROUP_SCHED", "CGROUPS",
                "CPUSETS", "SCHEDSTATS", "DEBUG_FS", "HOTPLUG_CPU", "KUNIT", "9P_FS",
                "SERIAL_8250_CONSOLE"):
        assert merged.get("CONFIG_" + sym) == "y", sym
    assert merged["CONFIG_NR_CPUS"] == "256"
    assert merged["CONFIG_KUNIT_DEFAULT_ENABLED"] == "n"


def test_probe_and_debug_extend_lab():
    arch = b.get_arch("x86_64")
    lab = [f.name for f in b.config_fragments("lab", arch)]
    debug = [f.name for f in b.config_fragments("debug", arch)]
    assert debug[:-1] == [n for n in lab if n != "trace.config"]
    assert b.merge_fragments([f.read_text() for f in b.config_fragments("debug", arch)])[
        "CONFIG_PROVE_LOCKING"] == "y"


def test_lab_and_probe_differ_in_the_kunit_option_alone():
    """One full build serves both: the second is ccache hits (CI's cold budget)."""
    arch = b.get_arch("x86_64")
    lab = b.merge_fragments([f.read_text() for f in b.config_fragments("lab", arch)])
    probe = b.merge_fragments([f.read_text() for f in b.config_fragments("probe", arch)])
    assert lab["CONFIG_DEBUG_INFO_BTF"] == probe["CONFIG_DEBUG_INFO_BTF"] == "y"
    diff = {k for k in set(lab) | set(probe) if lab.get(k) != probe.get(k)}
    assert diff == {"CONFIG_SCHED_FAIR_LB_KUNIT_TEST"}


def test_icount_is_the_probe_config_with_jump_label():
    """Under icount (single-thread TCG) the guest may patch its text: static
    keys as distributions have them, the rest the probe kernel's."""
    arch = b.get_arch("x86_64")
    probe = b.merge_fragments([f.read_text() for f in b.config_fragments("probe", arch)])
    icount = b.merge_fragments([f.read_text() for f in b.config_fragments("icount", arch)])
    diff = {k for k in set(probe) | set(icount) if probe.get(k) != icount.get(k)}
    assert diff == {"CONFIG_JUMP_LABEL"} and icount["CONFIG_JUMP_LABEL"] == "y"
    from schedlab.measuring.measure import probe_build
    assert probe_build("base", accel="icount").config == "icount"
    assert probe_build("base").config == "probe"


def test_ppc64le_lab_is_the_initramfs_guest():
    """No vng or trace fragment (a cold build half as long), what the initramfs needs."""
    arch = b.get_arch("ppc64le")
    frags = [f.name for f in b.config_fragments("lab", arch)]
    assert frags == ["ppc64le.config", "lab.config", "pseries-cpus.config"]
    merged = b.merge_fragments([(b.CONFIG_DIR / n).read_text() for n in frags])
    # Room for the 1920-CPU fixture of 'kunit --scale', over lab.config's 256.
    assert merged["CONFIG_NR_CPUS"] == "2048"
    for sym in ("BLK_DEV_INITRD", "DEVTMPFS", "HVC_CONSOLE", "SCHED_SMT", "NUMA",
                "DEBUG_FS", "SCHED_FAIR_LB_KUNIT_TEST"):
        assert merged.get("CONFIG_" + sym) == "y", sym
    assert "CONFIG_DEBUG_INFO_BTF" not in merged
    assert [f.name for f in b.config_fragments("debug", arch)][-1] == "debug.config"


def test_unknown_config_and_arch():
    with pytest.raises(LabError, match="unknown config"):
        b.config_fragments("fast", b.get_arch("x86_64"))
    with pytest.raises(LabError, match="unknown arch"):
        b.get_arch("riscv")


def test_make_args_cross_and_ccache(monkeypatch):
    monkeypatch.setattr(b.shutil, "which", lambda name: "/usr/bin/" + name)
    args = b.make_args(b.get_arch("ppc64le"), Path("/w/b"))
    assert "ARCH=powerpc" in args and "CROSS_COMPILE=powerpc64le-linux-gnu-" in args
    assert "CC=ccache powerpc64le-linux-gnu-gcc" in args
    assert "O=/w/b" in args


def test_ccache_env_is_folder_independent(monkeypatch, tmp_path):
    monkeypatch.setattr(b.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path / "work"))
    env = b.ccache_env()
    assert env["CCACHE_NOHASHDIR"] == "1"
    assert env["CCACHE_BASEDIR"] == str((tmp_path / "work").resolve())
    assert env["KBUILD_BUILD_TIMESTAMP"]


def test_a_build_of_the_same_commit_and_fragments_is_reused(tmp_path):
    import json

    from schedlab.core import build as b
    arch = b.get_arch(None)
    image = tmp_path / arch.image_path
    image.parent.mkdir(parents=True)
    image.write_bytes(b"kernel")
    (tmp_path / ".schedlab").mkdir()
    info = {"commit": "c1", "config": "probe", "arch": arch.name, "release": "7.3.4-gc1",
            "fragments_sha": b._fragments_sha("probe", arch)}
    (tmp_path / ".schedlab" / "build.json").write_text(json.dumps(info))
    done = b._up_to_date(tmp_path, "c1", "probe", arch)
    assert done and done.release == "7.3.4-gc1" and done.image == image
    assert b._up_to_date(tmp_path, "c2", "probe", arch) is None       # another commit
    assert b._up_to_date(tmp_path, "c1", "lab", arch) is None         # another config
    info["fragments_sha"] = "0" * 16                                  # fragments edited
    (tmp_path / ".schedlab" / "build.json").write_text(json.dumps(info))
    assert b._up_to_date(tmp_path, "c1", "probe", arch) is None


def test_config_fragments_ship_in_the_package():
    from schedlab.core import util
    assert b.CONFIG_DIR == util.PACKAGE / "configs"
    for f in b.config_fragments("probe", b.get_arch("x86_64")):
        assert f.parent == b.CONFIG_DIR


def test_running_config_prefers_proc_then_boot(monkeypatch, tmp_path):
    import gzip
    import os
    from schedlab.core import hostbuild as hb
    proc = tmp_path / "config.gz"
    monkeypatch.setattr(hb, "PROC_CONFIG", proc)
    monkeypatch.setattr(hb, "BOOT_DIR", tmp_path)
    assert hb.running_config_text() == ""
    with pytest.raises(LabError, match="--host-config FILE"):
        hb.host_config_source(None)
    (tmp_path / f"config-{os.uname().release}").write_text("CONFIG_BOOT=y\n")
    assert hb.running_config_text() == "CONFIG_BOOT=y\n"
    proc.write_bytes(gzip.compress(b"CONFIG_PROC=y\n"))
    assert hb.running_config_text() == "CONFIG_PROC=y\n"
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path / "work"))
    src = hb.host_config_source("running")
    assert src.read_text() == "CONFIG_PROC=y\n" and src.is_relative_to(tmp_path / "work")
    assert hb.host_config_source(str(proc)) == proc
    with pytest.raises(LabError, match="no config file"):
        hb.host_config_source(str(tmp_path / "none"))


def test_run_make_logs_and_fails_with_the_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path / "work"))
    log = tmp_path / "build.log"
    log.write_text("before\n")
    ok = ["sh", "-c", "echo '  CC      kernel/sched/fair.o'"]
    assert b.run_make(ok, tmp_path, log, "make x", quiet=True) >= 0
    bad = ["sh", "-c", "echo 'fair.c:1: error: nope'; exit 2"]
    with pytest.raises(LabError, match=r"make y failed \(status 2\)(.|\n)*error: nope"):
        b.run_make(bad, tmp_path, log, "make y")
    text = log.read_text()
    assert text.startswith("before\n\n$ sh -c ")
    assert "kernel/sched/fair.o" in text and "\n$ sh -c 'echo '\"'\"'fair.c" in text


def test_a_host_kernel_is_named_by_its_variant_and_sources():
    from schedlab.core import hostbuild as hb
    edits = hb.host_config_edits("patched", "0123456789abcdef")
    i = edits.index("LOCALVERSION")
    assert edits[i + 1] == "-schedlab-patched-01234567"
    assert edits[edits.index("--disable") + 1] == "LOCALVERSION_AUTO"


def test_a_build_waiting_for_the_tree_leaves_the_running_builds_log(tmp_path, monkeypatch):
    import contextlib

    logs = tmp_path / "logs"
    logs.mkdir()
    monkeypatch.setattr(b, "log_dir", lambda: logs)
    monkeypatch.setattr(b, "build_dir_for", lambda *a: tmp_path / "bdir")
    log = logs / "build-t-base-lab-x86_64.log"
    log.write_text("the running build's output\n")
    seen = []

    class Tree:
        key, path = "t", tmp_path

        @contextlib.contextmanager
        def locked(self, what):
            seen.append(log.read_text())     # what the log holds when the lock is ours
            yield

        def checkout(self, commit):
            raise LabError("stop here")

    with pytest.raises(LabError, match="stop here"):
        b.build(Tree(), "base", "c1")
    assert seen == ["the running build's output\n"] and log.read_text() == ""
