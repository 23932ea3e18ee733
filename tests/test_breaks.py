"""The deliberate breaks: records, their edit, the verdict."""

import re
import subprocess

import pytest

from schedlab.core.source import Tree
from schedlab.core.util import LabError
from schedlab.series import breaks
from schedlab.series.patchset import patches_dir, read_series


def hunk_post_images(path: str):
    """The new side (context and added lines) of every hunk of patches/ on PATH."""
    for patch in read_series(patches_dir()):
        for diff in re.split(r"^diff --git ", patch.read_text(), flags=re.M)[1:]:
            if not diff.startswith(f"a/{path} "):
                continue
            for hunk in re.split(r"^@@.*$", diff, flags=re.M)[1:]:
                yield "\n".join(ln[1:] for ln in hunk.splitlines()
                                if ln[:1] in (" ", "+"))


def test_every_break_edits_code_the_series_has():
    for b in breaks.BREAKS:
        assert any(b.old in img for img in hunk_post_images(b.path)), b.name


def test_names_are_unique_and_each_break_changes_something():
    names = [b.name for b in breaks.BREAKS]
    assert len(names) == len(set(names))
    assert all(b.old != b.new and b.what and b.tests for b in breaks.BREAKS)


def test_apply_needs_the_text_exactly_once():
    b = breaks.Break("x", "what", "a;", "b;")
    assert breaks.apply("a; c;", b) == "b; c;"
    assert breaks.apply("c;", b) is None
    assert breaks.apply("a; a;", b) is None


def test_a_break_is_caught_only_by_a_failed_assertion():
    assert breaks.verdict(failed=1, crashed=0, passed=40) == "caught"
    assert breaks.verdict(failed=2, crashed=1, passed=40) == "caught"
    assert breaks.verdict(failed=1, crashed=1, passed=40) == "crashed"
    assert breaks.verdict(failed=0, crashed=0, passed=40) == "MISSED"
    assert breaks.verdict(failed=0, crashed=0, passed=0) == "no result"


def test_a_break_commit_leaves_the_work_tree_alone(tmp_path):
    repo = tmp_path / "tree"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "kernel").mkdir()
    (repo / "kernel" / "f.c").write_text("int a;\nint b;\n")
    for cmd in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t.t", "commit", "-qm",
                                "base"]):
        subprocess.run(["git", "-C", str(repo), *cmd], check=True)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    tree = Tree(key="t", path=repo, base=head, description="t")
    b = breaks.Break("b-to-c", "b is c", "int b;", "int c;", path="kernel/f.c")
    commit = breaks.break_commit(tree, head, b)
    shown = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:kernel/f.c"],
                           check=True, capture_output=True, text=True).stdout
    assert shown == "int a;\nint c;\n"
    assert (repo / "kernel" / "f.c").read_text() == "int a;\nint b;\n"
    assert subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], check=True,
                          capture_output=True, text=True).stdout == ""
    stale = breaks.Break("gone", "x", "int z;", "int y;", path="kernel/f.c")
    assert breaks.break_commit(tree, head, stale) is None


def test_unknown_names_are_refused():
    with pytest.raises(LabError, match="unknown break"):
        breaks.get(["no-such-break"])
    assert breaks.get([]) == list(breaks.BREAKS)
