"""virtme-ng command lines (no boot)."""

from pathlib import Path

import pytest

from schedlab.core import topology as t
from schedlab.core import vm
from schedlab.core.util import LabError


def test_tcg_command_for_numa_preset():
    args = vm.vng_command(Path("/b/bzImage"), t.PRESETS["smt4-numa"], "nproc", kvm=False,
                          memory_mib=2048, online=None)
    assert args[1:3] == ["--run", "/b/bzImage"]
    assert "--disable-kvm" in args
    i = args.index("--cpus")
    assert args[i + 1] == "16,sockets=2,cores=2,threads=4"
    numa = [args[j + 1] for j, a in enumerate(args) if a == "--numa"]
    assert numa == ["1024M,cpus=0-7", "1024M,cpus=8-15"]
    assert args[-2:] == ["--exec", "nproc"]


def test_kvm_command_and_maxcpus():
    args = vm.vng_command(Path("/b/bzImage"), t.parse_topology("1x8x8"), "true", kvm=True,
                          online=2, kernel_args=["sched_verbose"])
    assert "--disable-kvm" not in args
    appended = [args[j + 1] for j, a in enumerate(args) if a == "--append"]
    assert appended == ["maxcpus=2", "sched_verbose"]
    assert "--numa" not in args


def test_single_threaded_tcg_only_under_tcg():
    topo = t.PRESETS["smt4"]
    single = "--qemu-opts=-accel tcg,thread=single"
    assert single in vm.vng_command(Path("/b/bzImage"), topo, "true", kvm=False,
                                    tcg_single=True)
    assert single not in vm.vng_command(Path("/b/bzImage"), topo, "true", kvm=False)
    assert not any("thread=single" in a for a in vm.vng_command(
        Path("/b/bzImage"), topo, "true", kvm=True, tcg_single=True))


def test_spawn_captures_the_console_and_stops_on_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path))
    monkeypatch.setattr(vm, "ensure_venv", lambda: tmp_path / "venv")
    log = tmp_path / "vm.log"
    res = vm._spawn(["sh", "-c", "echo booted; exit 3"], 30, log)
    assert (res.returncode, res.output, res.timed_out) == (3, "booted\n", False)
    res = vm._spawn(["sh", "-c", "echo hung; sleep 60"], 1, log)
    assert (res.returncode, res.output, res.timed_out) == (124, "hung\n", True)
    text = log.read_text()
    assert text.startswith("$ sh -c 'echo booted; exit 3'\nbooted\n\n[exit 3]\n")
    assert text.endswith("hung\n\n[exit -15, timed out]\n")


def _report(topo):
    lines = [f"nproc {topo.cpus}", f"possible 0-{topo.cpus - 1}", f"online 0-{topo.cpus - 1}",
             f"node 0 0-{topo.cpus - 1}"]
    lines += [f"cpu {c} {c - c % topo.threads}-{c - c % topo.threads + topo.threads - 1} "
              f"{topo.core_of(c)} {topo.package_of(c)}" for c in range(topo.cpus)]
    lines += [f"domain {i} {d}" for i, d in enumerate(topo.expected_domains())]
    return "\n".join(lines) + "\n"


def test_boot_and_check_reports_then_runs_the_command(monkeypatch, capsys):
    topo = t.PRESETS["smt4"]
    seen = {}

    def boot(image, topo_, cmd, **kw):
        seen.update(cmd=cmd, **kw)
        return vm.VmResult(7, _report(topo) + vm.CHECK_MARK + "\nhello\n", "tcg", 1.5)
    monkeypatch.setattr(vm, "boot", boot)
    assert vm.boot_and_check(Path("/b/bzImage"), topo, ["echo", "hello"], online=None) == 7
    assert "vm-command.sh" in seen["cmd"] and vm.CHECK_MARK in seen["cmd"]
    assert seen["cmd"].endswith("'echo hello'")
    out = capsys.readouterr().out
    assert out.startswith("hello\n") and "topology check passed (smt4)" in out
    # A guest that disagrees: status 3; no report at all: an error.
    monkeypatch.setattr(vm, "boot", lambda *a, **k: vm.VmResult(
        0, _report(t.PRESETS["smt8"]) + vm.CHECK_MARK + "\n", "tcg", 1.0))
    assert vm.boot_and_check(Path("/b/bzImage"), topo) == 3
    monkeypatch.setattr(vm, "boot", lambda *a, **k: vm.VmResult(1, "panic\n", "tcg", 1.0))
    with pytest.raises(LabError, match="did not report its topology"):
        vm.boot_and_check(Path("/b/bzImage"), topo)


