"""Results: one JSON per run in a result set's folder, typed.

Detail: docs/modules.md, section measuring/results.py.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from schedlab.core.util import LabError, repo_dir, say, work_dir
from schedlab.measuring import icount, linecount, parsers
from schedlab.measuring import probes as probemod
from schedlab.measuring import workloads as workmod

# Labels of the lab's own scratch runs (the test command's integration run):
# work/results/NAME, like any plain label.
SCRATCH = "scratch/"
# The label prefixes that name a place: work/results/ or the checkout's results/.
KEPT = "results/"
WORK = "work/results/"


def places() -> List[Tuple[str, Path]]:
    """(label prefix, folder) of the places a result set lives, in lookup order."""
    repo = repo_dir()
    return [(WORK, work_dir() / "results"), (KEPT, repo / "results")]


def results_dir(label: str) -> Path:
    """Where the result set LABEL is written: work/results/LABEL, or the place
    its prefix names (results/NAME, scratch/NAME)."""
    if label.startswith(SCRATCH):
        return work_dir() / "results" / label[len(SCRATCH):]
    for prefix, root in places():
        if label.startswith(prefix) and label != prefix:
            return root / label[len(prefix):]
    return work_dir() / "results" / label


def find(name: str) -> Path:
    """A result set given by folder or by label: a label with a place's prefix
    is there; a plain label is the first of work/results/ and results/
    that holds it (the other is named)."""
    p = Path(name)
    if p.is_dir():
        return p
    if name.startswith(SCRATCH) or any(name.startswith(pre) for pre, _ in places()):
        return results_dir(name)
    found = [root / name for _, root in places() if (root / name).is_dir()]
    if not found:
        raise LabError(f"no result set {name!r}: not a folder, and none in "
                       + ", ".join(str(root) for _, root in places()))
    if len(found) > 1:
        say(f"  {name}: {found[0]} (also in " + ", ".join(str(f) for f in found[1:])
            + ": give a path to use another)")
    return found[0]


class _Record:
    """to/from JSON in field order; fields left None are not written, keys
    this version does not know are kept (after the known ones)."""

    extra: Dict[str, Any]

    @classmethod
    def from_json(cls, d: Dict[str, Any]):
        names = [f.name for f in fields(cls) if f.name != "extra"]  # type: ignore[arg-type]
        obj = cls(**{k: d[k] for k in names if k in d})  # type: ignore[call-arg]
        obj.extra = {k: v for k, v in d.items() if k not in names}
        setting = getattr(obj, "setting", None)     # a Run's or a PlanMeta's
        if isinstance(setting, dict):
            setattr(obj, "setting", Setting.from_json(setting))
        return obj

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.name != "extra" and value is not None:
                out[f.name] = value.to_json() if isinstance(value, _Record) else value
        out.update(self.extra)
        return out


@dataclass
class Setting(_Record):
    """What must be known about how a run was measured (compare checks it)."""
    topology: str = ""
    config: str = ""
    arch: str = ""
    variant: str = ""
    kernel_tree: Optional[str] = None
    commit: Optional[str] = None
    seconds: int = 0
    knobs: Optional[Dict[str, str]] = None
    release: Optional[str] = None
    probe_tool: Optional[str] = None
    latency_tool: Optional[str] = None
    probes: Optional[List[str]] = None
    accel: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Run(_Record):
    complete: bool = False
    problems: List[str] = field(default_factory=list)
    notes: Optional[List[str]] = None
    seconds: float = 0.0
    command: str = ""
    metrics: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    histograms: Dict[str, Any] = field(default_factory=dict)
    raw: Dict[str, str] = field(default_factory=dict)
    label: Optional[str] = None
    workload: Optional[str] = None
    workload_what: Optional[str] = None
    run: Optional[int] = None
    setting: Optional[Setting] = None
    tool_versions: Optional[List[str]] = None
    probes_missing: Optional[List[str]] = None
    latency_why: Optional[List[str]] = None
    raw_dir: Optional[str] = None
    accel: Optional[str] = None
    vm_exit: Optional[int] = None
    host_exit: Optional[int] = None
    key: Optional[str] = None
    boot: Optional[int] = None
    calibration: Optional[Dict[str, Any]] = None    # the cost probes' (icount.py)
    # A clean run's checks that nothing was attached, before, during and
    # after it: the runner's watch.txt, one line each.
    watch: Optional[List[str]] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    def name(self) -> str:
        return f"{self.workload} #{self.run}"


@dataclass
class PlanMeta(_Record):
    """A result set's plan.json: what was asked for, and how to recognise it again."""
    plan: List[str] = field(default_factory=list)
    runs: int = 0
    boots: Optional[int] = None
    setting: Optional[Setting] = None
    key: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)



