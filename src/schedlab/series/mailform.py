"""A patch as its sender mails it: the sender as author, and at the end of
its trailer block "Assisted-by: LLM" then the sender's Signed-off-by.

Detail: docs/modules.md, section series/mailform.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional, Tuple

from schedlab.core.util import LabError, git

ASSISTED_BY = "Assisted-by: LLM"
# Whom the series check signs the mail form off as when the checkout has no
# sender of its own: a form checkpatch.pl accepts, no one's address.
CHECK_SENDER = "Series Check <series-check@localhost.localdomain>"
HOW = ('give --from "Your Name <you@your.domain>" or set git config user.name/user.email '
       "in the lab checkout")

_SENDER = re.compile(r"^[^<>@\s][^<>@]*\s<([^<>@\s]+@[^<>@\s.]+(?:\.[^<>@\s.]+)+)>$")
_SIGNOFF = re.compile(r"^Signed-off-by:\s*(.*?)\s*$")
_TRAILER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*:(?:\s|$)")
_ASSISTED = re.compile(r"^Assisted-by:\s*LLM\b")
# Trailers that tip's order (Documentation/process/maintainer-tip.rst,
# "Ordering of commit tags") puts after the Signed-off-by chain.
_AFTER_SIGNOFFS = re.compile(r"^(Tested-by|Reviewed-by|Acked-by|Cc|Link):", re.I)


# Domains that are no one's mail: the reserved names of RFC 2606 and 6761,
# and the placeholder of HOW ("you@your.domain").
RESERVED = ("example", "invalid", "test", "localhost", "local", "localdomain")
HOW_DOMAIN = "your.domain"


def placeholder(identity: str) -> bool:
    """Whether a "Name <address>" (or an address) is no person's: a domain
    under example (RFC 2606: .example, example.com, kernel.example.org), a
    reserved top-level domain (.invalid, .test, .localhost, ...), the
    help's own example, or a no-reply address."""
    addr = identity.rsplit("<", 1)[-1].rstrip("> ").lower()
    domain = addr.rpartition("@")[2]
    labels = domain.split(".")
    return ("example" in labels or labels[-1] in RESERVED or domain == HOW_DOMAIN
            or "noreply" in addr or "no-reply" in addr)


def check_sender(sender: str, where: str) -> str:
    """SENDER as "Name <local@domain>" with its spaces folded; a LabError
    naming WHERE for any other form and for a placeholder address."""
    text = " ".join(sender.split())
    name, _, rest = text.rpartition(" <")
    # A quoted name is the name without its quotes; an empty one is none.
    name = name.strip().strip('"').strip()
    if name and rest:
        text = f"{name} <{rest}"
    if not name or not _SENDER.match(text):
        raise LabError(f"{where}: {sender!r} is not of the form 'Name <local@domain>'; {HOW}")
    if placeholder(text):
        raise LabError(f"{where}: {text} is a placeholder or no-reply address, not a "
                       f"person's, and the sender signs off every patch; {HOW}")
    return text


def name_and_address(sender: str) -> Tuple[str, str]:
    """("Name", "local@domain") of a sender "Name <local@domain>"."""
    name, _, addr = sender.rpartition("<")
    return name.strip(), addr.rstrip("> ")


def git_sender(repo: Path) -> Optional[str]:
    """git config user.name and user.email of REPO as "Name <address>"; None
    when either is unset."""
    name = git(repo, "config", "user.name", check=False)
    email = git(repo, "config", "user.email", check=False)
    return f"{name} <{email}>" if name and email else None


def resolve_sender(given: Optional[str], repo: Path) -> str:
    """The sender of a mail: --from when given, else the checkout's git user."""
    if given is not None:
        return check_sender(given, "--from")
    found = git_sender(repo)
    if found is None:
        raise LabError("series mail needs a sender, the person who signs off every patch "
                       f"(Signed-off-by certifies the DCO): {HOW}")
    return check_sender(found, f"git config user.name/user.email of {repo}")


