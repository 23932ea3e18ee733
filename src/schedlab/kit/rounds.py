"""The kit's passes run on this machine, round after round, and their
reports: what `./schedlab hw` does once its request (hw.KitRun) is checked.
"""

from __future__ import annotations

import json
import shlex
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from schedlab.core.util import LabError, say, work_dir
from schedlab.kit import benchmarks as benchmod
from schedlab.kit import hwreport, machine, noise, reporttext, significance
from schedlab.kit.arms import (KIT, KIT_ARMS, LLC_ACTIVE, MIN_ROUNDS, STOCK, KitArm, arm_knobs,
                               arms_here)
from schedlab.kit.hw import (DEFAULT_PASSES, PASSES, PROBE_PASS, SHARE, THROUGHPUT, KitRun, Pass,
                             default_arms, ncpu, order_seed, pick, points, request, resumed)
from schedlab.measuring import ab, equivalence
from schedlab.measuring import results as resmod
from schedlab.measuring import resume


RUN_RECORD = "run.json"


def _arm_states(arms: Sequence[KitArm], rounds: int, runs: int, bench: Sequence[str],
                present: Sequence[str] = (), kind: Pass = PROBE_PASS):
    """The arms as the report shows them: the writes they made (every switch
    of PRESENT), their runs finished of those planned."""
    planned = rounds * runs * len(bench)
    return [hwreport.ArmState(a.name, a.what, arm_knobs(a, present),
                              hwreport.runs_done(resmod.results_dir(f"{kind.prefix}-{a.name}")),
                              planned, a.before, a.baseline) for a in arms]


def report(record: dict, tables: bool = True) -> Path:
    """The report of the run RECORD describes (what run() saved in
    work/hw/run.json, the machine's record with it): the 'ab' tables again
    from the finished runs (TABLES), then work/results/hw/report.md."""
    byname = {a.name: a for a in KIT_ARMS}
    arms = [byname[n] for n in record["arms"] if n in byname]
    bench = record["bench"]
    kind = PASSES.get(record.get("pass", PROBE_PASS.name), PROBE_PASS).labelled(
        record.get("label", ""))
    schbench = record.get("schbench")
    if tables:
        try:
            ab.run(request(arms, record["rounds"], record["runs"], record["seconds"],
                           bench=bench, plots=record.get("plots", True),
                           present=record.get("switches", ()), c2c=record.get("c2c", False),
                           kind=kind, order_seed=record.get("order_seed"),
                           schbench=Path(schbench) if schbench else None),
                   tables_only=True)
        except Exception as e:      # noqa: BLE001 - the report lists what finished anyway
            say(f"hw: no tables ({type(e).__name__}: {e}); the report lists what finished")
    box = record.get("machine") or hwreport.load_json(work_dir() / kind.prefix / "machine.json")
    box = box | {"kernels": record.get("kernels") or {}}
    folders = [resmod.results_dir(f"{kind.prefix}-{a.name}") for a in arms]
    states = _arm_states(arms, record["rounds"], record["runs"], bench,
                         record.get("switches", ()), kind)
    titled = hwreport.pairs(states) if len(states) > 1 else []
    pairs = [(a, b) for a, b, _ in titled]
    named = {a.name: f for a, f in zip(arms, folders)}
    every = kind.name == THROUGHPUT.name     # every result of each benchmark
    family = significance.headline_tests(named, pairs, every)
    settings = ({k: record[k] for k in ("rounds", "runs", "seconds")}
                | ({"rounds": f"{record['rounds']} (a rehearsal of the kit: too few for a "
                    "comparison)"} if record["rounds"] < MIN_ROUNDS else {})
                | {"benchmarks": ", ".join(bench)}
                | ({"label": kind.label} if kind.label else {})
                | ({"schbench": record["schbench_source"]} if record.get("schbench_source")
                   else {})
                | _order_setting(record, [a.name for a in arms])
                | _stopping_setting(record))
    results = resmod.results_dir(kind.prefix)
    path = hwreport.write(results, box, states, record["argv"], record.get("missing", ()),
                          record.get("left_out", ()), settings,
                          hwreport.probes_missing(folders), kind.about,
                          hwreport.run_notes(folders), kind.title,
                          significance.section(family))
    replica = equivalence.find_replica([(a.name, "host", arm_knobs(a, record.get("switches", ())))
                                        for a in arms])
    text = reporttext.write(results, hwreport.title(box, kind.title), kind.about,
                            significance.one_way(pairs), named,
                            replica, {(t.a, t.b, t.workload, t.metric): t.significant
                                      for t in family}, box, settings, record["argv"],
                            every, {(a, b): t for a, b, t in titled})
    say(f"hw: the report to mail: {text}")
    say(f"hw: the report: {path}")
    return path


