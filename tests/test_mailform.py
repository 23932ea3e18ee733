"""A patch as its sender mails it: who may send, the From: line, the
trailer block with Assisted-by and the sender's Signed-off-by."""

import re
import subprocess
from pathlib import Path

import pytest

from schedlab.core.util import LabError
from schedlab.series import mailform as mf

SENDER = "Jane Doe <jane.doe@linux.dev>"
PLACEHOLDER = "Seed 1 maintainers <maintainers@users.noreply.a-seed-1.example>"

# A format-patch file of patches/: its author and trailers to fill in.
TEMPLATE = (Path(__file__).parent / "data" / "patch-template.txt").read_text()
BODY = ["The comment above the scan names the CPU it stops at, not the reason it",
        "stops there. Say that it stops at the first idle CPU of the group."]
# A folded From: line, as format-patch writes a long one.
FOLDED = "Seed 1 maintainers\n <maintainers@users.noreply.a-seed-1.example>"


def _patch(*trailers):
    return TEMPLATE.format(author=FOLDED, trailers="".join(["\n"] + [t + "\n" for t in trailers])
                           if trailers else "")


def _message(text):
    """The lines between the mail headers and the '---' line."""
    return text.split("\n\n", 1)[1].split("\n---\n", 1)[0].splitlines()


@pytest.mark.parametrize("given", ["Jane Doe <jane.doe@linux.dev>",
                                   "  Jane   Doe  <jane.doe@linux.dev> ",
                                   '"Jane Doe" <jane.doe@linux.dev>'])
def test_a_persons_address_is_a_sender(given):
    assert mf.check_sender(given, "--from") == SENDER


@pytest.mark.parametrize("given,why", [
    ("jane.doe@linux.dev", "not of the form 'Name <local@domain>'"),
    ("<jane.doe@linux.dev>", "not of the form"),
    ("Jane Doe jane.doe@linux.dev", "not of the form"),
    ("Jane Doe <jane.doe@localhost>", "not of the form"),
    ("Jane Doe <jane@kernel.example.org>", "placeholder or no-reply"),
    ("Jane Doe <jane@lab.example>", "placeholder or no-reply"),
    ("Jane Doe <jane@example.com>", "placeholder or no-reply"),
    ("Jane Doe <123+jane@users.noreply.github.com>", "placeholder or no-reply"),
    (PLACEHOLDER, "placeholder or no-reply"),
    ("Your Name <you@your.domain>", "placeholder or no-reply"),
    ("Jane Doe <jane@lab.invalid>", "placeholder or no-reply"),
    ("Jane Doe <jane@lab.test>", "placeholder or no-reply"),
    ('"" <jane.doe@linux.dev>', "not of the form"),
])
def test_other_senders_are_refused_naming_both_ways_to_give_one(given, why):
    with pytest.raises(LabError) as exc:
        mf.check_sender(given, "--from")
    assert why in str(exc.value)
    assert "--from" in str(exc.value)
    assert "git config user.name/user.email" in str(exc.value)


