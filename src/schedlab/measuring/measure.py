"""Run a measurement plan in the lab VM or on this machine: one JSON per run.

Detail: docs/modules.md, section measuring/measure.py.
"""

from __future__ import annotations

import hashlib
import os
import platform
import threading
import time
from pathlib import Path
from typing import List, Optional, Tuple

from schedlab.core import hostbuild
from schedlab.core import deps
from schedlab.core import topology as topomod
from schedlab.core import vm
from schedlab.core.spec import BuildSpec
from schedlab.core.util import LabError, fmt_secs, run_logged, say, work_dir
from schedlab.measuring import icount, insncount, linecount
from schedlab.measuring import plan as planmod
from schedlab.measuring import results as resmod
from schedlab.measuring import resume
from schedlab.measuring.plan import Plan
from schedlab.series.topics import built


# The build every measurement uses: the probe config with the measurement
# series; under icount the same with JUMP_LABEL on (configs/icount.config),
# static keys patched as distributions have them.
def probe_build(variant: str, no_build: bool = False, arch: Optional[str] = None,
                accel: str = "auto") -> BuildSpec:
    config = "icount" if accel == "icount" else "probe"
    return BuildSpec(variant, config, arch, True, no_build)


def estimate_seconds(plan: Plan, accel: str = "tcg") -> float:
    """A rough duration of a plan, for progress and the time limit."""
    # Under TCG (one thread) a run costs about 25 s besides the workload:
    # bpftrace attaching, bcc compiling, the counting window's handshakes;
    # the tools' trials before the first run about a minute.  A clean run
    # has none of it, only the runner's checks.
    if plan.clean:
        per = {True: plan.seconds + (5 if accel == "tcg" else 2), False: 15 if accel == "tcg"
               else 5}
        start = 10
    else:
        per = {True: plan.seconds + (25 if accel == "tcg" else 10),
               False: 35 if accel == "tcg" else 20}
        start = 90
    # A warm-up runs once a workload, a timed one for its first seconds (plan.py).
    warm = {True: per[True] - plan.seconds + planmod.warmup_seconds(plan.seconds),
            False: per[False]}
    # The lines probe's plugin sees every access of the boot: 2.4 times the
    # wall time of the same plan without it (docs/results/cacheline-cost.md),
    # 3 with a margin.
    slow = 3 if "lines" in plan.probes else 1
    return slow * (start + sum((per[w.timed] + w.overhead) * plan.runs
                               + ((warm[w.timed] + w.overhead) if plan.warmed(w.name) else 0)
                               for w in plan.workloads))


class Progress:
    """Prints 'run k/N' with the time left while a plan runs (polls the run folders)."""

    def __init__(self, raw: Path, plan: Plan) -> None:
        self.raw, self.plan = raw, plan
        self.total = len(plan.workloads) * plan.runs
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.start = time.monotonic()

    def _finished(self) -> int:
        return sum(1 for w in self.plan.workloads for i in range(self.plan.runs)
                   if (self.raw / f"{w.name}-{i}" / "stat-after.txt").is_file())

    def _loop(self) -> None:
        seen = -1
        while not self.stop.wait(15):
            done = self._finished()
            if done == seen:
                continue
            seen = done
            took = time.monotonic() - self.start
            if done:
                left = took / done * (self.total - done)
            else:
                left = estimate_seconds(self.plan) - took
            say(f"  [measure] {done}/{self.total} runs done, {fmt_secs(took)} elapsed, "
                f"about {fmt_secs(max(left, 0))} left")

    def __enter__(self) -> "Progress":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=1)


def _raw_dir(label: str) -> Path:
    """work/measure/LABEL-TIME/: the plan folder (plan/) and the raw outputs."""
    flat = label.replace("/", "-")
    raw = work_dir() / "measure" / f"{flat}-{time.strftime('%Y%m%dT%H%M%S')}"
    raw.mkdir(parents=True)
    return raw


