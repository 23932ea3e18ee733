"""The changelog rules of the series check: how much prose a patch's
changelog holds, how many tables, and no version number of the series.

Detail: docs/modules.md, section series/changelog.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List

from schedlab.series.mailform import split_patch, split_trailers

MAX_PROSE = 45
MAX_TABLES = 1
TOOLS = frozenset({
    "b4", "bpftrace", "cat", "checkpatch.pl", "chrt", "echo", "git", "hackbench", "kunit.py",
    "make", "modprobe", "netperf", "nproc", "numactl", "perf", "perl", "python3", "schbench",
    "stress-ng", "sudo", "sysctl", "taskset", "tbench", "trace-cmd", "vng",
})
_GAP = re.compile(r"\S {2,}\S")
_BULLET = re.compile(r"^[-*] ")
VERSION = re.compile(r"\bv(8|9|1[0-9])\b")
_PREFIX = re.compile(r"^\[[^\]]*\bPATCH v\d+[^\]]*\]")
_SHOWN = 3    # places named in a problem


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


def version_problems(patch_text: str) -> List[str]:
    """A version number of the series in the subject ([PATCH vN ...] or the
    title), the changelog or a line the patch adds: one problem naming the
    first places."""
    headers, _, rest = split_patch(patch_text)
    m = re.search(r"^Subject: (.*(?:\n[ \t].*)*)", headers, re.M)
    subject = " ".join(m.group(1).split()) if m else ""
    places = []
    prefix = _PREFIX.match(subject)
    if prefix:
        places.append(f"{prefix.group(0)} in the subject")
    title = subject[prefix.end():] if prefix else subject
    places += [f"{v.group(0)} in the subject" for v in VERSION.finditer(title)]
    for line in changelog(patch_text).splitlines():
        places += [f"{v.group(0)} in the changelog: {line.strip()}"
                   for v in VERSION.finditer(line)]
    path = ""
    for line in rest:
        if line.startswith("diff --git "):
            path = line.rsplit(" b/", 1)[-1]
        elif line.startswith("+") and not line.startswith("+++ "):
            places += [f"{v.group(0)} added to {path}: {line[1:].strip()}"
                       for v in VERSION.finditer(line)]
    if not places:
        return []
    more = f" (and {len(places) - _SHOWN} more)" if len(places) > _SHOWN else ""
    return ["version number: " + "; ".join(places[:_SHOWN]) + more]
