"""The series as topic series: a prerequisite (the KUnit core) and topics on it.

Detail: docs/modules.md, section series/topics.py.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from schedlab.core import build as buildmod
from schedlab.core.source import Tree
from schedlab.core.spec import BuildSpec
from schedlab.core.util import LabError, run, say
from schedlab.series.mailform import ASSISTED_BY, check_sender, mail_form, name_and_address
from schedlab.series.patchset import ensure_variant, note_below_cut, patches_dir, read_series

TOPICS_FILE = "topics"
_LINE = re.compile(r"^([a-z][a-z0-9-]*)\s+(\d+)(?:-(\d+))?\s+(\S.*)$")


@dataclass(frozen=True)
class Topic:
    name: str
    first: int            # 1-based positions in patches/series, inclusive
    last: int
    title: str
    rfc: bool = False      # mailed as [RFC PATCH]: a title starting with "[RFC] "

    def patches(self, series: List[Path]) -> List[Path]:
        return series[self.first - 1:self.last]


def parse_topics(text: str, count: int, where: str = TOPICS_FILE) -> List[Topic]:
    """The topics of a patches/topics text for a series of COUNT patches:
    contiguous, in order, covering it; the first is the prerequisite."""
    out: List[Topic] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _LINE.match(line)
        if not m:
            raise LabError(f"{where}:{n}: expected 'NAME FIRST[-LAST] TITLE', got {raw!r}")
        first = int(m.group(2))
        last = int(m.group(3) or first)
        expected = out[-1].last + 1 if out else 1
        if first != expected or last < first:
            raise LabError(f"{where}:{n}: {m.group(1)} starts at patch {first}, "
                           f"expected {expected} (topics are contiguous, in order)")
        if any(t.name == m.group(1) for t in out):
            raise LabError(f"{where}:{n}: topic {m.group(1)} named twice")
        title = m.group(4).strip()
        rfc = title.startswith("[RFC] ")
        out.append(Topic(m.group(1), first, last, title[len("[RFC] "):] if rfc else title, rfc))
    if out and out[-1].last != count:
        raise LabError(f"{where}: the topics end at patch {out[-1].last}, "
                       f"the series has {count}")
    return out


def read_topics(folder: Optional[Path] = None) -> List[Topic]:
    folder = patches_dir() if folder is None else folder
    path = folder / TOPICS_FILE
    if not path.is_file():
        return []
    return parse_topics(path.read_text(), len(read_series(folder)), str(path))


def get_topic(name: str, folder: Optional[Path] = None) -> Topic:
    topics = read_topics(folder)
    for t in topics:
        if t.name == name:
            return t
    raise LabError(f"unknown topic {name!r}; known: {', '.join(t.name for t in topics)}")


def topic_patches(name: str, folder: Optional[Path] = None) -> Tuple[List[Path], List[Path]]:
    """(prerequisite patches, the topic's patches); the prerequisite's own
    topic has no prerequisite."""
    folder = patches_dir() if folder is None else folder
    series = read_series(folder)
    topics = read_topics(folder)
    topic = get_topic(name, folder)
    if topic == topics[0]:
        return [], topic.patches(series)
    return topics[0].patches(series), topic.patches(series)


# A build variant per topic: "topic-NAME" is the base plus the prerequisite
# series and topic NAME, as a maintainer applies it ("topic-kunit": the
# prerequisite alone, whose tests run on the base's code).  "topic-NAME@K"
# stops after the topic's K-th patch: the cumulative states a per-patch
# measurement compares (v7.3, +1, +2, ... of one topic).
VARIANT_PREFIX = "topic-"
_STEP = re.compile(r"^(.+)@([1-9][0-9]*)$")


def variant_names(folder: Optional[Path] = None) -> List[str]:
    """Every build variant: base, patched (the whole series), one per topic and
    one per patch of a topic of several patches but its last (topic-NAME@K)."""
    out = ["base", "patched"]
    for t in read_topics(folder):
        out += steps(t.name, folder)
    return out


def variant_series(variant: str, folder: Optional[Path] = None) -> Optional[List[Path]]:
    """The patches of a topic variant, in order; None for base and patched."""
    if not variant.startswith(VARIANT_PREFIX):
        return None
    name, upto = variant[len(VARIANT_PREFIX):], None
    m = _STEP.match(name)
    if m:
        name, upto = m.group(1), int(m.group(2))
    pre, own = topic_patches(name, folder)
    if upto is not None:
        if upto > len(own):
            raise LabError(f"{variant}: topic {name} has {len(own)} patch(es)")
        own = own[:upto]
    return pre + own


def steps(name: str, folder: Optional[Path] = None) -> List[str]:
    """The variants of topic NAME patch by patch: topic-NAME@1 ... topic-NAME."""
    _, own = topic_patches(name, folder)
    return [f"{VARIANT_PREFIX}{name}@{k}" for k in range(1, len(own))] + [VARIANT_PREFIX + name]


def step_before(variant: str, folder: Optional[Path] = None) -> Optional[str]:
    """The variant one patch before VARIANT within its topic (topic-NAME@K-1,
    or for topic-NAME its last but one patch); None for a topic's first patch,
    a topic of one patch, base and patched."""
    if not variant.startswith(VARIANT_PREFIX):
        return None
    m = _STEP.match(variant[len(VARIANT_PREFIX):])
    if m:
        k = int(m.group(2))
        return f"{VARIANT_PREFIX}{m.group(1)}@{k - 1}" if k > 1 else None
    chain = steps(variant[len(VARIANT_PREFIX):], folder)
    return chain[-2] if len(chain) > 1 else None


def cover_text(name: str, folder: Optional[Path] = None) -> Tuple[str, str]:
    """(subject, body) of patches/covers/NAME.txt."""
    folder = patches_dir() if folder is None else folder
    path = folder / "covers" / f"{name}.txt"
    if not path.is_file():
        raise LabError(f"no cover letter for topic {name}: {path}")
    subject, _, body = path.read_text().partition("\n\n")
    return " ".join(subject.split()), body.strip("\n")


# ------------------------------------------------------------------ git am

def _am(tree: Tree, onto: str, patches: List[Path], scratch: Path,
        notes: bool = False, sender: Optional[str] = None) -> Tuple[bool, str]:
    """What git am of PATCHES onto ONTO makes, without a checkout: each patch
    applied to a scratch index (git apply --cached, as strict as git am) and
    committed with its author, date and message (git mailinfo); with NOTES,
    what a patch says below its '---' line as the commit's git note; with
    SENDER, each patch in its mail form (mailform.mail_form(): SENDER its
    author and committer, its message signed off by SENDER).
    Returns (applied, the last commit or why not)."""
    scratch.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GIT_INDEX_FILE=str(scratch / "index"))
    gitc = ["git", "-C", str(tree.path)]
    run(gitc + ["read-tree", onto], env=env, capture=True)
    parent = onto
    for patch in patches:
        msg, diff = scratch / "msg", scratch / "diff"
        text = patch.read_text()
        info = run(gitc + ["mailinfo", str(msg), str(diff)], capture=True,
                   input=mail_form(text, sender) if sender else text).stdout
        fields = dict(ln.split(": ", 1) for ln in info.splitlines() if ": " in ln)
        done = run(gitc + ["apply", "--cached", str(diff)], env=env, capture=True, check=False)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["git apply failed"])[0]
            return False, f"{patch.name}: {first}"
        tree_id = run(gitc + ["write-tree"], env=env, capture=True).stdout.strip()
        body = msg.read_text().strip("\n")
        message = fields.get("Subject", patch.name) + ("\n\n" + body if body else "") + "\n"
        author = (fields.get("Author", "schedlab"), fields.get("Email", "schedlab@localhost"))
        committer = author if sender else ("schedlab", "schedlab@localhost")
        cenv = dict(env, GIT_AUTHOR_NAME=author[0], GIT_AUTHOR_EMAIL=author[1],
                    GIT_AUTHOR_DATE=fields.get("Date", ""),
                    GIT_COMMITTER_NAME=committer[0], GIT_COMMITTER_EMAIL=committer[1])
        parent = run(gitc + ["commit-tree", tree_id, "-p", parent], env=cenv, capture=True,
                     input=message).stdout.strip()
        if notes:
            note_below_cut(tree.path, parent, patch)
    return True, parent


@dataclass(frozen=True)
class ApplyCheck:
    what: str
    ok: bool
    detail: str


def check_apply(tree: Tree, folder: Optional[Path] = None) -> List[ApplyCheck]:
    """Each topic alone onto the base plus the prerequisite, and all in the
    stacked order, with git am (no build)."""
    folder = patches_dir() if folder is None else folder
    series = read_series(folder)
    topics = read_topics(folder)
    if not topics:
        raise LabError(f"{folder / TOPICS_FILE} names no topics")
    out: List[ApplyCheck] = []
    with tempfile.TemporaryDirectory() as tmp:
        ok, pre = _am(tree, tree.base, topics[0].patches(series), Path(tmp) / "pre")
        out.append(ApplyCheck(f"{topics[0].name} onto the base", ok, pre if not ok else ""))
        if not ok:
            return out
        for t in topics[1:]:
            ok, why = _am(tree, pre, t.patches(series), Path(tmp) / t.name)
            out.append(ApplyCheck(f"{t.name} alone onto the base + {topics[0].name}", ok,
                                  "" if ok else why))
        ok, why = _am(tree, tree.base, series, Path(tmp) / "all")
        out.append(ApplyCheck("all topics in the stacked order", ok, "" if ok else why))
    return out


def report_apply(checks: List[ApplyCheck]) -> Tuple[str, bool]:
    lines = [f"  [{'ok' if c.ok else 'FAIL'}] {c.what}" + (f": {c.detail}" if c.detail else "")
             for c in checks]
    ok = all(c.ok for c in checks)
    return "\n".join(lines + [f"topics: {sum(c.ok for c in checks)} of {len(checks)} apply"]), ok


# ------------------------------------------------------------------ mail

def prerequisite_ids(repo: Path, base: str, tip: str) -> List[str]:
    """git patch-id --stable of each commit of BASE..TIP, oldest first: the
    prerequisite-patch-id: lines format-patch --base=BASE writes for a
    series that applies on TIP."""
    if base == tip:
        return []
    patches = run(["git", "-C", str(repo), "format-patch", "--stdout", "--no-signature",
                   f"{base}..{tip}"], capture=True).stdout
    ids = run(["git", "-C", str(repo), "patch-id", "--stable"], capture=True,
              input=patches).stdout
    return [ln.split()[0] for ln in ids.splitlines()]


def mail(tree: Tree, name: str, out: Path, sender: str, reroll: Optional[int] = None,
         folder: Optional[Path] = None) -> List[Path]:
    """A topic as format-patch files in OUT, ready for git send-email by
    SENDER ("Name <address>", mailform.resolve_sender()): each patch
    committed in its mail form, SENDER its author and the cover letter's
    From:; the cover letter from patches/covers/NAME.txt, ending with
    prerequisite-patch-id: lines for the prerequisite's patches."""
    sender = check_sender(sender, "the sender")
    pre, own = topic_patches(name, folder)
    topic = get_topic(name, folder)
    subject, body = cover_text(name, folder)
    if out.exists() and not out.is_dir():
        raise LabError(f"--out {out} is a file: give an empty folder")
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob("*.patch")):
        raise LabError(f"{out} has .patch files already: give an empty folder")
    with tempfile.TemporaryDirectory() as tmp:
        ok, pre_commit = _am(tree, tree.base, pre, Path(tmp) / "pre")
        if not ok:
            raise LabError(f"the prerequisite does not apply onto the base: {pre_commit}")
        ok, tip = _am(tree, pre_commit, own, Path(tmp) / "topic", notes=True, sender=sender)
        if not ok:
            raise LabError(f"topic {name} does not apply onto the prerequisite: {tip}")
        args = ["format-patch", "-q", "-o", str(out), "--cover-letter", "--no-signature",
                "--abbrev=12", "--zero-commit", "--notes", f"{pre_commit}..{tip}"]
        prefix = ("RFC PATCH" if topic.rfc else "PATCH") + \
            (f" v{reroll}" if reroll and reroll > 1 else "")
        args.insert(1, f"--subject-prefix={prefix}")
        # A patch's From: is its author, SENDER (so no in-body From: line);
        # the cover letter's is the committer format-patch runs as.
        who, addr = name_and_address(sender)
        run(["git", "-C", str(tree.path), *args], capture=True,
            env={"GIT_COMMITTER_NAME": who, "GIT_COMMITTER_EMAIL": addr})
        ids = prerequisite_ids(tree.path, tree.base, pre_commit)
    files = sorted(out.glob("*.patch"))
    cover = files[0]
    text = cover.read_text().replace("*** SUBJECT HERE ***", subject, 1)
    text = text.replace("*** BLURB HERE ***", body, 1)
    if ids:
        # Where and as format-patch --base writes them, without base-commit:.
        text = text.rstrip("\n") + "\n\n\n" + \
            "".join(f"prerequisite-patch-id: {i}\n" for i in ids)
    cover.write_text(text)
    say(f"  topic {name}: {len(files) - 1} patch(es) and a cover letter in {out}, "
        f"from {sender}")
    say(f"  Each patch ends with '{ASSISTED_BY}' and 'Signed-off-by: {sender}'. That\n"
        "  sign-off certifies the Developer's Certificate of Origin (the kernel's\n"
        "  Documentation/process/submitting-patches.rst): that you may submit the patch\n"
        "  under its license and that the record of it is public. Review every line\n"
        "  first, then, with the recipients of scripts/get_maintainer.pl:\n"
        f"    git send-email --dry-run --from '{sender}' --to ... {out}/*.patch")
    return files


def built(tree: Tree, spec: BuildSpec) -> buildmod.BuildResult:
    """The kernel of SPEC: built (incrementally) or, with no_build, found."""
    if spec.no_build:
        arch = buildmod.get_arch(spec.arch)
        bdir = buildmod.build_dir_for(tree, spec.name, spec.config, arch)
        image = bdir / arch.image_path
        if not image.is_file():
            raise LabError(f"--no-build: nothing built at {image}")
        say(f"  using the kernel already built in {bdir} (--no-build)")
        info = buildmod.build_info(bdir)
        return buildmod.BuildResult(bdir, image, info.get("release", ""), 0.0,
                                    info.get("commit", ""))
    commit = ensure_variant(tree, spec.variant, spec.measure, variant_series(spec.variant),
                            spec.kit)
    return buildmod.build(tree, spec.name, commit, spec.config, spec.arch)
