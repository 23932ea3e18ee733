"""The topic series: patches/topics parsing, git am of each topic alone and
of all in order (on a small repository), and a topic written for mail."""

import re
import subprocess

import pytest

from schedlab.core.source import Tree
from schedlab.core.util import LabError
from schedlab.series import topics


def test_topics_are_contiguous_in_order_and_cover_the_series():
    text = "# comment\nkunit 1-2 Core\nswb 3-5 Scan\nnewidle 6 [RFC] Factor\n"
    got = topics.parse_topics(text, 6)
    assert [t.rfc for t in got] == [False, False, True] and got[2].title == "Factor"
    assert [(t.name, t.first, t.last) for t in got] == [("kunit", 1, 2), ("swb", 3, 5),
                                                        ("newidle", 6, 6)]
    assert got[1].title == "Scan"


@pytest.mark.parametrize("text,count,msg", [
    ("kunit 1-2 Core\nswb 4-5 Scan\n", 5, "starts at patch 4, expected 3"),
    ("kunit 1-2 Core\nswb 3-4 Scan\n", 5, "end at patch 4, the series has 5"),
    ("kunit 1-2 Core\nkunit 3 Again\n", 3, "named twice"),
    ("kunit one Core\n", 1, "expected 'NAME FIRST[-LAST] TITLE'"),
    ("kunit 2-1 Core\n", 2, "starts at patch 2, expected 1"),
])
def test_bad_topics_are_refused(text, count, msg):
    with pytest.raises(LabError, match=re.escape(msg)):
        topics.parse_topics(text, count)


def _repo(tmp_path):
    repo = tmp_path / "linux"
    repo.mkdir()

    def g(*a, **kw):
        return subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True,
                              text=True, **kw).stdout.strip()
    g("init", "-q")
    g("config", "user.name", "T")
    g("config", "user.email", "t@example.test")
    for name in ("core.c", "a.c", "b.c"):
        (repo / name).write_text("".join(f"line {i}\n" for i in range(20)))
    g("add", "-A")
    g("commit", "-q", "-m", "base")
    base = g("rev-parse", "HEAD")
    return g, repo, base


def _commit(g, repo, name, line, new, subject):
    path = repo / name
    lines = path.read_text().splitlines(keepends=True)
    lines[line] = new + "\n"
    path.write_text("".join(lines))
    g("commit", "-q", "-am", subject)


def _series(tmp_path, g, base):
    """patches/ of the three commits: kunit, ta, tb, one patch each."""
    out = tmp_path / "patches"
    out.mkdir()
    names = g("format-patch", "-o", str(out), f"{base}..HEAD").split("\n")
    (out / "series").write_text("".join(p.rsplit("/", 1)[1] + "\n" for p in names))
    (out / "topics").write_text("kunit 1 Core\nta 2 A\ntb 3 [RFC] B\n")
    return out


def _lab(tmp_path, b_file="b.c", b_subject="b: Change"):
    """A repository with the series kunit (core.c), ta (a.c) and tb
    (B_FILE, line 5: a.c makes tb depend on ta) and its patches/ folder."""
    g, repo, base = _repo(tmp_path)
    _commit(g, repo, "core.c", 1, "core", "core: Add")
    _commit(g, repo, "a.c", 5, "topic a", "a: Change")
    _commit(g, repo, b_file, 5, "topic b", b_subject)
    tree = Tree(key="t", path=repo, base=base, description="t")
    return g, tree, _series(tmp_path, g, base)


def test_each_topic_applies_alone_and_all_in_order(tmp_path):
    g, tree, folder = _lab(tmp_path)
    checks = topics.check_apply(tree, folder)
    text, ok = topics.report_apply(checks)
    assert ok, text
    assert [c.what for c in checks] == ["kunit onto the base", "ta alone onto the base + kunit",
                                        "tb alone onto the base + kunit",
                                        "all topics in the stacked order"]
    assert g("status", "--porcelain") == ""          # no checkout, no stray files


def test_a_topic_that_needs_another_is_named(tmp_path):
    _, tree, folder = _lab(tmp_path, b_file="a.c", b_subject="b: Change what a changed")
    text, ok = topics.report_apply(topics.check_apply(tree, folder))
    assert not ok
    assert "[FAIL] tb alone onto the base + kunit: 0003-b-Change-what-a-changed.patch" in text
    assert "[ok] all topics in the stacked order" in text


SENDER = "Jane Doe <jane.doe@linux.dev>"


