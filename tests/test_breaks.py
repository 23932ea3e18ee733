"""The deliberate breaks: records, their edit, the verdict."""

import re

import pytest

from schedlab import breaks
from schedlab.series import patches_dir, read_series
from schedlab.util import LabError


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


def test_a_break_is_caught_only_by_a_failed_test():
    assert breaks.verdict(failed=1, passed=40) == "caught"
    assert breaks.verdict(failed=0, passed=40) == "MISSED"
    assert breaks.verdict(failed=0, passed=0) == "no result"


def test_unknown_names_are_refused():
    with pytest.raises(LabError, match="unknown break"):
        breaks.get(["no-such-break"])
    assert breaks.get([]) == list(breaks.BREAKS)
