"""The hardware kit's switches (patches/kit/): are the copies the patches?

Detail: docs/modules.md, section series/kit_copies.py.
"""

from __future__ import annotations

from typing import List, Optional

from schedlab.core.source import Tree
from schedlab.core.util import LabError, git
from schedlab.series import topics
from schedlab.series.patchset import am_in_progress, ensure_variant, kit_dir, read_series

TOPIC = "swb"
FUNCTION = "__should_we_balance"
FAIR = "kernel/sched/fair.c"


def function_text(src: str, name: str) -> Optional[str]:
    """The definition of the static __always_inline int function
    NAME(struct lb_env *env, ...) in SRC, from its first line to its closing
    brace; None when absent."""
    head = f"static __always_inline int\n{name}(struct lb_env *env,"
    start = src.find(head)
    if start < 0:
        return None
    end = src.find("\n}\n", start)
    return src[start:end + 3] if end >= 0 else None


def state_commits(tree: Tree, tip: str) -> List[str]:
    """The commit of each state: the one before the topic's first patch,
    then the commit of each of its patches (in base..tip of the series)."""
    topic = next((t for t in topics.read_topics() if t.name == TOPIC), None)
    if topic is None:
        raise LabError(f"patches/topics names no topic {TOPIC!r}: the kit's states are its "
                       "patches")
    commits = git(tree.path, "rev-list", "--reverse", f"{tree.base}..{tip}").split()
    before = commits[topic.first - 2] if topic.first > 1 else tree.base
    return [before] + commits[topic.first - 1:topic.last]


def compare(kit_src: str, originals: List[Optional[str]]) -> List[str]:
    """Problems: a state whose copy in KIT_SRC is not ORIGINALS[state]
    (should_we_balance() at that state's commit) under the copy's name."""
    problems = []
    for state, orig in enumerate(originals):
        name = f"{FUNCTION}_s{state}"
        copy = function_text(kit_src, name)
        if orig is None:
            problems.append(f"state {state}: no {FUNCTION}() at its commit")
        elif copy is None:
            problems.append(f"state {state}: the kit's fair.c has no {name}()")
        elif copy != orig.replace(f"\n{FUNCTION}(", f"\n{name}(", 1):
            problems.append(f"state {state}: {name}() is not {FUNCTION}() of its commit: "
                            "make the kit's patch again from the series")
    extra = function_text(kit_src, f"{FUNCTION}_s{len(originals)}")
    if extra is not None:
        problems.append(f"the kit has a state {len(originals)}, the topic {TOPIC} only "
                        f"{len(originals) - 1} patches")
    return problems


def check(tree: Tree) -> Optional[List[str]]:
    """The kit's copies against the series' commits: the problems, or None
    when there is no kit (patches/kit/ lists no patch)."""
    if not read_series(kit_dir()):
        return None
    try:
        tip = ensure_variant(tree, "posted")
        kit = ensure_variant(tree, "patched", kit=True)
        commits = state_commits(tree, tip)
    except LabError as e:
        if not am_in_progress(tree):
            return [f"the kit's patch cannot be checked: {e}"]
        # The checks after this one need a tree that is not in the middle
        # of git am: say which patch failed, and leave the tree as it was.
        git(tree.path, "am", "--abort", check=False)
        return [f"the kit's patch cannot be checked: {str(e).splitlines()[0]}; the git am "
                f"was aborted (run './schedlab series apply --kit' to resolve it, then "
                f"'./schedlab series export --kit')"]
    originals = [function_text(git(tree.path, "show", f"{c}:{FAIR}"), FUNCTION)
                 for c in commits]
    return compare(git(tree.path, "show", f"{kit}:{FAIR}"), originals)