def test_mail_writes_the_topic_with_its_prerequisites(tmp_path):
    _, tree, folder = _lab(tmp_path)
    (folder / "covers").mkdir()
    (folder / "covers" / "tb.txt").write_text("b: The B topic\n\nWhy B.\n")
    out = tmp_path / "mail"
    files = topics.mail(tree, "tb", out, SENDER, reroll=2, folder=folder)
    assert [f.name for f in files] == ["0000-cover-letter.patch", "0001-b-Change.patch"]
    cover = files[0].read_text()
    assert "Subject: [RFC PATCH v2 0/1] b: The B topic" in cover
    assert "Why B." in cover
    assert "base-commit:" not in cover
    assert cover.count("prerequisite-patch-id:") == 1
    assert "Subject: [RFC PATCH v2 1/1] b: Change" in files[1].read_text()
    with pytest.raises(LabError, match="has .patch files already"):
        topics.mail(tree, "tb", out, SENDER, folder=folder)
    with pytest.raises(LabError, match="unknown topic 'tc'"):
        topics.mail(tree, "tc", tmp_path / "other", SENDER, folder=folder)


def _mail(tmp_path, b_subject="b: Change", sender=SENDER, reroll=None):
    """Topic tb of _lab() mailed by SENDER: (the lab's git, the files)."""
    g, tree, folder = _lab(tmp_path, b_subject=b_subject)
    (folder / "covers").mkdir()
    (folder / "covers" / "tb.txt").write_text("b: The B topic\n\nWhy B.\n")
    return g, topics.mail(tree, "tb", tmp_path / "mail", sender, reroll=reroll, folder=folder)


def _mailinfo(g, mail):
    """git am's reading of a mail: (its header fields, the commit message)."""
    info = g("mailinfo", "/dev/null", "/dev/null", input=mail.read_text())
    msg = mail.parent / "msg"
    g("mailinfo", str(msg), "/dev/null", input=mail.read_text())
    return dict(ln.split(": ", 1) for ln in info.splitlines()), msg.read_text()


def test_every_mail_is_from_its_sender_and_signed_off_last_by_them(tmp_path):
    # The lab's patches: authored by a placeholder (t@example.test), one
    # with a Link: trailer and the placeholder's old sign-off.
    g, files = _mail(tmp_path, b_subject="b: Change\n\nWhy b.\n\n"
                     "Link: https://lore.kernel.org/r/b@c\nSigned-off-by: T <t@example.test>")
    cover, patch = (f.read_text() for f in files)
    for text in (cover, patch):
        head = text.split("\n\n", 1)[0]
        assert f"\nFrom: {SENDER}\n" in head
        assert "example.test" not in text
    # No in-body From: (the author is the sender), the trailers one block.
    body = patch.split("\n\n", 1)[1]
    assert body.startswith(f"Why b.\n\nAssisted-by: LLM\nSigned-off-by: {SENDER}\n"
                           "Link: https://lore.kernel.org/r/b@c\n---\n")
    fields, message = _mailinfo(g, files[1])
    assert (fields["Author"], fields["Email"]) == ("Jane Doe", "jane.doe@linux.dev")
    assert message.endswith(f"Assisted-by: LLM\nSigned-off-by: {SENDER}\n"
                            "Link: https://lore.kernel.org/r/b@c\n")
    # format-patch names the authors in the cover letter's shortlog.
    assert "\nJane Doe (1):\n  b: Change\n" in cover
    assert "Subject: [RFC PATCH 0/1] b: The B topic" in cover   # no version by default


def test_the_cover_names_the_prerequisite_by_patch_id_and_no_base_commit(tmp_path):
    """Each prerequisite patch's git patch-id --stable, where format-patch
    --base writes it, without the base-commit: line no one else resolves."""
    g, tree, folder = _lab(tmp_path)
    (folder / "covers").mkdir()
    (folder / "covers" / "tb.txt").write_text("b: The B topic\n\nWhy B.\n")
    cover = topics.mail(tree, "tb", tmp_path / "mail", SENDER, folder=folder)[0].read_text()
    pre = folder / "0001-core-Add.patch"
    own = g("patch-id", "--stable", input=pre.read_text()).split()[0]
    assert cover.endswith(f"\n\n\nprerequisite-patch-id: {own}\n")
    assert "base-commit:" not in cover
    # What format-patch --base writes for the same prerequisite (commit core).
    core = g("rev-parse", "HEAD~2")
    based = g("format-patch", "--stdout", "--cover-letter", "--no-signature",
              f"--base={tree.base}", f"{core}..HEAD~1")
    assert f"\n\n\nbase-commit: {tree.base}\nprerequisite-patch-id: {own}" in based + "\n"


