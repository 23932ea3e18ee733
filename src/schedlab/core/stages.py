"""Stages as data: a record per stage, its outcome a value, the verdict counted.

A test tier is a list of Stage records over a context of the caller's type;
run() runs them in order (a stage whose needs did not pass is skipped, one
that raises is failed, a Ctrl-C leaves the rest not run).  A command whose
steps are not a fixed list times them with Report.stage() instead.
"""

from __future__ import annotations

import enum
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generic, Iterator, List, Optional, Sequence, Tuple, TypeVar

from schedlab.core.util import LabError, fmt_secs, say


class Outcome(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"     # a stage it needs did not pass
    NOT_RUN = "not run"     # interrupted before its turn


Context = TypeVar("Context")


@dataclass(frozen=True)
class Stage(Generic[Context]):
    """One stage: its name, what it runs and the stages it needs.

    run takes the shared context (a record of the caller's that the stages
    fill: the tree, the builds) and returns True when the stage passed;
    False or an exception is a failure."""
    name: str
    run: Callable[[Context], bool]
    needs: Tuple[str, ...] = ()
    tier: str = "test"      # "test" or "full": the tier that adds it


@dataclass
class Result:
    name: str
    outcome: Outcome
    seconds: float = 0.0
    detail: str = ""

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "outcome": self.outcome.value,
                "seconds": round(self.seconds, 1), "detail": self.detail}


@dataclass
class Report:
    """What a run of stages gave: one Result per stage, in order."""
    title: str
    results: List[Result] = field(default_factory=list)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome is outcome)

    @property
    def ok(self) -> bool:
        return all(r.outcome is Outcome.PASSED for r in self.results)

    def closing_line(self) -> str:
        return (f"{self.title}: {self.count(Outcome.PASSED)} passed, "
                f"{self.count(Outcome.FAILED)} failed, {self.count(Outcome.SKIPPED)} skipped")

    def summary(self) -> str:
        width = max([len(r.name) for r in self.results] + [5])
        lines = ["stage times:"]
        for r in self.results:
            took = fmt_secs(r.seconds) if r.outcome in (Outcome.PASSED, Outcome.FAILED) else "-"
            why = f"  ({r.detail})" if r.detail and r.outcome is not Outcome.PASSED else ""
            lines.append(f"  {r.name:<{width}}  {took:>7}  {r.outcome.value}{why}")
        total = sum(r.seconds for r in self.results)
        lines.append(f"  {'total':<{width}}  {fmt_secs(total):>7}")
        return "\n".join(lines)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as a stage: passed, or failed when it raises (the
        exception goes on)."""
        say(f"==> {name}")
        start = time.monotonic()
        outcome = Outcome.FAILED
        try:
            yield
            outcome = Outcome.PASSED
        finally:
            took = time.monotonic() - start
            self.results.append(Result(name, outcome, took))
            say(f"<== {name}: {outcome.value} in {fmt_secs(took)}")

    def verdict_lines(self) -> List[str]:
        lines = []
        for outcome in (Outcome.FAILED, Outcome.SKIPPED, Outcome.NOT_RUN):
            names = [r.name for r in self.results if r.outcome is outcome]
            if names:
                lines.append(f"{outcome.value} stages: {', '.join(names)}")
        lines.append(self.closing_line())
        return lines


def check_stages(stages: Sequence[Stage]) -> None:
    """Names unique, every need an earlier stage: a broken list is a bug."""
    seen: set = set()
    for s in stages:
        if s.name in seen:
            raise ValueError(f"stage {s.name!r} is listed twice")
        missing = [n for n in s.needs if n not in seen]
        if missing:
            raise ValueError(f"stage {s.name!r} needs {missing}, which do not come before it")
        seen.add(s.name)


def _run_one(stage: Stage[Context], ctx: Context) -> Result:
    say(f"==> {stage.name}")
    start = time.monotonic()
    detail = ""
    try:
        ok = bool(stage.run(ctx))
    except LabError as exc:
        ok, detail = False, str(exc).splitlines()[0] if str(exc) else "error"
        say(f"  FAIL: {exc}")
    except Exception as exc:  # a bug in a stage fails that stage, not the tier
        ok, detail = False, f"{type(exc).__name__}: {exc}"
        say("  FAIL: the stage raised:\n" + traceback.format_exc().rstrip())
    took = time.monotonic() - start
    outcome = Outcome.PASSED if ok else Outcome.FAILED
    say(f"<== {stage.name}: {outcome.value} in {fmt_secs(took)}")
    return Result(stage.name, outcome, took, detail)


def run(title: str, stages: Sequence[Stage[Context]], ctx: Context,
        on_result: Optional[Callable[[Result], None]] = None) -> Report:
    """Run the stages in order; the summary and the closing line are printed
    in every case, also when interrupted (KeyboardInterrupt is raised again
    after them)."""
    check_stages(stages)
    report = Report(title)
    outcome_of: Dict[str, Outcome] = {}
    interrupted: Optional[BaseException] = None   # raised again once all is printed
    try:
        for stage in stages:
            if interrupted is not None:
                result = Result(stage.name, Outcome.NOT_RUN, detail="interrupted")
            else:
                failed_needs = [n for n in stage.needs if outcome_of[n] is not Outcome.PASSED]
                if failed_needs:
                    result = Result(stage.name, Outcome.SKIPPED,
                                    detail="needs " + ", ".join(failed_needs))
                    say(f"--- {stage.name}: skipped (needs {', '.join(failed_needs)})")
                else:
                    try:
                        result = _run_one(stage, ctx)
                    except (KeyboardInterrupt, SystemExit) as exc:   # Ctrl-C, SIGTERM
                        interrupted = exc
                        result = Result(stage.name, Outcome.NOT_RUN, detail="interrupted")
            outcome_of[stage.name] = result.outcome
            report.results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        say(report.summary())
        for line in report.verdict_lines():
            say(line)
    if interrupted is not None:
        raise interrupted
    return report