def write_json(path: Path, record: _Record) -> None:
    path.write_text(json.dumps(record.to_json(), indent=1) + "\n")


def read_runs(folder: Path) -> List[Run]:
    if not folder.is_dir():
        raise LabError(f"no results at {folder}")
    runs = [Run.from_json(json.loads(f.read_text())) for f in sorted(folder.glob("run-*.json"))]
    if not runs:
        raise LabError(f"no run-*.json in {folder}")
    return runs


def read_plan(folder: Path) -> PlanMeta:
    return PlanMeta.from_json(json.loads((folder / "plan.json").read_text()))


# ------------------------------------------------------------------ parsing

def _read(d: Path, name: str) -> str:
    p = d / name
    return p.read_text(errors="replace") if p.is_file() else ""


def _lines(d: Path, name: str) -> List[str]:
    return [ln.strip() for ln in _read(d, name).splitlines() if ln.strip()]


def parse_run(d: Path, w: workmod.Workload,
              probes_used: Sequence[str] = tuple(probemod.DEFAULT_PROBES),
              latency_tool: str = "bpftrace", schedstat: bool = True,
              overhead: Optional[float] = None,
              core_of: Optional[Dict[int, int]] = None, clean: bool = False) -> Run:
    """Metrics of one run folder; 'complete' false with the reasons when not.
    CLEAN: a run with nothing attached (no probe output, no schedstat), valid
    only if the runner's checks saw nothing attached (watch_problems())."""
    metrics: Dict[str, parsers.Metric] = {}
    problems = _lines(d, "problems.txt")
    status = _read(d, "status.txt").strip()
    if not d.is_dir() or not status:
        problems.append("did not finish (interrupted, crashed or timed out)")
    elif status == "124":
        problems.append("workload hit its time limit")
    elif status != "0":
        problems.append(f"workload exited with status {status}")
    work = w.parser(_read(d, "workload.txt"))
    if status == "0" and not work:
        problems.append("no result in the workload's output")
    metrics.update(work)
    try:
        secs = float(_read(d, "seconds.txt").strip())
    except ValueError:
        secs = 0.0
    if clean:
        return _clean_run(d, metrics, problems, secs, probes_used)
    probe_out = _read(d, "probe.txt")
    parsed = probemod.Parsed(parsers.bpftrace_maps(probe_out), secs, probe_out,
                             _read(d, "latency.txt"),
                             {f: _read(d, f"latency-{f}.txt") for f in probemod.LATENCY_MORE
                              if "latency-lb" in probes_used},
                             latency_tool, overhead,
                             core_of=core_of or {},
                             schedstat=_read(d, "schedstat-before.txt"),
                             insns_out=_read(d, "insns.txt"),
                             perf_stat=_read(d, "perf-stat.txt"),
                             c2c_stats=_read(d, "c2c-stats.txt"))
    probemod.parse(probes_used, parsed)
    metrics.update(parsed.metrics)
    problems += parsed.problems
    if "Attaching" not in probe_out:
        problems.append("the probe did not attach: " + probe_out.strip()[:200])
    elif "@on:" not in probe_out and "schedlab: stopped" not in probe_out:
        # The maps are printed when the window closes, before the gate's
        # 'stopped' line, and at exit with the gate's own map: without either
        # line, no map was.
        problems.append("bpftrace printed no maps")
    try:
        if schedstat:
            metrics.update(parsers.schedstat_delta(_read(d, "schedstat-before.txt"),
                                                   _read(d, "schedstat-after.txt")))
        metrics.update(parsers.proc_stat_busy(_read(d, "stat-before.txt"),
                                              _read(d, "stat-after.txt")))
    except ValueError as exc:
        problems.append(str(exc))
    return Run(complete=not problems, problems=sorted(set(problems)),
               notes=_lines(d, "notes.txt") + parsed.notes, seconds=secs,
               command=_read(d, "command.txt").strip(),
               metrics={k: m.__dict__ for k, m in metrics.items()},
               histograms=parsed.histograms,
               raw={"workload": _read(d, "workload.txt")[-4000:], "probe": probe_out[-4000:]})