def test_mail_tells_the_sender_what_the_sign_off_certifies_and_how_to_send(tmp_path, capsys):
    _mail(tmp_path)
    out = capsys.readouterr().out
    assert f"topic tb: 1 patch(es) and a cover letter in {tmp_path / 'mail'}, from {SENDER}" \
        in out
    assert "Developer's Certificate of Origin" in out and "submitting-patches.rst" in out
    assert "Review every line" in out
    assert f"git send-email --dry-run --from '{SENDER}' --to ... {tmp_path / 'mail'}/*.patch" \
        in out


def test_mail_refuses_a_file_as_out(tmp_path):
    (tmp_path / "mail").write_text("")
    with pytest.raises(LabError, match="is a file"):
        _mail(tmp_path)


def test_a_patch_without_trailers_gets_a_block_of_its_own(tmp_path):
    _, files = _mail(tmp_path)
    body = files[1].read_text().split("\n\n", 1)[1]
    assert body.startswith(f"Assisted-by: LLM\nSigned-off-by: {SENDER}\n---\n")


@pytest.mark.parametrize("sender", ["T <t@example.test>", "jane.doe@linux.dev"])
def test_mail_without_a_persons_address_writes_nothing(tmp_path, sender):
    with pytest.raises(LabError, match="--from"):
        _mail(tmp_path, sender=sender)
    assert not (tmp_path / "mail").exists()


def _series_of(tmp_path, count, topics_text):
    """A patches/ folder of COUNT dummy patches split by TOPICS_TEXT."""
    folder = tmp_path / "patches"
    folder.mkdir()
    names = [f"000{i}-p{i}.patch" for i in range(1, count + 1)]
    for n in names:
        (folder / n).write_text("x\n")
    (folder / "series").write_text("".join(n + "\n" for n in names))
    (folder / "topics").write_text(topics_text)
    return folder, names


def test_topic_variants_are_the_prerequisite_then_the_topic(tmp_path):
    """topic-NAME builds the prerequisite series and NAME's patches;
    topic-kunit the prerequisite alone; base and patched are not topics."""
    folder, names = _series_of(tmp_path, 4, "kunit 1 Core\nta 2-3 A\ntb 4 B\n")
    assert topics.variant_names(folder) == ["base", "patched", "topic-kunit", "topic-ta@1",
                                            "topic-ta", "topic-tb"]
    assert [p.name for p in topics.variant_series("topic-ta", folder)] == names[:3]
    assert [p.name for p in topics.variant_series("topic-tb", folder)] == [names[0], names[3]]
    assert [p.name for p in topics.variant_series("topic-kunit", folder)] == names[:1]
    assert topics.variant_series("patched", folder) is None
    with pytest.raises(LabError):
        topics.variant_series("topic-nope", folder)


def test_topic_step_variants_stop_after_the_kth_patch(tmp_path):
    """topic-NAME@K: the prerequisite and the first K patches of NAME, the
    cumulative states of a per-patch measurement; K past the topic is refused."""
    folder, names = _series_of(tmp_path, 5, "kunit 1 Core\nta 2-4 A\ntb 5 B\n")
    assert [p.name for p in topics.variant_series("topic-ta@1", folder)] == names[:2]
    assert [p.name for p in topics.variant_series("topic-ta@2", folder)] == names[:3]
    assert [p.name for p in topics.variant_series("topic-ta@3", folder)] == names[:4]
    assert "topic-ta@2" in topics.variant_names(folder)
    assert "topic-ta@3" not in topics.variant_names(folder)   # that is topic-ta
    with pytest.raises(LabError, match="has 3 patch"):
        topics.variant_series("topic-ta@4", folder)
    with pytest.raises(LabError, match="unknown topic"):
        topics.variant_series("topic-tc@1", folder)


def test_step_before_chains_a_topic_patch_by_patch(tmp_path):
    """Each patch of a topic is compared with the one before it: step_before
    walks topic-NAME back to topic-NAME@1, then stops (its before is base)."""
    folder, names = _series_of(tmp_path, 5, "kunit 1 Core\nta 2-4 A\ntb 5 B\n")
    assert topics.steps("ta", folder) == ["topic-ta@1", "topic-ta@2", "topic-ta"]
    assert topics.step_before("topic-ta", folder) == "topic-ta@2"
    assert topics.step_before("topic-ta@2", folder) == "topic-ta@1"
    assert topics.step_before("topic-ta@1", folder) is None
    assert topics.step_before("topic-tb", folder) is None
    assert topics.step_before("patched", folder) is None