QEMU_ABORT = ("qemu-system-x86_64: warning: This family of AMD CPU doesn't support "
              "hyperthreading(4)\nqemu-system-x86_64: ../../hw/pci/msix.c:218: "
              "msix_table_mmio_write: Assertion `addr + size <= dev->msix_entries_nr * "
              "PCI_MSIX_ENTRY_SIZE' failed.\n")


def test_qemu_fault_is_the_emulator_aborting_only():
    assert vm.qemu_fault(vm.VmResult(134, QEMU_ABORT, "", 7.0)).startswith(
        "../../hw/pci/msix.c:218: msix_table_mmio_write: Assertion")
    # A guest that failed, or printed such a line and exited 0, is not one.
    assert vm.qemu_fault(vm.VmResult(1, "Kernel panic - not syncing\n", "", 3.0)) == ""
    assert vm.qemu_fault(vm.VmResult(0, QEMU_ABORT, "", 3.0)) == ""
    assert vm.qemu_fault(vm.VmResult(124, QEMU_ABORT, "", 3.0, timed_out=True)) == ""


def test_boot_retries_once_after_a_qemu_fault(tmp_path, monkeypatch, capsys):
    image = tmp_path / "bzImage"
    image.write_bytes(b"x")
    monkeypatch.setattr(vm, "kvm_works", lambda image: (False, "no /dev/kvm"))
    monkeypatch.setattr(vm, "vng_command", lambda *a, **k: ["vng"])
    runs = [vm.VmResult(134, QEMU_ABORT, "", 7.0), vm.VmResult(0, "ok\n", "", 20.0)]
    monkeypatch.setattr(vm, "_spawn", lambda args, timeout, log: runs.pop(0))
    res = vm.boot(image, t.PRESETS["smt4"], "true", log=tmp_path / "vm.log")
    assert (res.returncode, res.output, runs) == (0, "ok\n", [])
    assert "qemu aborted (../../hw/pci/msix.c:218" in capsys.readouterr().out
    # Twice in a row: the second result is the answer, no third boot.
    runs[:] = [vm.VmResult(134, QEMU_ABORT, "", 7.0), vm.VmResult(134, QEMU_ABORT, "", 7.0),
               vm.VmResult(0, "never\n", "", 1.0)]
    assert vm.boot(image, t.PRESETS["smt4"], "true", log=tmp_path / "vm.log").returncode == 134
    assert len(runs) == 1
    # A guest failure is not retried.
    runs[:] = [vm.VmResult(1, "panic\n", "", 3.0), vm.VmResult(0, "never\n", "", 1.0)]
    assert vm.boot(image, t.PRESETS["smt4"], "true", log=tmp_path / "vm.log").returncode == 1
    assert len(runs) == 1


def test_boot_retries_a_hung_boot_once_only_when_asked(tmp_path, monkeypatch, capsys):
    image = tmp_path / "bzImage"
    image.write_bytes(b"x")
    monkeypatch.setattr(vm, "kvm_works", lambda image: (False, "no /dev/kvm"))
    monkeypatch.setattr(vm, "vng_command", lambda *a, **k: ["vng"])
    hung = vm.VmResult(124, "", "", 300.0, timed_out=True)
    runs = [hung, vm.VmResult(0, "ok\n", "", 20.0)]
    monkeypatch.setattr(vm, "_spawn", lambda args, timeout, log: runs.pop(0))
    res = vm.boot(image, t.PRESETS["smt4"], "true", timeout=300, retry_hung=True,
                  log=tmp_path / "vm.log")
    assert (res.returncode, runs) == (0, [])
    assert "the VM hung (not done within 5m00s)" in capsys.readouterr().out
    # Hung twice: the second is the answer.
    runs[:] = [hung, hung, vm.VmResult(0, "never\n", "", 1.0)]
    with pytest.raises(LabError, match="did not finish"):
        vm.boot(image, t.PRESETS["smt4"], "true", timeout=300, retry_hung=True,
                log=tmp_path / "vm.log")
    assert len(runs) == 1
    # Not asked: no second boot.
    runs[:] = [hung, vm.VmResult(0, "never\n", "", 1.0)]
    with pytest.raises(LabError, match="did not finish"):
        vm.boot(image, t.PRESETS["smt4"], "true", timeout=300, log=tmp_path / "vm.log")
    assert len(runs) == 1