def _order_setting(record: dict, names: Sequence[str]) -> Dict[str, str]:
    """The report's line on the arms' order: the seed and each round's."""
    seed = record.get("order_seed")
    if seed is None:
        return {"arm order": "as given, every round"}
    rounds = ab.round_orders(names, seed, record["rounds"])
    return {"arm order": f"shuffled every round with seed {seed} ("
            + "; ".join(", ".join(r) for r in rounds) + ")"}


def _stopping_setting(record: dict) -> Dict[str, str]:
    """The report's line on when the rounds stopped."""
    stop = record.get("stopping")
    if not stop:
        return {}
    how = (f"every headline interval within {stop['width']}% of its mean"
           if stop["met"] else f"the most rounds, {stop['max']}, with "
           f"{stop['wide']} headline interval(s) still wider than {stop['width']}% "
           f"(widest: {stop['widest']})")
    return {"rounds stopped at": f"{record['rounds']}: {how}"}


def _clear_tables(folder: Path) -> None:
    """The tables, plots and report of an earlier run, before this one
    starts: a report after Ctrl-C must not show them as this run's."""
    for pattern in ("headline*.md", "compare*.md", "compare*.txt", "equivalence.*",
                    "sweep.*", "report.md"):
        for p in folder.glob(pattern):
            p.unlink()
    for d in folder.glob("plots*"):
        if d.is_dir():
            shutil.rmtree(d)


def _again(kind: Pass) -> str:
    """The command that writes KIND's report again."""
    return "./schedlab hw --report" + (" --lb-share" if kind.name == SHARE.name else
                                       f" --pass {kind.name}") + (
        f" --label {kind.label}" if kind.label else "")


def report_again(plots: bool = True, kinds: Sequence[Pass] = DEFAULT_PASSES) -> int:
    """`./schedlab hw --report`: the report of each of KINDS' last run, from
    what finished; with PLOTS, whatever the run was told (a rehearsal's guest
    leaves the plots to the host)."""
    records = [(k, hwreport.load_json(work_dir() / k.prefix / RUN_RECORD)) for k in kinds]
    if not any(r for _, r in records):
        raise LabError("hw --report: no run to report on (work/PASS/run.json is written when "
                       "'./schedlab hw' starts a pass's runs)")
    for _, record in records:
        if record:
            report(record | {"plots": plots})
    return 0


def run(check_only: bool, kit: KitRun = KitRun()) -> int:
    """`./schedlab hw`: the preflight, the machine record, then each pass of
    KIT's in turn: its runs and its report; with kit.pin, under the
    performance governor (put back after)."""
    kit.check()
    pf = machine.preflight()
    say("hw: what the kit needs here")
    say(pf.text())
    with noise.pinned(kit.pin and pf.ok and not check_only) as pinning:
        return _run(pf, pinning, check_only, kit)


def kit_switches(kinds: Sequence[Pass], present: Sequence[str],
                 fresh: bool = False) -> List[str]:
    """On the stock kernel: the switches the kit kernel's boot had, from
    the record of the first of KINDS it ran (not with FRESH: a new run);
    where none, every switch the lab builds, and LLC_ACTIVE where PRESENT
    (this boot) has it."""
    for kind in () if fresh else kinds:
        old = hwreport.load_json(work_dir() / kind.prefix / RUN_RECORD)
        if KIT in (old.get("kernels") or {}) and isinstance(old.get("switches"), list):
            return list(old["switches"])
    return [n.name for n in machine.KERNEL_NEEDS] + [s for s in present if s == LLC_ACTIVE]


def schbench(kit: KitRun) -> Optional[benchmod.Built]:
    """The schbench binary KIT's passes run, if any: from kit.bench_dir, or
    built at the kit's commit before, or fetched and built now where KIT
    asks for it by name, or on PATH."""
    asked = bool(kit.bench) and benchmod.needs_schbench(
        benchmod.expand(kit.bench or (), ncpu()))
    built = benchmod.find(benchmod.SCHBENCH, kit.bench_dir, asked)
    if built:
        say(f"hw: schbench: {built.line()}")
    return built