def check_identity(repo: Path) -> str:
    """Whom the series check signs the mail form off as: the checkout's git
    user when series mail would take it, else CHECK_SENDER."""
    found = git_sender(repo)
    if found is None:
        return CHECK_SENDER
    try:
        return check_sender(found, "git config")
    except LabError:
        return CHECK_SENDER


def split_patch(text: str) -> Tuple[str, List[str], List[str]]:
    """A format-patch file as (its mail headers, the lines of its commit
    message below the subject, the lines from its '---' line on)."""
    headers, _, body = text.partition("\n\n")
    lines = body.split("\n")
    cut = next((i for i, ln in enumerate(lines)
                if ln == "---" or ln.startswith("diff --git ")), len(lines))
    return headers, lines[:cut], lines[cut:]


def split_trailers(message: List[str]) -> Tuple[List[str], List[str]]:
    """A commit message's lines as (the text, its trailer block): the last
    paragraph when every line of it is a "Token: value" trailer or the
    continuation of one.  The text keeps the blank line before the block."""
    lines = list(message)
    while lines and not lines[-1].strip():
        lines.pop()
    start = max((i + 1 for i, ln in enumerate(lines) if not ln.strip()), default=0)
    block = lines[start:]
    if block and _TRAILER.match(block[0]) and all(
            _TRAILER.match(ln) or ln[:1] in (" ", "\t") for ln in block):
        return lines[:start], block
    return lines, []


def signed_message(message: List[str], sender: str) -> List[str]:
    """The lines of a commit message with "Assisted-by: LLM" and SENDER's
    Signed-off-by at the end of its Signed-off-by chain (one trailer block:
    after Fixes:, Suggested-by: and the like, before Tested-by:, Reviewed-by:,
    Acked-by:, Cc: and Link:, in tip's order), never twice.

    The Signed-off-by and in-body From: of a placeholder identity are
    dropped: while patches/ is rewritten, its files may still carry the
    project placeholder's sign-off (an .example/noreply address), which is
    no one's certificate and must not reach a mail."""
    lines = list(message)
    if lines and lines[0].startswith("From: ") and placeholder(lines[0]):
        lines.pop(0)
        while lines and not lines[0].strip():
            lines.pop(0)
    text, block = split_trailers(lines)
    kept = []
    for ln in block:
        m = _SIGNOFF.match(ln)
        if not (m and placeholder(m.group(1))):
            kept.append(ln)
    assisted = [ln for ln in kept if _ASSISTED.match(ln)]
    kept = [ln for ln in kept if not _ASSISTED.match(ln)]
    own = f"Signed-off-by: {sender}"
    signoffs = [i for i, ln in enumerate(kept) if _SIGNOFF.match(ln)]
    if signoffs and " ".join(kept[signoffs[-1]].split()) == own:
        del kept[signoffs[-1]]
    if text and text[-1].strip():
        text = text + [""]
    # Each trailer with its continuation lines, the Signed-off-by chain's
    # followers moved after it, the others kept in their order before it.
    groups: List[List[str]] = []
    for ln in kept:
        if ln[:1] in (" ", "\t") and groups:
            groups[-1].append(ln)
        else:
            groups.append([ln])
    before = [ln for g in groups if not _AFTER_SIGNOFFS.match(g[0]) for ln in g]
    after = [ln for g in groups if _AFTER_SIGNOFFS.match(g[0]) for ln in g]
    return text + before + [assisted[0] if assisted else ASSISTED_BY, own] + after


def mail_form(text: str, sender: str) -> str:
    """A format-patch file as SENDER mails it: From: SENDER, and the commit
    message signed by signed_message().  The rest (Date:, Subject:, what is
    below the '---' line) is kept."""
    headers, message, rest = split_patch(text)
    headers = re.sub(r"^From: .*(?:\n[ \t].*)*", lambda _: f"From: {sender}", headers,
                     count=1, flags=re.M)
    return headers + "\n\n" + "\n".join(signed_message(message, sender) + rest)
