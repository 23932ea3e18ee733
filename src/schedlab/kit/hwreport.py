"""The hardware kit's report: one Markdown file a user posts with the series.

Detail: docs/modules.md, section kit/hwreport.py.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from schedlab.kit.arms import LLC_OFF

REPORT = "report.md"


@dataclass(frozen=True)
class ArmState:
    """One arm as the report shows it: its writes, and how many of its runs
    finished out of those planned."""
    name: str
    what: str
    knobs: Tuple[Tuple[str, str], ...]
    done: int
    planned: int
    before: str = ""    # the arm of the patch before: compared with it too
    baseline: str = ""  # the stock kernel's arm: compared with it too


def load_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _text(path: Path) -> str:
    try:
        return path.read_text().rstrip("\n")
    except OSError:
        return ""


def runs_done(folder: Path) -> int:
    """The runs an arm finished: its rounds' run-*.json (boot-K/ per round,
    pooled into the arm's folder after the last), else its own, counting
    only complete ones (an interrupted round writes its unfinished runs
    too, marked incomplete)."""
    files = list(folder.glob("boot-*/run-*.json")) or list(folder.glob("run-*.json"))
    return sum(1 for f in files if load_json(f).get("complete"))


def machine_section(machine: dict) -> List[str]:
    if not machine:
        return ["No record of the machine (work/hw/machine.json): run `./schedlab hw --check`."]
    first = _lscpu_fields(machine.get("lscpu", ""))
    rows = [("model", machine.get("model") or first.get("Model name", "")),
            ("CPU", first.get("Model name", "")),
            ("CPUs", first.get("CPU(s)", "")),
            ("threads per core", str(machine.get("threads_per_core", ""))),
            ("SMT mode (ppc64_cpu --smt)", machine.get("smt_mode", "")),
            ("sockets", first.get("Socket(s)", "")),
            ("NUMA nodes", first.get("NUMA node(s)", "")),
            ("firmware", machine.get("firmware", "")),
            ("cache aware scheduling (llc_balancing/enabled; active, with several LLCs: "
             "SG_STATS_REUSE keeps no sums)", machine.get("llc_balancing", "")),
            ("kernel", machine.get("kernel", "")),
            ("built by the lab from sources (git tree hash)",
             " ".join(v for v in ((machine.get("identity") or {}).get("variant", ""),
                                  (machine.get("identity") or {}).get("sources", "")) if v)),
            ("config hash", machine.get("config_hash", ""))]
    noise = machine.get("noise") or {}
    rows += [(k, ", ".join(v) if isinstance(v, list) else str(v))
             for k, v in noise.items() if k != "busy processes"]
    busy = noise.get("busy processes")
    rows.append(("other busy processes (over 5% of a CPU for 1 s before the runs)",
                 ", ".join(busy) if busy else "none" if busy == [] else ""))
    rows += [(f"the {k} kernel", kernel_line(v)) for k, v in
             (machine.get("kernels") or {}).items()]
    out = ["| | |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in rows if v]
    if machine.get("lpar"):
        out += ["", "LPAR (/proc/powerpc/lparcfg, first lines):", "", "```",
                *machine["lpar"].splitlines()[:12], "```"]
    out += ["", "Kernel command line:", "", "```", machine.get("cmdline", ""), "```",
            "", "The whole record (lscpu, NUMA): `machine.json` beside this report."]
    return out


def kernel_line(ident: dict) -> str:
    """A kernel as the reports name it: its release, and the sources and
    config it was built from where the lab built it."""
    more = [f"sources {ident['sources']}" if ident.get("sources") else "",
            f"config {ident['config']}" if ident.get("config") else ""]
    return ident.get("release", "") + "".join(f", {m}" for m in more if m)


def _lscpu_fields(text: str) -> Dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def arms_section(arms: Sequence[ArmState]) -> List[str]:
    out = ["| arm | what | writes before its runs | runs finished |",
           "|---|---|---|---:|"]
    for a in arms:
        # Features are written one at a time (guest/run-plan.sh).
        writes = "; ".join(f"`echo {w} > /sys/kernel/debug/sched/{k}`" for k, v in a.knobs
                           for w in (v.split() if k == "features" else [v]))
        out.append(f"| {a.name} | {a.what} | {writes or 'none'} | {a.done} of {a.planned} |")
    return out


def _images(folder: Path, rel: str) -> List[str]:
    return [f"![{p.stem}]({rel}/{p.name})" for p in sorted(folder.glob("*.png"))]


def pairs(arms: Sequence[ArmState]) -> List[Tuple[str, str, str]]:
    """(A, B, title) of every comparison the report shows: each arm against
    the reference (the first), then each arm against the arm of the patch
    before it (that patch's own effect)."""
    ref = arms[0].name

    def llc_off(a: ArmState) -> bool:
        return any(k == LLC_OFF[0][0] and v == LLC_OFF[0][1] for k, v in a.knobs)
    out = [(ref, a.name, f"{a.name} against {ref}" + (
        f" (cache aware scheduling off in {a.name} only)"
        if llc_off(a) and not llc_off(arms[0]) else "")) for a in arms[1:]]
    names = {a.name for a in arms}
    out += [(a.baseline, a.name, f"{a.name} against {a.baseline}: against the kernel users "
             "run") for a in arms if a.baseline in names and a.baseline != ref]
    out += [(a.before, a.name, f"{a.name} against {a.before}: the patch's own effect")
            for a in arms if a.before in names and a.before != ref]
    return out


def pair_sections(results: Path, arms: Sequence[ArmState]) -> List[str]:
    """Each pair's headline table and plots, as 'ab' wrote them; it names
    the files with the pair's tag when it had more than one pair."""
    out: List[str] = []
    every = pairs(arms)
    for a_name, b_name, title in every:
        # 'ab' compares the same pairs; with one pair it keeps plain names.
        tag = "" if len(every) == 1 else f"-{a_name}-vs-{b_name}"
        head = results / f"headline{tag}.md"
        out += ["", f"### {title}", ""]
        text = _text(head)
        if not text:
            out.append("Not compared yet: no finished runs of both arms.")
            continue
        out += [text, "", f"Every metric: `compare{tag}.md`."]
        out += ["", *_images(results / f"plots{tag}", f"plots{tag}")]
    return out


def title(machine: dict, pass_name: str = "") -> str:
    """The report's title: the machine and the pass."""
    return (f"The series on {machine.get('model') or 'this machine'}: the hardware kit's "
            "report" + (f", the {pass_name} pass" if pass_name else ""))


def write(results: Path, machine: dict, arms: Sequence[ArmState], argv: Sequence[str],
          missing: Sequence[str] = (), left_out: Sequence[str] = (),
          settings: Optional[Dict[str, object]] = None,
          probes_missing: Sequence[str] = (), about: str = "",
          notes: Sequence[str] = (), pass_name: str = "",
          family: Sequence[str] = ()) -> Path:
    """The report into RESULTS/report.md (work/results/hw/, beside the 'ab'
    tables and plots it shows), with MACHINE's record in machine.json."""
    results.mkdir(parents=True, exist_ok=True)
    (results / "machine.json").write_text(json.dumps(machine, indent=1) + "\n")
    lines = [f"# {title(machine, pass_name)}", ""]
    lines += ["Written by `./schedlab hw` from the runs that finished. "
              "Each arm is a state of one booted kernel, switched by the writes below; "
              "the arms ran interleaved, every arm once a round, so that what changes "
              "between rounds lands in every arm alike.", ""]
    if about:
        lines += [about, ""]
    lines += ["## The machine", "", *machine_section(machine)]
    lines += ["", "## How it was run", "", "```", shlex.join(list(argv)), "```"]
    if settings:
        lines += ["", ", ".join(f"{k}: {v}" for k, v in settings.items())]
    lines += ["", "Each run's raw files are in "
              f"`work/measure/{results.name}-ARM-DATE/BENCHMARK-N/`: the "
              "probes' output, funclatency's, perf stat's, and perf c2c's table by cache "
              "line (`c2c-report.txt`, which lines and functions the modified-line loads "
              "hit) where it recorded."]
    lines += ["", "## The arms", "", *arms_section(arms)]
    lines += ["", "## Every arm against the reference", "",
              f"The reference is `{arms[0].name}`. 'pct imp' > 0: the arm did better; "
              "'*' in the tables below: the 95% confidence intervals of the means do not "
              "overlap, each comparison alone; only a '*' of the corrected family "
              "(next section) may be called a difference, and its absence is not a proof "
              "of none. "
              "The A/A margin is how far the reference's repeated arm moved by chance: a "
              "change inside it is one these runs cannot tell from noise."]
    eq = _text(results / "equivalence.md")
    lines += ["", "### The A/A margins and each arm's verdict", "",
              eq or "No A/A margin in this report: it comes from the reference's repeat "
              "(series-again) in a run of three arms or more, once its runs finished."]
    if family:
        lines += ["", "### What survives the correction for many comparisons", "", *family]
    lines += pair_sections(results, arms)
    if notes:
        lines += ["", "## Notes of the runs", "",
                  "What the runs' parsers said beside their numbers (each once):", "",
                  *[f"- {n}" for n in notes]]
    gaps = [f"- the arm {m} (this kernel lacks what it switches)" for m in missing]
    gaps += [f"- the benchmark {b}" for b in left_out]
    gaps += [f"- a measurement: {p}" for p in probes_missing]
    gaps += [f"- {a.name}: {a.planned - a.done} run(s) not finished" for a in arms
             if a.done < a.planned]
    if gaps:
        lines += ["", "## Not in this report", "", *gaps,
                  "", "The same command run again (without --fresh) resumes the runs that "
                  "did not finish."]
    path = results / REPORT
    path.write_text("\n".join(lines) + "\n")
    return path


def _run_lines(folders: Sequence[Path], key: str) -> List[str]:
    out: List[str] = []
    for folder in folders:
        for f in sorted(folder.glob("run-*.json")):
            try:
                lines = json.loads(f.read_text()).get(key) or []
            except (OSError, ValueError):
                continue
            out += [ln for ln in lines if ln not in out]
    return out


def probes_missing(folders: Sequence[Path]) -> List[str]:
    """What the runs in FOLDERS could not measure on this machine (each run
    records its guest's or host's probes-missing lines), in order, once."""
    return _run_lines(folders, "probes_missing")


def run_notes(folders: Sequence[Path]) -> List[str]:
    """The runs' notes (a parser's findings that do not make a run
    incomplete: the lb-share replay's clock checks), in order, once; the
    numbers in them (which run, how far) make most lines differ."""
    return _run_lines(folders, "notes")