def watch_problems(watch: Sequence[str]) -> List[str]:
    """What the runner's checks of a clean run (watch.txt) make of it: each
    finding, or the checks missing; none for a run with nothing attached."""
    if not any(ln.startswith("before:") for ln in watch) or \
            not any(ln.startswith("after:") for ln in watch):
        return ["the runner's checks before and after the run are missing (watch.txt)"]
    found = [ln for ln in watch if not ln.endswith(": clean")]
    return [f"attached beside a clean run: {ln}" for ln in found[:5]] + (
        [f"... and {len(found) - 5} more findings"] if len(found) > 5 else [])


def _clean_run(d: Path, metrics: Dict[str, parsers.Metric], problems: List[str],
               secs: float, probes_used: Sequence[str] = ()) -> Run:
    watch = _lines(d, "watch.txt")
    problems = problems + watch_problems(watch)
    notes = _lines(d, "notes.txt")
    if "lines" in probes_used:
        # Counted by a qemu plugin outside the guest (linecount.py).
        parsed = probemod.Parsed({}, secs, "", lines_out=_read(d, linecount.OUT))
        probemod.parse(["lines"], parsed)
        metrics.update(parsed.metrics)
        problems += parsed.problems
        notes += parsed.notes
    try:
        metrics.update(parsers.proc_stat_busy(_read(d, "stat-before.txt"),
                                              _read(d, "stat-after.txt")))
    except ValueError as exc:
        problems.append(str(exc))
    return Run(complete=not problems, problems=sorted(set(problems)),
               notes=notes, seconds=secs,
               command=_read(d, "command.txt").strip(),
               metrics={k: m.__dict__ for k, m in metrics.items()},
               raw={"workload": _read(d, "workload.txt")[-4000:]}, watch=watch)


@dataclass
class GuestFacts:
    """What the plan runner found out about the kernel and its tools."""
    release: str
    attach: str
    latency_tool: str
    latency_why: List[str]
    probes_used: List[str]
    probes_missing: List[str]
    versions: List[str]
    knob_error: str

    @classmethod
    def read(cls, raw: Path) -> "GuestFacts":
        return cls(_read(raw, "uname.txt").strip(), _read(raw, "attach.txt").strip(),
                   _read(raw, "latency-tool.txt").strip() or "none",
                   _lines(raw, "latency-why.txt"), _lines(raw, "probes-used.txt"),
                   _lines(raw, "probes-missing.txt"), _lines(raw, "versions.txt"),
                   _read(raw, "knob-error.txt").strip())


