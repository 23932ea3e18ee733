"""virtme-ng command lines (no boot)."""

from pathlib import Path

from schedlab import topology as t
from schedlab import vm


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
