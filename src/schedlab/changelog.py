"""The changelog rules of the series check: how much prose a patch's
changelog holds, and how many tables.

The changelog is the commit message below its subject, above the '---'
line, without its trailer block (Link:, Fixes:, Signed-off-by: ...).  Its
lines are prose but for those of command blocks and of tables:

- a command block is a run of consecutive indented lines whose first line
  starts with "./", "$ " or a known tool (TOOLS; a path's last part
  counts, tools/testing/kunit/kunit.py is kunit.py), with the lines that
  follow a trailing backslash;
- a table is a run of consecutive indented lines, not a bullet list (no
  line starting with "- " or "* " after its indent), with two lines or
  more whose columns are separated by two spaces or more; it spans its
  first such line to its last, so a label line between its rows (a
  workload's name over the rows of that workload) is part of it, and the
  indented lines around that span are prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List

from .mailform import split_patch, split_trailers

MAX_PROSE = 45
MAX_TABLES = 1
TOOLS = frozenset({
    "b4", "bpftrace", "cat", "checkpatch.pl", "chrt", "echo", "git", "hackbench", "kunit.py",
    "make", "modprobe", "netperf", "nproc", "numactl", "perf", "perl", "python3", "schbench",
    "stress-ng", "sudo", "sysctl", "taskset", "tbench", "trace-cmd", "vng",
})
_GAP = re.compile(r"\S {2,}\S")
_BULLET = re.compile(r"^[-*] ")


@dataclass(frozen=True)
class Shape:
    prose: int     # lines
    tables: int


def _indented(line: str) -> bool:
    return line[:1] in (" ", "\t") and bool(line.strip())


def _command(line: str) -> bool:
    text = line.strip()
    if text.startswith(("./", "$ ")):
        return True
    return text.split()[0].rsplit("/", 1)[-1] in TOOLS


def shape(text: str) -> Shape:
    """The prose lines and the tables of a changelog's text."""
    lines = text.splitlines()
    prose = tables = 0
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        if not _indented(lines[i]):
            prose += 1
            i += 1
            continue
        j = i + 1
        while j < len(lines) and (_indented(lines[j]) or (
                lines[j].strip() and lines[j - 1].rstrip().endswith("\\"))):
            j += 1
        run = [ln.strip() for ln in lines[i:j]]
        i = j
        if _command(run[0]):
            continue
        rows = [k for k, ln in enumerate(run) if _GAP.search(ln)]
        if len(rows) < 2 or any(_BULLET.match(ln) for ln in run):
            prose += len(run)
            continue
        tables += 1
        prose += len(run) - (rows[-1] - rows[0] + 1)
    return Shape(prose, tables)


def changelog(patch_text: str) -> str:
    """The changelog of a format-patch file: its commit message below the
    subject, without the trailer block."""
    _, message, _ = split_patch(patch_text)
    return "\n".join(split_trailers(message)[0]).strip("\n")


def length_problems(patch_text: str) -> List[str]:
    """More than MAX_PROSE prose lines or MAX_TABLES tables in the changelog."""
    got = shape(changelog(patch_text))
    out = []
    if got.prose > MAX_PROSE:
        out.append(f"changelog: {got.prose} prose lines (at most {MAX_PROSE})")
    if got.tables > MAX_TABLES:
        out.append(f"changelog: {got.tables} tables (at most {MAX_TABLES})")
    return out