def _parse_in_plan(raw: Path, w: workmod.Workload, index: int, probes_used: Sequence[str],
                   latency_tool: str, probes_missing: Sequence[str]) -> Run:
    """parse_run() of run INDEX of a plan's raw folder, with what holds for the
    whole plan: schedstat absent, a knob that could not be set."""
    cal = icount.read(raw)
    run = parse_run(raw / f"{w.name}-{index}", w, probes_used, latency_tool,
                    schedstat=not any(m.startswith("schedstat:") for m in probes_missing),
                    overhead=cal.overhead if cal else None,
                    core_of=parsers.parse_cores(_read(raw, "cores.txt")),
                    clean=_read(raw, "pass.txt").strip() == "clean")
    if cal:
        run.calibration = cal.to_json()
        bad = set()
        if cal.overhead is None:
            bad.add("the cost probes' calibration found no overhead")
        if "holds" not in cal.check:
            bad.add(f"calibration: {cal.check}")
        clock = _read(raw, "clocksource.txt").strip()
        if clock != "tsc":
            # HPET and the ACPI timer tick in steps of many instructions.
            bad.add(f"the guest's clocksource is {clock or '?'}, not tsc: no instruction "
                    "counts")
        if bad:
            run.problems = sorted(set(run.problems) | bad)
            run.complete = False
    knob_error = _read(raw, "knob-error.txt").strip()
    if knob_error:
        run.problems = sorted(set(run.problems) | {f"knob: {knob_error}"})
        run.complete = False
    return run


def collect(label: str, raw: Path, plan: Sequence[workmod.Workload], runs: int,
            setting: Setting, accel: str, key: str = "", vm_exit: Optional[int] = None,
            host_exit: Optional[int] = None, host: bool = False) -> List[Run]:
    """Parse every run folder of a plan (finished or not) into results/LABEL/."""
    facts = GuestFacts.read(raw)
    setting = Setting.from_json(dict(
        setting.to_json(), release=facts.release, probe_tool=f"bpftrace/{facts.attach or '?'}",
        latency_tool=facts.latency_tool, probes=sorted(facts.probes_used), accel=accel))
    out_dir = results_dir(label)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("run-*.json"):
        old.unlink()
    done = []
    for w in plan:
        for i in range(runs):
            run = _parse_in_plan(raw, w, i, facts.probes_used, facts.latency_tool,
                                 facts.probes_missing)
            run.label, run.workload, run.workload_what, run.run = label, w.name, w.what, i
            run.setting, run.tool_versions = setting, facts.versions
            run.probes_missing, run.latency_why = facts.probes_missing, facts.latency_why
            run.raw_dir, run.accel, run.key = str(raw), accel, key
            if host:
                run.host_exit = host_exit
            else:
                run.vm_exit = vm_exit
            write_json(out_dir / f"run-{w.name}-{i}.json", run)
            done.append(run)
    write_json(out_dir / "plan.json", PlanMeta([w.name for w in plan], runs, None, setting, key))
    return done


def reparse_folder(folder: Path) -> List[Run]:
    """Parse the raw outputs of results/LABEL/run-*.json again (after a parser
    change), keeping what the run recorded about its setting and tools."""
    done = []
    for f in sorted(folder.glob("run-*.json")):
        r = Run.from_json(json.loads(f.read_text()))
        raw = Path(r.raw_dir or "")
        if not (raw / f"{r.workload}-{r.run}").is_dir():
            raise LabError(f"{f}: its raw outputs are gone ({raw})")
        w = workmod.for_reparse(r.workload or "", r.command)
        st = r.setting or Setting()
        new = _parse_in_plan(raw, w, r.run or 0,
                             probemod.DEFAULT_PROBES if st.probes is None else st.probes,
                             st.latency_tool or "none", r.probes_missing or [])
        for name in ("complete", "problems", "notes", "seconds", "command", "metrics",
                     "histograms", "raw", "calibration", "watch"):
            setattr(r, name, getattr(new, name))
        write_json(f, r)
        done.append(r)
    if not done:
        raise LabError(f"no run-*.json in {folder}")
    return done