def _checkout(tmp_path, monkeypatch, name=None, email=None):
    """A git checkout whose only git config is its own (none global)."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for key, value in (("user.name", name), ("user.email", email)):
        if value:
            subprocess.run(["git", "-C", str(tmp_path), "config", key, value], check=True)
    return tmp_path


def test_the_sender_is_from_or_else_the_checkouts_git_user(tmp_path, monkeypatch):
    repo = _checkout(tmp_path, monkeypatch, "Jane Doe", "jane.doe@linux.dev")
    assert mf.resolve_sender(None, repo) == SENDER
    other = "Joe Bloggs <joe@bloggs.dev>"
    assert mf.resolve_sender(other, repo) == other
    assert mf.check_identity(repo) == SENDER


@pytest.mark.parametrize("name,email", [(None, None), ("Jane Doe", None),
                                        (None, "jane.doe@linux.dev")])
def test_no_sender_at_all_is_refused(tmp_path, monkeypatch, name, email):
    repo = _checkout(tmp_path, monkeypatch, name, email)
    with pytest.raises(LabError) as exc:
        mf.resolve_sender(None, repo)
    assert "needs a sender" in str(exc.value)
    assert "--from" in str(exc.value)
    assert "git config user.name/user.email" in str(exc.value)
    assert mf.check_identity(repo) == mf.CHECK_SENDER


def test_a_placeholder_git_user_is_refused_and_the_check_uses_its_own(tmp_path, monkeypatch):
    repo = _checkout(tmp_path, monkeypatch, "Seed 1 maintainers",
                     "maintainers@users.noreply.a-seed-1.example")
    with pytest.raises(LabError, match="git config user.name/user.email of "):
        mf.resolve_sender(None, repo)
    assert mf.check_identity(repo) == mf.CHECK_SENDER


def test_the_mail_form_is_the_senders_with_assisted_by_then_signed_off_by():
    text = mf.mail_form(_patch(), SENDER)
    headers = text.split("\n\n", 1)[0]
    assert re.findall(r"^From: .*", headers, re.M) == [f"From: {SENDER}"]
    assert "noreply" not in headers
    assert "Date: Sun, 22 Nov 2026 10:00:00 +0000" in headers
    assert "Subject: [PATCH 1/1] sched/fair: Say what the idle scan of a group looks\n for" \
        in headers
    assert _message(text) == BODY + ["", mf.ASSISTED_BY, f"Signed-off-by: {SENDER}"]
    # Below the '---' line nothing changes.
    assert text.split("\n---\n", 1)[1] == _patch().split("\n---\n", 1)[1]


def test_the_trailers_join_the_block_the_patch_has_in_tips_order():
    # Fixes: before the Signed-off-by chain, Link: after it.
    text = mf.mail_form(_patch("Link: https://lore.kernel.org/r/x@y",
                               "Fixes: 54a4f0239f2e (\"sched/fair: Something\")"), SENDER)
    assert _message(text)[3:] == ["Fixes: 54a4f0239f2e (\"sched/fair: Something\")",
                                  mf.ASSISTED_BY, f"Signed-off-by: {SENDER}",
                                  "Link: https://lore.kernel.org/r/x@y"]


def test_a_placeholders_sign_off_is_dropped():
    # patches/ files from before the lead's rewrite carry one.
    text = mf.mail_form(_patch("Link: https://lore.kernel.org/r/x@y",
                               f"Signed-off-by: {PLACEHOLDER}"), SENDER)
    assert "noreply" not in text
    assert _message(text)[3:] == [mf.ASSISTED_BY, f"Signed-off-by: {SENDER}",
                                  "Link: https://lore.kernel.org/r/x@y"]
    alone = mf.mail_form(_patch(f"Signed-off-by: {PLACEHOLDER}"), SENDER)
    assert _message(alone) == _message(mf.mail_form(_patch(), SENDER))


def test_the_mail_form_never_adds_a_trailer_twice():
    once = mf.mail_form(_patch("Link: https://lore.kernel.org/r/x@y"), SENDER)
    assert mf.mail_form(once, SENDER) == once
    assert once.count(mf.ASSISTED_BY) == 1 and once.count(f"Signed-off-by: {SENDER}") == 1
    # One the patch has already, in the other order: the sender's sign-off last.
    swapped = mf.mail_form(_patch(f"Signed-off-by: {SENDER}", "Assisted-by: LLM sparse"),
                           SENDER)
    assert _message(swapped)[3:] == ["Assisted-by: LLM sparse", f"Signed-off-by: {SENDER}"]


def test_another_persons_sign_off_stays_before_the_senders():
    co = "Joe Bloggs <joe@bloggs.dev>"
    text = mf.mail_form(_patch(f"Co-developed-by: {co}", f"Signed-off-by: {co}"), SENDER)
    assert _message(text)[3:] == [f"Co-developed-by: {co}", f"Signed-off-by: {co}",
                                  mf.ASSISTED_BY, f"Signed-off-by: {SENDER}"]


def test_a_last_paragraph_of_prose_is_not_a_trailer_block():
    prose = ["Note: not a trailer, and a", "second line of prose."]
    text = mf.mail_form(_patch().replace(BODY[1] + "\n", "\n".join([BODY[1], ""] + prose + [""])),
                        SENDER)
    assert _message(text) == BODY + [""] + prose + ["", mf.ASSISTED_BY,
                                                    f"Signed-off-by: {SENDER}"]


def test_a_patch_without_a_message_gets_the_block_alone():
    text = mf.mail_form(_patch().replace("\n".join(BODY) + "\n", ""), SENDER)
    assert text.split("\n\n", 1)[1].startswith(
        f"{mf.ASSISTED_BY}\nSigned-off-by: {SENDER}\n---\n")


def test_split_trailers_keeps_continuation_lines():
    msg = ["Text.", "", "Link: https://lore.kernel.org/r/x@y", "Reported-by: A <a@b.dev>",
           "  (a continuation)"]
    assert mf.split_trailers(msg) == (msg[:2], msg[2:])
    assert mf.split_trailers(["Text.", "More text."]) == (["Text.", "More text."], [])
