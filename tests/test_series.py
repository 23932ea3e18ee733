"""Series parsing, patch parsing and cover-letter handling."""

import pytest

from schedlab.core.util import LabError
from schedlab.series import patchset as s

PATCH = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A Developer <dev@example.test>
Date: Sun, 22 Nov 2026 10:00:00 +0000
Subject: [PATCH 1/2] sched/fair: Skip the scan on busy CPUs that
 cannot win

Context, problem, solution.

Signed-off-by: A Developer <dev@example.test>
---
 kernel/sched/fair.c | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/kernel/sched/fair.c b/kernel/sched/fair.c
index 1111111..2222222 100644
--- a/kernel/sched/fair.c
+++ b/kernel/sched/fair.c
@@ -1 +1 @@
-a
+b
diff --git a/kernel/sched/tests/fair_kunit.c b/kernel/sched/tests/fair_kunit.c
new file mode 100644
"""

COVER = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A Developer <dev@example.test>
Subject: [PATCH 0/2] sched/fair: SMT balancing

The blurb, line one.

Line two.

A Developer (2):
  sched/fair: one
  sched/fair: two

 kernel/sched/fair.c | 2 +-
"""


def test_parse_patch():
    info = s.parse_patch(PATCH)
    assert info["subject"] == "sched/fair: Skip the scan on busy CPUs that cannot win"
    assert info["signoffs"] == ["A Developer <dev@example.test>"]
    assert info["files"] == ["kernel/sched/fair.c", "kernel/sched/tests/fair_kunit.c"]


def test_signoff_below_the_cut_does_not_count():
    text = PATCH.replace("Signed-off-by: A Developer <dev@example.test>\n---\n",
                         "---\nSigned-off-by: A Developer <dev@example.test>\n")
    assert s.parse_patch(text)["signoffs"] == []


def test_read_series_order_comments_and_errors(tmp_path):
    (tmp_path / "0002-b.patch").write_text(PATCH)
    (tmp_path / "0001-a.patch").write_text(PATCH)
    (tmp_path / "series").write_text("# order\n0002-b.patch\n\n0001-a.patch  # first\n")
    assert [p.name for p in s.read_series(tmp_path)] == ["0002-b.patch", "0001-a.patch"]
    (tmp_path / "series").write_text("0003-missing.patch\n")
    with pytest.raises(LabError, match="does not exist"):
        s.read_series(tmp_path)
    (tmp_path / "0000-cover-letter.patch").write_text(COVER)
    (tmp_path / "series").write_text("0000-cover-letter.patch\n")
    with pytest.raises(LabError, match="cover letter"):
        s.read_series(tmp_path)


def test_no_series_file_means_empty_series(tmp_path):
    assert s.read_series(tmp_path) == []


def test_cover_letter_parts_are_kept():
    title, blurb = s._cover_parts(COVER)
    assert title == "sched/fair: SMT balancing"
    assert blurb == "The blurb, line one.\n\nLine two."


def test_cover_letter_title_folded_over_lines():
    folded = COVER.replace("Subject: [PATCH 0/2] sched/fair: SMT balancing",
                           "Subject: [PATCH v2 0/2] sched/fair: SMT balancing, with\n a long title")
    title, blurb = s._cover_parts(folded)
    assert title == "sched/fair: SMT balancing, with a long title"
    assert blurb == "The blurb, line one.\n\nLine two."


def test_series_hash_changes_with_content(tmp_path):
    p = tmp_path / "0001-a.patch"
    p.write_text(PATCH)
    h1 = s.series_hash("abc", [p])
    p.write_text(PATCH + "x")
    assert s.series_hash("abc", [p]) != h1
    assert s.series_hash("abd", [p]) != s.series_hash("abc", [p])


def test_variant_names():
    with pytest.raises(LabError, match="unknown variant"):
        s.variant_patches("tip", False)


def test_patches_folder_follows_the_checkout(tmp_path, monkeypatch):
    (tmp_path / "patches" / "measure").mkdir(parents=True)
    (tmp_path / "patches" / "series").write_text("")
    monkeypatch.setenv("SCHEDLAB_REPO", str(tmp_path))
    assert s.patches_dir() == tmp_path.resolve() / "patches"
    assert s.measure_dir() == tmp_path.resolve() / "patches" / "measure"
    assert s.read_series() == []


def test_a_patch_without_notes_has_nothing_below_the_cut():
    assert s.cut_notes(PATCH) == ""
    assert s.cut_notes("no cut line here\n") == ""


def _git(repo, *args, **kw):
    import subprocess
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=T", "-c",
                           "user.email=t@example.test", *args], check=True,
                          capture_output=True, text=True, **kw).stdout


