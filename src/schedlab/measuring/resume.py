"""Runs that resume: the record of a request, kept beside its results.

Detail: docs/modules.md, section measuring/resume.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from schedlab.core.util import LabError, package_file
from schedlab.measuring.plan import Plan

RECORD = "request.json"


def plan_fields(plan: Plan) -> Dict[str, Any]:
    """What of a plan a record holds (the latency tool as asked for: 'auto'
    stays 'auto' even where ab pins it to base's).  A plan that names its
    warm-ups (the hardware kit's, resumed across reboots and days) holds
    them and its workloads' commands too, the lab's folder left out: a
    benchmark changed between two boots is refused, not mixed."""
    lab = str(package_file("guest"))
    return {"plan": plan.names(), "probes": list(plan.probes), "runs": plan.runs,
            "seconds": plan.seconds, "attach": plan.attach, "latency_tool": plan.latency_tool,
            "accel": plan.accel, "knobs": dict(plan.knobs),
            **({"warmup": True} if plan.warmup else {}),
            **({"warm": list(plan.warm),
                "commands": {w.name: w.command.replace(lab, "GUEST") for w in plan.workloads}}
               if plan.warm else {})}


def _plain(value: Any) -> Any:
    """VALUE as JSON gives it back (tuples as lists), for comparing."""
    return json.loads(json.dumps(value, sort_keys=True))


@dataclass
class Record:
    """A request, the builds it measured and the boots finished, as (unit, boot)
    with unit an arm's name ('ab') or 'measure'."""
    command: str
    request: Dict[str, Any]
    builds: Dict[str, Any] = field(default_factory=dict)
    finished: List[Tuple[str, int]] = field(default_factory=list)

    def done(self, unit: str, boot: int) -> bool:
        return (unit, boot) in self.finished

    def finish(self, unit: str, boot: int) -> None:
        if not self.done(unit, boot):
            self.finished.append((unit, boot))

    def to_json(self) -> Dict[str, Any]:
        return {"command": self.command, "request": self.request, "builds": self.builds,
                "finished": [list(f) for f in self.finished]}

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Record":
        return cls(str(d.get("command", "")), dict(d.get("request") or {}),
                   dict(d.get("builds") or {}),
                   [(str(u), int(b)) for u, b in d.get("finished") or []])


def read(folder: Path) -> Optional[Record]:
    path = folder / RECORD
    if not path.is_file():
        return None
    try:
        return Record.from_json(json.loads(path.read_text()))
    except (ValueError, TypeError, AttributeError) as exc:
        raise LabError(f"{path}: not a record of a request ({exc}); --fresh measures again "
                       "and writes a new one") from exc


def write(folder: Path, record: Record) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RECORD).write_text(json.dumps(record.to_json(), indent=1, sort_keys=True) + "\n")


def _show(value: Any) -> str:
    return "(none)" if value is None else json.dumps(value, sort_keys=True)


def differences(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    """'FIELD: OLD there, NEW now' for every field that differs."""
    old, new = _plain(old), _plain(new)
    return [f"{k}: {_show(old.get(k))} there, {_show(new.get(k))} now"
            for k in list(new) + [k for k in old if k not in new] if old.get(k) != new.get(k)]


def _refusal(folder: Path, record: Record, diffs: List[str]) -> LabError:
    n = len(record.finished)
    return LabError(f"{folder} holds {n} finished boot(s) of another request; this one "
                    "differs in:\n  " + "\n  ".join(diffs) + "\n--fresh measures again from "
                    "the start (replacing them); another --label keeps them")


def more_boots(old: Dict[str, Any], new: Dict[str, Any]) -> bool:
    """NEW is OLD with more boots (of two or more: one boot's runs are laid
    out apart), and nothing else changed: the boots finished stand."""
    old, new = _plain(old), _plain(new)
    was, now = old.get("boots"), new.get("boots")
    if not isinstance(was, int) or not isinstance(now, int) or not 1 < was < now:
        return False
    return {k: v for k, v in old.items() if k != "boots"} == \
        {k: v for k, v in new.items() if k != "boots"}


def start(folder: Path, command: str, request: Dict[str, Any], fresh: bool,
          result_sets: Iterable[Path] = ()) -> Record:
    """The record to go on with in FOLDER: the one there, with its finished
    boots, when it holds the same request; a new one (written at once) when
    there is none, none of its boots finished, or FRESH.  Refuses a request
    that differs from a record with finished boots, and RESULT_SETS holding
    runs without a record (older runs, or another command's)."""
    old = read(folder)
    if old is not None and old.finished and not fresh:
        diffs = differences({"command": old.command, **old.request},
                            {"command": command, **request})
        if diffs and more_boots(old.request, request):
            old.request = _plain(request)   # the same request with boots added
            write(folder, old)
            return old
        if diffs:
            raise _refusal(folder, old, diffs)
        return old
    if old is None and not fresh:
        held = [p for p in result_sets if p.is_dir() and any(p.glob("run-*.json"))]
        if held:
            raise LabError(f"{held[0]} holds results without a record of their request (from "
                           "before runs could resume, or from another command): --fresh "
                           "measures again (replacing them); another --label keeps them")
    record = Record(command, _plain(request))
    write(folder, record)
    return record


def check_builds(folder: Path, record: Record, builds: Dict[str, Any]) -> None:
    """The builds' identity: refused when it differs from the one the finished
    boots measured (the series or the tree changed since), kept otherwise.
    A build the record does not name yet joins it (on a machine, the other
    kernel's arms measured in another boot of it)."""
    builds = _plain(builds)
    unknown = any(not v for b in builds.values() if isinstance(b, dict) for v in b.values())
    if unknown:     # a build the lab did not record (made by hand): nothing to hold it to
        return
    held = {k: v for k, v in record.builds.items() if k in builds}
    if record.finished and held and held != builds:
        diffs = differences(held, {k: v for k, v in builds.items() if k in held})
        raise _refusal(folder, record, [f"builds: {d}" for d in diffs])
    record.builds = {**record.builds, **builds} if record.finished else builds
    write(folder, record)