def reparse(folder: Path) -> List[Run]:
    """A result set parsed again; the boots of an interleaved run pooled again."""
    boots = sorted(folder.glob("boot-*"), key=lambda b: int(b.name.split("-")[1]))
    for b in boots:
        reparse_folder(b)
    runs = merge_boots(folder, len(boots), read_plan(folder).key) if boots else \
        reparse_folder(folder)
    bad = sum(1 for r in runs if not r.complete)
    say(f"  {folder}: {len(runs)} runs parsed again" + (f", {bad} incomplete" if bad else ""))
    return runs


def merge_boots(out: Path, boots: int, key: str, label: str = "") -> List[Run]:
    """OUT/boot-K/ (one per boot) pooled into OUT/: runs numbered on across
    boots, each with its boot number and the label LABEL (default OUT's name)."""
    for old in out.glob("run-*.json"):
        old.unlink()
    merged: List[Run] = []
    first: Optional[PlanMeta] = None
    for boot in range(boots):
        meta = read_plan(out / f"boot-{boot}")
        first = first or meta
        for one in read_runs(out / f"boot-{boot}"):
            one.boot, one.run = boot, boot * meta.runs + (one.run or 0)
            one.label = label or out.name
            write_json(out / f"run-{one.workload}-{one.run}.json", one)
            merged.append(one)
    assert first is not None
    write_json(out / "plan.json", PlanMeta(first.plan, first.runs * boots, boots,
                                           first.setting, key))
    bad = sum(1 for r in merged if not r.complete)
    say(f"  {out}: {len(merged)} runs from {boots} boots pooled"
        + (f", {bad} incomplete" if bad else ""))
    return merged


# ------------------------------------------------------------------ checking

def report(label: str, runs: List[Run]) -> None:
    if not runs:
        return
    first = runs[0]
    s = first.setting or Setting()
    why = first.latency_why or []
    say(f"  probes: counts with {s.probe_tool}, latency with {s.latency_tool}"
        + (f" ({'; '.join(why)})" if why else ""))
    if first.calibration:
        cal = first.calibration
        say(f"  cost probes: {cal['overhead']} instructions of their own per call "
            f"({cal['calls']} calls of {cal['function']}(); {cal['check']})")
    for miss in first.probes_missing or []:
        hint = (": build with the measurement series (build --measure, patches/measure/), "
                "which keeps the probed functions out of line") if "kallsyms" in miss else ""
        say(f"  NOTE: not measured: {miss}{hint}")
    for r in runs:
        state = "ok" if r.complete else "INCOMPLETE: " + "; ".join(r.problems)
        say(f"  {r.name()}: {state}")
    bad = sum(1 for r in runs if not r.complete)
    say(f"  results in {results_dir(label)}: {len(runs) - bad} complete, {bad} incomplete")


def check_runs(runs: List[Run], probes: Sequence[str]) -> List[str]:
    """Problems with a plan's results: incomplete runs, probes or metrics missing,
    values that are not finite, counts that stayed at zero."""
    problems = []
    for r in runs:
        name = r.name()
        if not r.complete:
            problems.append(f"{name}: incomplete: {'; '.join(r.problems)}")
            continue
        used = (r.setting.probes if r.setting else None) or []
        metrics = r.metrics
        for p in probes:
            if p not in used:
                problems.append(f"{name}: probe {p} was not used")
                continue
            for spec in probemod.PROBES[p].metrics:
                if spec.expected and spec.name not in metrics:
                    problems.append(f"{name}: no {spec.name!r}")
        if r.watch is None and not any(m.startswith("balance ") for m in metrics):
            problems.append(f"{name}: no /proc/schedstat balance counts")
        if "cpu busy" not in metrics:
            problems.append(f"{name}: no CPU busy % from /proc/stat")
        for m, v in metrics.items():
            if not math.isfinite(v["value"]):
                problems.append(f"{name}: {m} = {v['value']}")
        for m in ("should_we_balance calls per s", "migrations per s"):
            if m in metrics and metrics[m]["value"] <= 0:
                problems.append(f"{name}: {m} is zero")
    return problems
