"""Boot a built kernel with virtme-ng on a simulated topology and run a command.

The host's root filesystem is shared read-only, so tools installed on the
host run in the guest.  KVM is used only when a short probe boot proves that
it works on this machine (nested, paravirtual KVM can hang a kernel during
decompression); otherwise TCG.  Every VM is stopped on success, failure,
timeout and Ctrl-C: virtme-ng and qemu run in their own process group, which
is killed on the way out.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from schedlab.core import topology as topomod
from schedlab.core.deps import ensure_venv, venv_bin
from schedlab.core.util import (LabError, eprint, fmt_secs, log_dir, package_file, run_logged, say,
                                work_dir)

KVM_PROBE_TIMEOUT = 40
# Ends the topology probe's report in the console (guest/vm-command.sh).
CHECK_MARK = "@@schedlab-topology-end@@"
# Accelerators a boot can ask for: auto is KVM where it works, else TCG.
ACCELS = ("auto", "icount")
ICOUNT_OPTS = "-icount shift=0,sleep=off"


@dataclass
class VmResult:
    returncode: int
    output: str
    accel: str
    seconds: float
    timed_out: bool = False


def vng_command(image: Path, topo: topomod.Topology, cmd: str, *, kvm: bool,
                memory_mib: int = 2048, online: Optional[int] = None,
                kernel_args: Sequence[str] = (), verbose: bool = False,
                rwdirs: Sequence[Path] = (), tcg_single: bool = False,
                icount: bool = False, qemu_extra: str = "") -> List[str]:
    """The virtme-ng command line for one boot (pure: tested without booting).

    tcg_single: under TCG, run all vCPUs in one host thread.  Needed when the
    guest patches its own text while other vCPUs run it (bpftrace attaching
    fentry or kprobes): with multi-threaded TCG a 7.3 guest here jumps to
    address 0 at the patched call sites within seconds (docs/tools.md).
    icount: single-thread TCG whose guest clock advances one ns per
    instruction of the running vCPU (qemu -icount shift=0,sleep=off), for
    the instruction counts of short functions; never KVM.
    qemu_extra: more qemu options with icount (a TCG plugin: insncount.py).
    """
    args = [str(venv_bin("vng")), "--run", str(image), "--disable-microvm",
            "--cpus", topomod.smp_arg(topo), "--memory", f"{memory_mib}M"]
    if icount:
        # Every vCPU reads the one virtual clock: the TSCs are in sync, and
        # without tsc=reliable a large guest marks them unstable and falls
        # back to HPET, whose 10 ns steps count no single instruction.
        opts = f"-accel tcg,thread=single {ICOUNT_OPTS}" + (f" {qemu_extra}" if qemu_extra else "")
        args += ["--disable-kvm", f"--qemu-opts={opts}", "--append", "tsc=reliable"]
    elif not kvm:
        args.append("--disable-kvm")
        if tcg_single:
            args.append("--qemu-opts=-accel tcg,thread=single")
    for spec in topomod.numa_node_specs(topo, memory_mib):
        args += ["--numa", spec]
    for karg in list(topomod.kernel_cpu_args(topo, online)) + list(kernel_args):
        args += ["--append", karg]
    for d in rwdirs:
        args += ["--rwdir", str(d)]
    if verbose:
        args.append("--verbose")
    args += ["--exec", cmd]
    return args


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _spawn(args: List[str], timeout: float, log: Path) -> VmResult:
    """Run virtme-ng with the lab's runner; its console output is returned
    (and appended to log).  A timeout gives status 124 and timed_out."""
    ensure_venv()   # virtme-ng lives in the project venv (a fresh clone has none yet)
    env = dict(os.environ)
    # vng runs virtme-run and friends from PATH: put the venv first.
    env["PATH"] = f"{venv_bin('vng').parent}:{env.get('PATH', '/usr/bin:/bin')}"
    done = run_logged(args, log, timeout=timeout, env=env, append=True, capture=True,
                      footer=True)
    return VmResult(124 if done.timed_out else done.returncode, done.output, "",
                    done.seconds, done.timed_out)


_QEMU_FAULT = re.compile(r"^qemu-system-\S+: (\S+: \S+: Assertion .* failed\.)$", re.M)


def qemu_fault(res: VmResult) -> str:
    """The assertion qemu aborted on, when the emulator itself failed (not a
    guest that exited non-zero); "" otherwise."""
    if res.returncode == 0 or res.timed_out:
        return ""
    m = _QEMU_FAULT.search(res.output)
    return m.group(1) if m else ""


def kvm_works(image: Path) -> tuple[bool, str]:
    """Whether KVM can boot this kernel here; the answer is kept per host boot."""
    if not os.path.exists("/dev/kvm"):
        return False, "no /dev/kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is not accessible"
    if os.environ.get("SCHEDLAB_ACCEL") in ("tcg", "kvm"):
        return os.environ["SCHEDLAB_ACCEL"] == "kvm", "SCHEDLAB_ACCEL"
    cache = work_dir() / "kvm-probe.json"
    try:
        known = json.loads(cache.read_text())
        if known.get("boot_id") == _boot_id():
            return bool(known["kvm"]), known["reason"] + " (probed earlier this host boot)"
    except (OSError, ValueError, KeyError):
        pass
    say(f"  probing KVM with a 1-CPU boot (at most {KVM_PROBE_TIMEOUT}s)")
    topo = topomod.Topology(1, 1, 1)
    res = _spawn(vng_command(image, topo, "echo schedlab-kvm-ok", kvm=True, memory_mib=512),
                 KVM_PROBE_TIMEOUT, log_dir() / "vm.log")
    ok = res.returncode == 0 and "schedlab-kvm-ok" in res.output
    if ok:
        reason = f"a probe boot under KVM worked in {fmt_secs(res.seconds)}"
    elif res.timed_out:
        reason = f"a probe boot under KVM hung for {KVM_PROBE_TIMEOUT}s"
    elif "kvm" in res.output.lower():
        first = next((ln for ln in res.output.splitlines() if "kvm" in ln.lower()), "")
        reason = f"a probe boot under KVM failed: {first.strip()[:160]}"
    else:
        # Not a verdict on KVM (the tooling itself may have failed): not kept.
        return False, f"a probe boot under KVM failed (status {res.returncode})"
    work_dir().mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"boot_id": _boot_id(), "kvm": ok, "reason": reason}) + "\n")
    return ok, reason


def boot(image: Path, topo: topomod.Topology, cmd: str, *, online: Optional[int] = None,
         memory_mib: int = 2048, kernel_args: Sequence[str] = (), timeout: float = 900,
         verbose: bool = False, quiet: bool = False,
         rwdirs: Sequence[Path] = (), tcg_single: bool = False,
         icount: bool = False, log: Optional[Path] = None,
         qemu_extra: str = "", retry_hung: bool = False) -> VmResult:
    """Boot IMAGE and run CMD; the console goes to LOG (work/logs/vm.log
    unless given: a caller whose VM may run beside another passes its own).
    qemu_extra: more qemu options, with icount only.  retry_hung: a boot
    that does not finish within TIMEOUT is stopped and booted once more."""
    if qemu_extra and not icount:
        raise LabError("vm.boot: extra qemu options are for icount boots")
    log = log or log_dir() / "vm.log"
    if not image.is_file():
        raise LabError(f"no kernel image at {image}: build it first (./schedlab build)")
    if icount:
        kvm, why = False, f"asked for: {ICOUNT_OPTS}, one host thread"
        accel = "icount"
    else:
        kvm, why = kvm_works(image)
        accel = "kvm" if kvm else ("tcg-single" if tcg_single else "tcg")
    if not quiet:
        say(f"  accelerator: {accel} ({why})")
        say(f"  topology {topo.name or topo.spec()}: {topo.describe()}"
            + (f", {online} online (maxcpus)" if online and online < topo.cpus else ""))
    args = vng_command(image, topo, cmd, kvm=kvm, memory_mib=memory_mib, online=online,
                       kernel_args=kernel_args, verbose=verbose, rwdirs=rwdirs,
                       tcg_single=tcg_single, icount=icount, qemu_extra=qemu_extra)
    res = _spawn(args, timeout, log)
    fault = qemu_fault(res)
    if fault:
        # qemu itself aborted (an assertion in the emulator, seen under TCG
        # in hw/pci/msix.c): a host fault, not the guest's. Boot once more
        # and say so; a second fault is the answer.
        say(f"  qemu aborted ({fault}); booting once more")
        res = _spawn(args, timeout, log)
    if res.timed_out and retry_hung:
        # Seen once under multi-threaded TCG on 2 host cores: a topology
        # boot that takes 15-40 s ran on, at full CPU, until stopped, and
        # booted again at once. A second hang is the answer.
        say(f"  the VM hung (not done within {fmt_secs(timeout)}) and was stopped; "
            "booting once more")
        res = _spawn(args, timeout, log)
    res.accel = accel
    if res.timed_out:
        raise LabError(f"the VM did not finish within {fmt_secs(timeout)} and was stopped "
                       f"(log: {log})")
    return res


def boot_and_check(image: Path, topo: topomod.Topology, command: Sequence[str] = ("nproc",),
                   *, online: Optional[int] = None, memory_mib: int = 2048,
                   kernel_args: Sequence[str] = (), timeout: float = 900, verbose: bool = False,
                   rwdirs: Sequence[Path] = (), icount: bool = False,
                   no_check: bool = False, retry_hung: bool = False) -> int:
    """Boot once: the topology probe and its check (unless no_check), then
    COMMAND, whose output is printed; its status, or 3 when the check failed.
    retry_hung: as for boot()."""
    user = shlex.join(command) if command else "true"

    def run(cmd: str) -> VmResult:
        return boot(image, topo, cmd, online=online, memory_mib=memory_mib,
                    kernel_args=kernel_args, timeout=timeout, verbose=verbose, rwdirs=rwdirs,
                    icount=icount, retry_hung=retry_hung)
    if no_check:
        res = run(user)
        sys.stdout.write(res.output)
        return res.returncode
    res = run(shlex.join(["bash", str(package_file("guest/vm-command.sh")),
                          str(topomod.guest_probe()), CHECK_MARK, user]))
    report, sep, rest = res.output.partition(CHECK_MARK + "\n")
    if not sep:
        report, rest = res.output, ""
    sys.stdout.write(rest)
    view = topomod.parse_guest_report(report)
    if not sep or view.nproc == 0:
        tail = "\n    ".join(res.output.strip().splitlines()[-30:])
        raise LabError(f"the guest did not report its topology (status {res.returncode}); "
                       f"last output:\n    {tail}\n  full log: {log_dir() / 'vm.log'}")
    problems = topomod.check_view(topo, view, online)
    say(f"  boot and command took {res.seconds:.1f}s under {res.accel}")
    say(topomod.format_view(topo, view))
    if problems:
        eprint("topology check FAILED:\n  " + "\n  ".join(problems))
        return 3
    say(f"  topology check passed ({topo.name or topo.spec()})")
    return res.returncode