def _run(pf: machine.Preflight, pinning: str, check_only: bool, kit: KitRun) -> int:
    built = schbench(kit)
    box = machine.machine_record()
    box["noise"] = noise.record() | {"governor for the runs": pinning}
    say("  " + "; ".join(f"{k}: {v}" for k, v in box["noise"].items() if v))
    for kind in kit.kinds:
        out = work_dir() / kind.prefix
        out.mkdir(parents=True, exist_ok=True)
        (out / "machine.json").write_text(json.dumps(box, indent=1) + "\n")
        (out / "preflight.json").write_text(json.dumps([asdict(c) for c in pf.checks],
                                                       indent=1) + "\n")
    say(f"  the machine's record: {work_dir() / kit.kinds[0].prefix / 'machine.json'}")
    if not pf.ok:
        names = ", ".join(c.name for c in pf.missing())
        raise LabError(f"hw: cannot measure on this machine as it is: {names} "
                       "(each with its fix above)")
    if check_only:
        say("hw: everything the kit needs is here")
        return 0
    present = machine.switches_here(machine.DEBUG_SCHED)
    if LLC_ACTIVE in present:
        say(f"hw: cache aware scheduling is active here: the lbstats and llc-off arms turn it "
            f"off ({machine.DEBUG_SCHED / machine.LLC_BALANCING} 0), every other arm leaves "
            "it on (1); lbstats is compared with llc-off")
    kernel = machine.running_kernel(present, box.get("identity") or {}) or KIT
    if kernel == STOCK:
        # The kit kernel's switches as its boot recorded them (else as the
        # lab builds it, and cache aware scheduling as this boot finds it):
        # the same request on both kernels.
        switches = kit_switches(kit.kinds, present, kit.fresh)
        here, cannot = arms_here(switches)[0], []    # type: List[KitArm], List[KitArm]
    else:
        here, cannot = arms_here(present)
        switches = list(present)
    status = 0
    waiting: List[str] = []
    for kind in kit.kinds:
        mine = [a for a in here if kind.runs(a)]
        asked = [n for n in kit.arms if n in {a.name for a in mine}] if kit.arms else None
        if asked is not None and len(asked) < 2:
            say(f"hw: no {kind.name} pass: it runs the arms of "
                f"{' and '.join(k + ' kernel' for k in kind.kernels)}, of which "
                f"{', '.join(asked) or 'none'} is asked")
            continue
        arms = pick(mine, asked or default_arms(kind, mine), kit.bench)
        chosen = points(kind, kit.bench, built.binary if built else None, ncpu())
        st, wait = _run_pass(kind, arms, chosen, kit, box, switches, cannot, kernel, built)
        status = max(status, st)
        waiting += [w for w in wait if w not in waiting]
    if waiting:
        say(reboot_text(kernel, waiting, kit.argv))
        return OTHER_KERNEL
    return status


# `hw`'s exit status when arms wait for the other kernel (EX_TEMPFAIL).
OTHER_KERNEL = 75


def reboot_text(kernel: str, waiting: Sequence[str], argv: Sequence[str]) -> str:
    """What to do when the arms of the other kernel wait: boot it once, run
    the same command again (without --fresh, which would start over)."""
    other = STOCK if kernel == KIT else KIT
    build = ("./schedlab build --host-config --variant base" if other == STOCK
             else "./schedlab build --host-config")
    again = [a for a in argv if a != "--fresh"]
    return "\n".join([
        f"hw: this kernel's arms are measured; {', '.join(waiting)} run on the {other} kernel "
        f"({build}, release ...-schedlab-{'base' if other == STOCK else 'patched'}-SOURCES).",
        "  boot it once, the default entry left as it is: grub-reboot 'ENTRY' && reboot "
        "(Debian, Ubuntu; ENTRY as grub.cfg names it, 'Advanced options for ...>... with "
        "Linux RELEASE' in the submenu), grub2-reboot ID && reboot (Fedora, RHEL; ID from "
        "grubby --info /boot/vmlinuz-RELEASE), or the entry in petitboot's menu on POWER;",
        "  then the same command goes on with its arms: " + shlex.join(list(again)),
        "  (after them, boot this kernel again for the next round if the intervals are "
        "still wide; the report is written once every arm has its rounds)"])


