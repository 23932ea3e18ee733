"""The lab's own commit subjects: at most 72 characters, an area prefix.

.ci/commit-lint-base names the last commit before the rule; the commits
after it, up to HEAD, are checked.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

from schedlab.core.util import git

BASE_FILE = Path(".ci") / "commit-lint-base"
MAX_SUBJECT = 72
# "area: what", the area one lowercase word of a wing, module, path or
# doc ("kunit", "lb-time", "docs/results"), then the summary; or git's
# revert subject.
SUBJECT = re.compile(r"^(?:[a-z0-9_./-]+: \S|Revert \")")
FIX = "reword it with git rebase -i BASE (r)"


def subject_problems(subject: str) -> List[str]:
    """What is wrong with one subject line (empty when nothing)."""
    out = []
    if len(subject) > MAX_SUBJECT:
        out.append(f"{len(subject)} characters (at most {MAX_SUBJECT})")
    if not SUBJECT.match(subject):
        out.append("not 'area: summary' (one lowercase area of [a-z0-9_./-], "
                   "one space after the colon)")
    return out


def check(repo: Path) -> List[str]:
    """One line per commit after the base whose subject breaks the rule, or
    a line saying why the commits could not be read."""
    base_file = repo / BASE_FILE
    if not (repo / ".git").exists():
        return [f"{repo} is not a git checkout: the commit subjects cannot be read"]
    words = base_file.read_text().split() if base_file.is_file() else []
    if not words:
        return [f"{BASE_FILE} is missing or empty: it names the last commit before the rule"]
    base = words[0]
    if not git(repo, "rev-parse", "-q", "--verify", f"{base}^{{commit}}", check=False):
        shallow = git(repo, "rev-parse", "--is-shallow-repository", check=False) == "true"
        return [f"{BASE_FILE} names {base}, which this clone does not have"
                + (" (a shallow clone: git fetch --unshallow)" if shallow else "")]
    log = git(repo, "log", "--no-merges", "--format=%h%x00%s", f"{base}..HEAD")
    out = []
    for line in log.splitlines():
        sha, subject = line.split("\0", 1)
        problems = subject_problems(subject)
        if problems:
            out.append(f"{sha} {subject[:60]}: {'; '.join(problems)}; "
                       + FIX.replace("BASE", base[:12]))
    return out
