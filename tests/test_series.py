"""Series parsing, patch parsing and cover-letter handling."""

import pytest

from schedlab import series as s
from schedlab.util import LabError

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


def test_warning_normalisation_ignores_positions():
    a = "/w/t/kernel/sched/fair.c:123:5: warning: unused variable 'x'"
    b = "../../t/kernel/sched/fair.c:130:9: warning: unused variable 'x'"
    assert s._normalize_warning(a) == s._normalize_warning(b)


# A get_maintainer.pl stand-in: like the real one, -f fails for a file that
# is not in the work tree; prints SCHEDULER when an F: line of ./MAINTAINERS
# prefixes the file.
FAKE_GET_MAINTAINER = r"""#!/usr/bin/perl
my $file = "";
while (@ARGV) {
    my $a = shift @ARGV;
    $file = shift @ARGV if $a eq "-f";
}
die "file '$file' not found\n" unless -e $file;
open(my $fh, "<", "MAINTAINERS") or die;
my $hit = 0;
while (<$fh>) { $hit = 1 if /^F:\s+(\S+)/ && index($file, $1) == 0; }
print $hit ? "SCHEDULER\n" : "THE REST\n";
"""


def _maint_repo(tmp_path):
    import subprocess
    from schedlab.source import Tree

    def g(*a):
        return subprocess.run(["git", "-C", str(tmp_path), *a], check=True,
                              capture_output=True, text=True).stdout.strip()
    g("init", "-q")
    g("config", "user.name", "t")
    g("config", "user.email", "t@example.test")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "get_maintainer.pl").write_text(FAKE_GET_MAINTAINER)
    (tmp_path / "MAINTAINERS").write_text("SCHEDULER\nF:\tkernel/sched/\n")
    g("add", "-A")
    g("commit", "-q", "-m", "base")
    return g, Tree(key="t", path=tmp_path, base=g("rev-parse", "HEAD"), description="t")


def test_maintainers_cover_reads_the_commits_own_maintainers(tmp_path):
    g, tree = _maint_repo(tmp_path)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "t.c").write_text("int x;\n")
    g("add", "-A")
    g("commit", "-q", "-m", "uncovered")
    uncovered = g("rev-parse", "HEAD")
    assert s.maintainers_cover(tree, uncovered, []) == [
        "tools/t.c: new file that no MAINTAINERS section covers"]
    (tmp_path / "tools" / "u.c").write_text("int y;\n")
    with open(tmp_path / "MAINTAINERS", "a") as f:
        f.write("F:\ttools/\n")
    g("add", "-A")
    g("commit", "-q", "-m", "covered by its own MAINTAINERS line")
    covered = g("rev-parse", "HEAD")
    # The work tree is left at the earlier commit, as the W=1 builds of the
    # series check leave it: the answer must not depend on that.
    g("checkout", "-q", uncovered)
    assert s.maintainers_cover(tree, covered, []) == []
    g("checkout", "-q", covered)
    assert s.maintainers_cover(tree, uncovered, []) == [
        "tools/t.c: new file that no MAINTAINERS section covers"]


def test_stage_with_a_failed_check_is_reported_failed(capsys):
    from schedlab.util import Stages
    failed = []
    st = Stages(failed)
    with st.stage("good"):
        pass
    with st.stage("bad"):
        failed.append("bad")
    assert [status for _, _, status in st.times] == ["ok", "failed"]
    assert "<== bad: failed" in capsys.readouterr().out


HOOK_DIFF = """\
diff --git a/kernel/sched/fair.c b/kernel/sched/fair.c
--- a/kernel/sched/fair.c
+++ b/kernel/sched/fair.c
@@ -61,6 +61,10 @@
 #include "autogroup.h"
 
+#ifdef CONFIG_SCHED_FAIR_KUNIT_TEST
+#include "tests/fair_kunit_seams.h"
+#endif
+
 /*
@@ -100,3 +104,7 @@
 }
+
+#ifdef CONFIG_SCHED_FAIR_KUNIT_TEST
+#include "tests/fair_kunit.c"
+#endif
"""


def test_test_hooks_only_accepts_guarded_additions():
    assert s.test_hooks_only(HOOK_DIFF)


@pytest.mark.parametrize("change", [
    ("+#endif\n", "+#endif\n+static int x;\n"),                  # code outside a block
    (" #include \"autogroup.h\"\n", "-#include \"autogroup.h\"\n"),  # a removal
    ("+#ifdef CONFIG_SCHED_FAIR_KUNIT_TEST\n", "+#ifdef CONFIG_OTHER\n"),  # other option
    ("+#include \"tests/fair_kunit.c\"\n+#endif\n", "+#include \"tests/fair_kunit.c\"\n"),
])
def test_test_hooks_only_rejects(change):
    old, new = change
    assert old in HOOK_DIFF
    assert not s.test_hooks_only(HOOK_DIFF.replace(old, new, 1))


def test_test_hooks_only_needs_an_addition():
    assert not s.test_hooks_only("--- a/f.c\n+++ b/f.c\n@@ -1 +1 @@\n a\n")


def test_preprocessed_tokens_ignore_markers_and_layout():
    a = '# 1 "fair.c"\nint a =\n   0;\n# 5 "fair.c"\n\nint b;\n'
    b = '# 1 "fair.c"\nint a = 0;\n\n\n\n# 9 "fair.c"\nint b;\n'
    assert s.preprocessed_tokens(a) == s.preprocessed_tokens(b) == "int a = 0; int b;"
    assert s.preprocessed_tokens(a) != s.preprocessed_tokens(a.replace("int b", "int c"))