def _run_pass(kind: Pass, arms: Sequence[KitArm], bench: Sequence[str], kit: KitRun,
              box: dict, present: Sequence[str], cannot: Sequence[KitArm],
              kernel: str = KIT, built: Optional[benchmod.Built] = None
              ) -> Tuple[int, List[str]]:
    """One pass of the kit: its 'ab' request, its record in work/PREFIX/run.json,
    its report (also after Ctrl-C); a round more while a headline interval
    is too wide, up to kit.max_rounds.  Only the arms of KERNEL run here:
    returns the status and the arms that wait for the other kernel."""
    out = work_dir() / kind.prefix
    record: Dict[str, Any] = {}
    started: List[bool] = []

    def begin() -> None:
        """The request was accepted: this run's record, no earlier tables."""
        (out / RUN_RECORD).write_text(json.dumps(record, indent=1) + "\n")
        if not started:
            _clear_tables(resmod.results_dir(kind.prefix))
        started.append(True)

    seed = order_seed(kind, kit.fresh, kit.seed)
    # The rounds the stopping rule added in an earlier boot or run stand.
    rounds = max(kit.rounds, 0 if kit.fresh else resumed(kind, "boots") or 0)

    def req_of(n: int) -> ab.AbRequest:
        return request(arms, n, kit.runs, kit.seconds, kit.fresh and n == kit.rounds, bench,
                       kit.plots, present, begin, kit.c2c, kind, seed,
                       [a.name for a in arms if a.kernel == kernel],
                       built.binary if built else None)

    req = req_of(rounds)
    bench = [w.name for w in req.plan.workloads]
    # Each kernel the run met, by the boot that ran its arms.
    kernels = {} if kit.fresh else dict(hwreport.load_json(out / RUN_RECORD).get("kernels") or {})
    if any(a.kernel == kernel for a in arms):
        kernels[kernel] = box.get("identity") or {"release": box.get("kernel", "")}
    record.update({"argv": list(kit.argv), "arms": [a.name for a in arms],
                   "bench": bench, "rounds": rounds, "runs": kit.runs, "seconds": kit.seconds,
                   "plots": kit.plots, "switches": list(present), "c2c": kit.c2c,
                   "machine": box, "order_seed": seed, "pass": kind.name, "kernels": kernels,
                   "label": kind.label,
                   "schbench": str(built.binary) if built else "",
                   "schbench_source": built.line() if built else "",
                   "missing": [a.name for a in cannot],
                   "left_out": [] if built else [benchmod.SCHBENCH.name]})
    say(f"hw: the {kind.name} pass: arms {', '.join(a.name for a in arms)} (the first is the "
        f"reference); benchmarks {', '.join(bench)}; {rounds} to {kit.max_rounds} rounds "
        f"(until every headline 95% interval is within {kit.width}% of its mean), the arms "
        f"shuffled every round with seed {seed} (--seed {seed} repeats the order)")
    folders = {a.name: resmod.results_dir(f"{kind.prefix}-{a.name}") for a in arms}
    status = 0
    waiting: List[str] = []
    try:
        while True:
            status = ab.run(req)
            done = resume.read(resmod.results_dir(kind.prefix))
            waiting = ab.pending(req, done, [a for a in req.arms if not req.runs_here(a)]) \
                if done else []
            if waiting:
                break
            wide = significance.too_wide(folders, kit.width, kind.name == THROUGHPUT.name)
            record["stopping"] = {"width": kit.width, "max": kit.max_rounds, "met": not wide,
                                  "wide": len(wide), "widest": _widest(wide)}
            if not wide or rounds >= kit.max_rounds:
                break
            rounds += 1
            record["rounds"] = rounds
            say(f"hw: {len(wide)} headline interval(s) wider than {kit.width}% (widest: "
                f"{_widest(wide)}): round {rounds} of at most {kit.max_rounds}")
            req = req_of(rounds)
        done = resume.read(resmod.results_dir(kind.prefix))
        bad = ab.pending(req, done, [a for a in req.arms if req.runs_here(a)]) if done else []
        if bad:
            say(f"hw: the {kind.name} pass: {', '.join(bad)} with rounds not finished (runs "
                "incomplete or invalid: the report's notes say why); the same command "
                "measures them again")
            status = max(status, 1)
        return status, waiting
    finally:
        # Also after Ctrl-C or a failed run, once the runs had started: the
        # report of what finished ('ab' made the tables when all did).
        if started:
            (out / RUN_RECORD).write_text(json.dumps(record, indent=1) + "\n")
            try:
                report(record, tables=False)
            except Exception as e:      # noqa: BLE001 - never hide why the run ended
                say(f"hw: no report ({type(e).__name__}: {e}); '{_again(kind)}' tries again")


def _widest(wide: Sequence[Tuple[str, str, str, float]]) -> str:
    if not wide:
        return ""
    arm, workload, metric, w = wide[0]
    return f"{arm} {workload} {metric}, {w:.1f}%"