def test_notes_below_the_cut_survive_export_and_apply(tmp_path):
    # What the lab does: export with format-patch --notes, apply with git am
    # and cut_notes() into git notes add, export again: the same text.
    a, b = tmp_path / "a", tmp_path / "b"
    for repo in (a, b):
        repo.mkdir()
        _git(repo, "init", "-q")
        (repo / "f.c").write_text("one\n")
        _git(repo, "add", "f.c")
        _git(repo, "commit", "-q", "-m", "base")
    (a / "f.c").write_text("two\n")
    _git(a, "commit", "-q", "-am", "sched/fair: Change f\n\nWhy.")
    note = "Since the last posting: dropped the shortcut.\n\n  An indented line stays indented."
    _git(a, "notes", "add", "-m", note, "HEAD")
    first = _git(a, "format-patch", "--notes", "--stdout", "HEAD~1..HEAD")
    assert s.cut_notes(first) == note
    (tmp_path / "p.patch").write_text(first)
    _git(b, "am", "-q", str(tmp_path / "p.patch"))
    # The note is not part of the commit message.
    assert "dropped" not in _git(b, "log", "-1", "--format=%B")
    s.note_below_cut(b, "HEAD", tmp_path / "p.patch")
    again = _git(b, "format-patch", "--notes", "--stdout", "HEAD~1..HEAD")
    assert s.cut_notes(again) == note


def _repo(tmp_path, monkeypatch, subjects):
    """A checkout with an empty patches/series and a kernel tree whose base
    commit has one commit a subject on top, each changing f.c."""
    from schedlab.core.source import Tree
    lab = tmp_path / "checkout"
    (lab / "patches" / "lab").mkdir(parents=True)
    (lab / "patches" / "series").write_text("")
    monkeypatch.setenv("SCHEDLAB_REPO", str(lab))
    repo = tmp_path / "linux"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "f.c").write_text("base\n")
    _git(repo, "add", "f.c")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    for n, subject in enumerate(subjects):
        (repo / "f.c").write_text(f"{n}\n")
        _git(repo, "commit", "-q", "-am", subject)
    return Tree(key="t", path=repo, base=base, description="t"), lab


def test_export_writes_no_base_commit(tmp_path, monkeypatch):
    # The base is the lab's own import of Debian's tree: no one else has it.
    tree, _ = _repo(tmp_path, monkeypatch, ["sched/fair: Change f\n\nWhy."])
    for cover in (True, False):
        folder = tmp_path / f"out-{cover}"
        s.export(tree, tree.base, "HEAD", folder, cover=cover)
        written = sorted(folder.glob("*.patch"))
        assert len(written) == (2 if cover else 1)
        assert not any("base-commit:" in p.read_text() for p in written)


def _lab_repo(tmp_path, monkeypatch):
    """A series commit, then a lab commit whose patch is in patches/lab/."""
    tree, lab = _repo(tmp_path, monkeypatch,
                      ["sched/fair: Change f", "sched/fair: The lab's checks"])
    s.export(tree, "HEAD~1", "HEAD", lab / "patches" / "lab", cover=False)
    return tree


def test_a_plain_export_knows_the_lab_commits(tmp_path, monkeypatch):
    tree = _lab_repo(tmp_path, monkeypatch)
    lab_in = s.lab_commits_in(tree, tree.base, "HEAD")
    assert lab_in == [_git(tree.path, "rev-parse", "HEAD").strip()]
    assert s.lab_commits_in(tree, tree.base, "HEAD~1") == []


def test_revisions_by_name(tmp_path, monkeypatch):
    tree = _lab_repo(tmp_path, monkeypatch)
    assert s.resolve_rev(tree, "base") == tree.base
    assert s.resolve_rev(tree, "HEAD~1") == _git(tree.path, "rev-parse", "HEAD~1").strip()
    tree.set_ref("topic-x", _git(tree.path, "rev-parse", "HEAD").strip())
    assert s.resolve_rev(tree, "topic-x~1") == _git(tree.path, "rev-parse", "HEAD~1").strip()
    with pytest.raises(LabError, match="no commit 'nope'"):
        s.resolve_rev(tree, "nope")


def test_a_kit_patch_that_does_not_apply_is_reported_and_its_am_aborted(tmp_path, monkeypatch):
    # The series check goes on after the kit's row: the tree must not be
    # left in the middle of git am.
    from schedlab.series import kit_copies
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path / "work"))
    (tmp_path / "work" / "trees").mkdir(parents=True)
    (tmp_path / "work" / "logs").mkdir()
    tree, lab = _repo(tmp_path, monkeypatch, ["sched/fair: Change f\n\nWhy."])
    s.export(tree, tree.base, "HEAD", lab / "patches", cover=False)
    (lab / "patches" / "series").write_text(
        "".join(p.name + "\n" for p in sorted((lab / "patches").glob("*.patch"))))
    kit = lab / "patches" / "kit"
    kit.mkdir()
    stale = _git(tree.path, "format-patch", "--stdout", "-1", "HEAD").replace("-base\n+0\n",
                                                                             "-gone\n+0\n")
    (kit / "0001-stale.patch").write_text(stale)
    (kit / "series").write_text("0001-stale.patch\n")
    problems = kit_copies.check(tree)
    assert problems and "0001-stale.patch does not apply" in problems[0]
    assert "aborted" in problems[0] and "series apply --kit" in problems[0]
    assert not s.am_in_progress(tree)
