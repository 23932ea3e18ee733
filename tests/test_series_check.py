"""The per-patch checks: warnings, MAINTAINERS, test-only hooks, the report."""

from pathlib import Path

import pytest

from schedlab.series import mailform
from schedlab.series import series_check as c


def test_warning_normalisation_ignores_positions():
    a = "/w/t/kernel/sched/fair.c:123:5: warning: unused variable 'x'"
    b = "../../t/kernel/sched/fair.c:130:9: warning: unused variable 'x'"
    assert c._normalize_warning(a) == c._normalize_warning(b)


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

    from schedlab.core.source import Tree

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
    assert c.maintainers_cover(tree, uncovered, []) == [
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
    assert c.maintainers_cover(tree, covered, []) == []
    g("checkout", "-q", covered)
    assert c.maintainers_cover(tree, uncovered, []) == [
        "tools/t.c: new file that no MAINTAINERS section covers"]


HOOK_DIFF = """\
diff --git a/kernel/sched/fair.c b/kernel/sched/fair.c
--- a/kernel/sched/fair.c
+++ b/kernel/sched/fair.c
@@ -61,6 +61,10 @@
 #include "autogroup.h"
 
+#ifdef CONFIG_SCHED_FAIR_LB_KUNIT_TEST
+#include "tests/fair_kunit_seams.h"
+#endif
+
 /*
@@ -100,3 +104,7 @@
 }
+
+#ifdef CONFIG_SCHED_FAIR_LB_KUNIT_TEST
+#include "tests/fair_kunit.c"
+#endif
"""


def test_test_hooks_only_accepts_guarded_additions():
    assert c.test_hooks_only(HOOK_DIFF)


@pytest.mark.parametrize("change", [
    ("+#endif\n", "+#endif\n+static int x;\n"),                  # code outside a block
    (" #include \"autogroup.h\"\n", "-#include \"autogroup.h\"\n"),  # a removal
    ("+#ifdef CONFIG_SCHED_FAIR_LB_KUNIT_TEST\n", "+#ifdef CONFIG_OTHER\n"),  # other option
    ("+#include \"tests/fair_kunit.c\"\n+#endif\n", "+#include \"tests/fair_kunit.c\"\n"),
])
def test_test_hooks_only_rejects(change):
    old, new = change
    assert old in HOOK_DIFF
    assert not c.test_hooks_only(HOOK_DIFF.replace(old, new, 1))


def test_test_hooks_only_needs_an_addition():
    assert not c.test_hooks_only("--- a/f.c\n+++ b/f.c\n@@ -1 +1 @@\n a\n")


def test_preprocessed_tokens_ignore_markers_and_layout():
    a = '# 1 "fair.c"\nint a =\n   0;\n# 5 "fair.c"\n\nint b;\n'
    b = '# 1 "fair.c"\nint a = 0;\n\n\n\n# 9 "fair.c"\nint b;\n'
    assert c.preprocessed_tokens(a) == c.preprocessed_tokens(b) == "int a = 0; int b;"
    assert c.preprocessed_tokens(a) != c.preprocessed_tokens(a.replace("int b", "int c"))


def test_report_marks_failing_patches():
    text, ok = c.report([c.PatchCheck("0001-a.patch", "sched/fair: a", [], ["compiled x"]),
                         c.PatchCheck("0002-b.patch", "sched/fair: b", [c.SIGNED_OFF], [])])
    assert not ok
    assert "  [ok] 0001-a.patch: sched/fair: a" in text
    assert "  [FAIL] 0002-b.patch: sched/fair: b\n      problem: " + c.SIGNED_OFF in text
    assert c.report([c.PatchCheck("p", "s", [], [])])[1]


# ------------------------------------------------------------------ sign-offs, the mail form

PLACEHOLDER = "Seed 1 maintainers <maintainers@users.noreply.a-seed-1.example>"

# A format-patch file of patches/: its author and trailers to fill in.
TEMPLATE = (Path(__file__).parent / "data" / "patch-template.txt").read_text()


def _patch(trailers="", author=PLACEHOLDER):
    return TEMPLATE.format(author=author, trailers=trailers)


def test_a_sign_off_in_patches_is_a_problem():
    assert c.text_problems(_patch()) == []
    signed = _patch(f"\nSigned-off-by: {PLACEHOLDER}\n")
    assert c.text_problems(signed) == [c.SIGNED_OFF]
    assert c.SIGNED_OFF == "signed off in patches/: only the sender signs off, when mailing"


def test_a_long_changelog_is_a_problem():
    # The template's two lines of prose, the second split in two, and 43 more.
    long = _patch().replace("stops there.", "stops there.\n" + "More prose.\n" * 43)
    assert c.text_problems(long) == ["changelog: 46 prose lines (at most 45)"]


def test_every_rule_read_from_the_text_is_reported():
    bad = _patch(f"\nSigned-off-by: {PLACEHOLDER}\n").replace("[PATCH 1/1]", "[PATCH v16 1/1]")
    bad = bad.replace("stops there.", "stops there.\n" + "More prose.\n" * 43)
    assert c.text_problems(bad) == [c.SIGNED_OFF, "changelog: 46 prose lines (at most 45)",
                                    "version number: [PATCH v16 1/1] in the subject"]


def test_measure_and_kit_patches_are_not_signed_off_either(tmp_path, monkeypatch):
    lab = tmp_path / "lab"
    for sub, trailers in (("measure", ""), ("kit", f"\nSigned-off-by: {PLACEHOLDER}\n")):
        folder = lab / "patches" / sub
        folder.mkdir(parents=True)
        (folder / "0001-a.patch").write_text(_patch(trailers))
        (folder / "series").write_text("0001-a.patch\n")
    (lab / "patches" / "series").write_text("")
    monkeypatch.setenv("SCHEDLAB_REPO", str(lab))
    got = c.unmailed_checks()
    assert [(r.name, r.problems) for r in got] == [("measure/0001-a.patch", []),
                                                   ("kit/0001-a.patch", [c.SIGNED_OFF])]
    assert got[0].subject == "sched/fair: Say what the idle scan of a group looks for"


def _checkpatch_tree(kernel_tree):
    from schedlab.core.source import Tree
    path = kernel_tree("scripts/checkpatch.pl")
    return Tree(key=path.name, path=path, base="HEAD", description=path.name)


@pytest.mark.tree
@pytest.mark.parametrize("sender", [mailform.CHECK_SENDER, "Jane Doe <jane.doe@linux.dev>"])
def test_checkpatch_reads_the_mail_form(kernel_tree, tmp_path, sender):
    """The patch as stored (no sign-off) fails checkpatch; as mailed, signed
    off by the check's own identity or a sender, it passes; an old patch's
    placeholder sign-off is not what checkpatch sees."""
    tree = _checkpatch_tree(kernel_tree)
    patch = tmp_path / "0001-sched-fair-Say.patch"
    patch.write_text(_patch())
    assert "ERROR: Missing Signed-off-by: line(s)" in c.checkpatch(tree, patch).stdout
    assert c.checkpatch_mailed(tree, patch, sender) == (True, [])
    patch.write_text(_patch(f"\nSigned-off-by: {PLACEHOLDER}\n"))
    assert c.checkpatch_mailed(tree, patch, sender) == (True, [])


@pytest.mark.tree
def test_checkpatch_of_the_mail_form_names_the_patch(kernel_tree, tmp_path):
    tree = _checkpatch_tree(kernel_tree)
    patch = tmp_path / "0001-sched-fair-Say.patch"
    patch.write_text(_patch().replace("stops there.", "stops there. " + "x" * 80))
    clean, said = c.checkpatch_mailed(tree, patch, mailform.CHECK_SENDER)
    assert not clean
    assert said == ["0001-sched-fair-Say.patch (mail form):11: WARNING: Prefer a maximum 75 "
                    "chars per line (possible unwrapped commit description?)"]


def test_a_section_title_with_lowercase_letters_covers_a_file():
    kunit = ("KERNEL UNIT TESTING FRAMEWORK (KUnit)\nM:\tDavid Gow <d@example.org>\n"
             "F:\ttools/testing/kunit/\n\nTHE REST\nM:\tLinus Torvalds <t@example.org>\n")
    assert c._uncovered("tools/testing/kunit/qemu_configs/x.py", kunit) == []
    rest = "THE REST\nM:\tLinus Torvalds <t@example.org>\nL:\tlinux-kernel@vger.kernel.org\n"
    assert c._uncovered("x.c", rest) == ["x.c: new file that no MAINTAINERS section covers"]