def measure_vm(label: str, image: Path, topo: topomod.Topology, plan: Plan,
               setting: resmod.Setting, timeout: float, online: Optional[int] = None,
               key: str = "", vmlinux: Optional[Path] = None) -> List[resmod.Run]:
    raw = _raw_dir(label)
    folder = planmod.write(plan, raw / "plan")
    if vmlinux and (folder / "bt" / "calibrate.kfunc.bt").is_file():
        icount.write_insns(vmlinux, raw)
    qemu_extra = ""
    kernel_args: Tuple[str, ...] = ()
    counts = raw / "insns-counts.txt"
    if "insns" in plan.probes:
        # The plugin counts from qemu's start, at addresses fixed then.
        if vmlinux is None:
            raise LabError("the insns probe needs the build's vmlinux")
        qemu_extra = insncount.qemu_opts(insncount.plugin(), insncount.ranges_for(vmlinux),
                                         counts)
        kernel_args = insncount.KERNEL_ARGS
    records = raw / linecount.RECORDS
    counted = None
    if "lines" in plan.probes:
        # The plugin sees every access from qemu's start: the counted
        # functions' entries and the markers are fixed addresses then.
        if vmlinux is None or plan.accel != "icount":
            raise LabError("the lines probe needs the build's vmlinux and --accel icount")
        counted = linecount.kernel_counted(
            vmlinux, linecount.symbols(linecount.proof_program())["lines_mark"][0])
        qemu_extra = linecount.qemu_opts(linecount.plugin(), counted,
                                         linecount.write_topo(topo, raw / "lines-topo.txt"),
                                         records)
        kernel_args = linecount.KERNEL_ARGS
    est = estimate_seconds(plan)
    timeout = max(timeout, 3 * est)
    say(f"  plan: {', '.join(plan.names())} x {plan.runs} run(s), {plan.seconds}s per timed "
        f"workload; about {fmt_secs(est)} under TCG; raw outputs in {raw}")
    res = None
    try:
        with Progress(raw, plan):
            # The guest's own output goes to a file beside the runs' (kept).
            # One host thread for all vCPUs: attaching the probes patches
            # kernel text, which multi-threaded TCG does not survive (vm.py).
            res = vm.boot(image, topo, f"bash {planmod.runner()} {folder} {raw} "
                          f"> {raw}/guest.log 2>&1 < /dev/null", timeout=timeout,
                          rwdirs=[raw], online=online, tcg_single=True,
                          icount=plan.accel == "icount", kernel_args=kernel_args,
                          qemu_extra=qemu_extra)
        (raw / "console.txt").write_text(res.output)
        if res.returncode != 0 and ("Kernel panic" in res.output or "BUG:" in res.output):
            say(f"  the guest kernel crashed: see {raw / 'console.txt'}")
    finally:
        # Also on a timeout or Ctrl-C (the VM is stopped by then): keep what ran.
        if vmlinux and counts.is_file():
            try:
                insncount.summarize(raw, vmlinux, counts, setting.commit or "HEAD")
            except (OSError, LabError) as exc:
                say(f"  insns: could not attribute the counts: {exc}")
        if counted and records.is_file():
            try:
                n = linecount.summarize(raw, records, counted)
                say(f"  lines: {n} run window(s) summarized from {records}")
            except (OSError, ValueError) as exc:
                say(f"  lines: could not summarize the records: {exc}")
        done = resmod.collect(label, raw, plan.workloads, plan.runs, setting,
                              res.accel if res else "?", key,
                              vm_exit=res.returncode if res else None)
        resmod.report(label, done)
    return done


# ------------------------------------------------------------------ host mode


def host_topology() -> str:
    """'host: 64 CPUs online, 2 package(s), SMT8, 2 node(s)' from sysfs (any arch)."""
    base = Path("/sys/devices/system/cpu")
    online = [p for p in base.glob("cpu[0-9]*") if (p / "topology").is_dir()]
    pkgs, smt = set(), 1
    for p in online:
        try:
            pkgs.add((p / "topology/physical_package_id").read_text().strip())
            sib = (p / "topology/thread_siblings_list").read_text().strip()
            smt = max(smt, len(topomod.parse_cpulist(sib)))
        except OSError:
            continue
    nodes = len(list(Path("/sys/devices/system/node").glob("node[0-9]*"))) or 1
    return f"host: {len(online)} CPUs online, {len(pkgs)} package(s), SMT{smt}, {nodes} node(s)"


def host_config_key(text: str) -> str:
    """A hash of a kernel config that ignores what differs between base and patched."""
    keep = [ln for ln in text.splitlines() if ln.startswith("CONFIG_")
            and not ln.startswith(("CONFIG_LOCALVERSION", "CONFIG_CC_VERSION_TEXT",
                                   "CONFIG_BUILD_SALT"))]
    return "host-config:" + hashlib.sha256("\n".join(sorted(keep)).encode()).hexdigest()[:12]


def measure_host(label: str, plan: Plan, setting: resmod.Setting, timeout: float,
                 key: str = "") -> List[resmod.Run]:
    if os.geteuid() != 0:
        raise LabError("measure --host needs root: bpftrace and funclatency load BPF programs, "
                       "and the plan switches kernel.sched_schedstats on and off; run it "
                       "with sudo")
    raw = _raw_dir(label)
    folder = planmod.write(plan, raw / "plan")
    vmlinux = Path(f"/usr/lib/debug/boot/vmlinux-{os.uname().release}")
    if vmlinux.is_file() and (folder / "bt" / "calibrate.kfunc.bt").is_file():
        icount.write_insns(vmlinux, raw)
    est = estimate_seconds(plan, accel="host")
    timeout = max(timeout, 3 * est)
    say(f"  plan: {', '.join(plan.names())} x {plan.runs} run(s) on this machine "
        f"({os.uname().release}), about {fmt_secs(est)}; raw outputs in {raw}")
    rc: Optional[int] = None
    try:
        with Progress(raw, plan):
            # The runner's own trap stops probes and workloads and restores
            # knobs and schedstats on SIGTERM; the process group is killed
            # after a grace period anyway.
            done = run_logged(["bash", str(planmod.runner()), str(folder), str(raw)],
                              raw / "console.txt", timeout=timeout, grace=15)
            if done.timed_out:
                say(f"  the plan did not finish within {fmt_secs(timeout)}: stopped")
            else:
                rc = done.returncode
    finally:
        runs = resmod.collect(label, raw, plan.workloads, plan.runs, setting, "host", key,
                              host_exit=rc, host=True)
        resmod.report(label, runs)
    return runs


def measure_in_vm(tree, result, variant: str, label: str, plan: Plan, topology: str,
                  online: Optional[int], timeout: float, key: str = "",
                  arch: Optional[str] = None) -> List[resmod.Run]:
    """PLAN on the probe build RESULT (of TREE, VARIANT) in the VM, into LABEL's
    folder (always measured: the record is the commands' business)."""
    topo = topomod.parse_topology(topology)
    setting = resmod.Setting(topology=topo.spec(), config="probe+measure", arch=arch or "x86_64",
                             variant=variant, kernel_tree=tree.description,
                             commit=result.commit, seconds=plan.seconds,
                             knobs=dict(plan.knobs))
    return measure_vm(label, result.image, topo, plan, setting, timeout, online=online,
                      key=key, vmlinux=result.build_dir / "vmlinux")


# The one boot of a 'measure' command in its record (resume.py).
UNIT = "measure"


def _kept(label: str, record: resume.Record) -> Optional[List[resmod.Run]]:
    """The runs of the finished boot of RECORD, when they are all there."""
    if not record.done(UNIT, 0):
        return None
    try:
        runs = resmod.read_runs(resmod.results_dir(label))
    except (OSError, ValueError, LabError):
        return None
    if not all(r.complete for r in runs):
        return None
    say(f"  {resmod.results_dir(label)} already holds this request, measured: nothing to "
        "do (--fresh measures again)")
    resmod.report(label, runs)
    return runs


def _measured(label: str, record: resume.Record, runs: List[resmod.Run]) -> List[resmod.Run]:
    if runs and all(r.complete for r in runs):
        record.finish(UNIT, 0)
        resume.write(resmod.results_dir(label), record)
    return runs


def host_setting(plan: Plan, variant: Optional[str]) -> resmod.Setting:
    """The setting of runs on this machine, in the kernel it runs."""

    conf = hostbuild.running_config_text()
    return resmod.Setting(topology=host_topology(),
                          config=host_config_key(conf) if conf else "host-config:?",
                          arch=platform.machine(), variant=variant or "host",
                          seconds=plan.seconds, knobs=dict(plan.knobs))


def measure_on_host(label: str, plan: Plan, variant: Optional[str],
                    timeout: float, fresh: bool = False) -> List[resmod.Run]:
    """'measure --host': PLAN on this machine, booted into the kernel to measure."""
    if plan.accel != "auto":
        raise LabError("measure --host: --accel is for the VM (on the host, the clock is real)")
    folder = resmod.results_dir(label)
    record = resume.start(folder, "measure", {"where": "host", "variant": variant,
                                              **resume.plan_fields(plan)}, fresh, [folder])
    plan.check_tools()
    setting = host_setting(plan, variant)
    resume.check_builds(folder, record, {"host": {"release": os.uname().release,
                                                  "config": setting.config,
                                                  "topology": setting.topology}})
    kept = _kept(label, record)
    if kept is not None:
        return kept
    return _measured(label, record, measure_host(label, plan, setting, timeout))


def measure_build(tree_spec, variant: str, label: str, plan: Plan, topology: str,
                  online: Optional[int], timeout: float, arch: Optional[str] = None,
                  no_build: bool = False, fresh: bool = False) -> List[resmod.Run]:
    """'measure --vm': build VARIANT's probe kernel (unless no_build), PLAN in the VM."""
    folder = resmod.results_dir(label)
    record = resume.start(folder, "measure", {
        "where": "vm", "tree": {"kernel": tree_spec.kernel, "base": tree_spec.base},
        "variant": variant, **resume.plan_fields(plan), "topology": topology,
        "online": online, "arch": arch or "x86_64"}, fresh, [folder])
    deps.setup()
    plan.check_tools()
    tree = tree_spec.resolve()
    result = built(tree, probe_build(variant, no_build, arch, plan.accel))
    resume.check_builds(folder, record, {variant: {"commit": result.commit,
                                                   "release": result.release}})
    kept = _kept(label, record)
    if kept is not None:
        return kept
    return _measured(label, record, measure_in_vm(tree, result, variant, label, plan, topology,
                                                  online, timeout, arch=arch))
