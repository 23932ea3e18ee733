"""The patch series: patches/ as git format-patch output, in the order of patches/series.

Detail: docs/modules.md, section series/patchset.py.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from pathlib import Path
from typing import List, Optional, Tuple, TypedDict

from schedlab.core.source import Tree
from schedlab.core.util import LabError, git, log_dir, repo_dir, run, say, work_dir

COVER = "0000-cover-letter.patch"


def patches_dir() -> Path:
    """The upstream series: patches/ of the checkout."""
    return repo_dir() / "patches"


def lab_dir() -> Path:
    """The lab's checks of the RFC topics: patches/lab/ of the checkout."""
    return patches_dir() / "lab"


def measure_dir() -> Path:
    """The measurement-only series: patches/measure/ of the checkout."""
    return patches_dir() / "measure"


def kit_dir() -> Path:
    """The hardware kit's switches: patches/kit/ of the checkout."""
    return patches_dir() / "kit"


KIT = "patched+measure+kit"


def read_series(folder: Optional[Path] = None) -> List[Path]:
    """The patch files named by folder/series (default patches/), in order."""
    folder = patches_dir() if folder is None else folder
    series = folder / "series"
    if not series.is_file():
        return []
    out = []
    for n, raw in enumerate(series.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name = line.split()[0]
        path = folder / name
        if not path.is_file():
            raise LabError(f"{series}:{n}: {name} does not exist")
        if name == COVER:
            raise LabError(f"{series}:{n}: the cover letter is not part of the series")
        out.append(path)
    return out


class PatchInfo(TypedDict):
    subject: str
    signoffs: List[str]
    files: List[str]


def parse_patch(text: str) -> PatchInfo:
    """Subject, sign-offs and touched files of one format-patch file."""
    subject = ""
    m = re.search(r"^Subject: (.*(?:\n[ \t].*)*)", text, re.M)
    if m:
        subject = re.sub(r"\s*\n[ \t]+", " ", m.group(1)).strip()
        subject = re.sub(r"^\[[^\]]*\]\s*", "", subject)
    head = text.split("\n---\n", 1)[0]
    signoffs = re.findall(r"^Signed-off-by: (.+)$", head, re.M)
    files = re.findall(r"^diff --git a/(\S+) b/(\S+)$", text, re.M)
    return {"subject": subject, "signoffs": signoffs, "files": sorted({b for _, b in files})}


def series_hash(base: str, patches: List[Path]) -> str:
    h = hashlib.sha256(base.encode())
    for p in patches:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _state_file(tree: Tree) -> Path:
    return work_dir() / "trees" / f"{tree.key}.variants.json"


def _load_state(tree: Tree) -> dict:
    try:
        return json.loads(_state_file(tree).read_text())
    except (OSError, ValueError):
        return {}


def _save_state(tree: Tree, state: dict) -> None:
    _state_file(tree).write_text(json.dumps(state, indent=1) + "\n")


def am_in_progress(tree: Tree) -> bool:
    gitdir = Path(git(tree.path, "rev-parse", "--absolute-git-dir"))
    return (gitdir / "rebase-apply").exists()


# A diffstat line of format-patch (" kernel/sched/fair.c | 13 +++---").
_DIFFSTAT = re.compile(r"^ \S.*\| +(\d+|Bin)")


def cut_notes(text: str) -> str:
    """What a format-patch file says between its '---' line and the diffstat:
    what the sender keeps out of the commit message (what changed since the
    previous version).  format-patch --notes writes a commit's git notes
    there under 'Notes:', indented by four spaces, which is taken off."""
    lines = text.splitlines()
    if "---" not in lines:
        return ""
    body: List[str] = []
    for ln in lines[lines.index("---") + 1:]:
        if _DIFFSTAT.match(ln) or ln.startswith("diff --git "):
            break
        body.append(ln)
    while body and not body[0].strip():
        body.pop(0)
    if body and body[0].strip() in ("Notes:", "Notes (commits):"):
        body = [ln[4:] if ln.startswith("    ") else ln.strip() for ln in body[1:]]
    return "\n".join(body).strip()


def note_below_cut(tree: Path, commit: str, patch: Path) -> None:
    """What PATCH says below its '---' line, as COMMIT's git note (nothing
    when it says nothing there), so that format-patch --notes writes it again."""
    notes = cut_notes(patch.read_text())
    if notes:
        run(["git", "-C", str(tree), *_identity(), "notes", "add", "-f", "-m", notes, commit],
            capture=True)


def apply_patches(tree: Tree, onto: str, patches: List[Path], what: str) -> str:
    """git am -3 the patches onto a commit; returns the resulting commit.

    On a failure the tree is left in the middle of git am at the failing patch.
    """
    with tree.locked(what):
        return _apply_patches(tree, onto, patches, what)


def _apply_patches(tree: Tree, onto: str, patches: List[Path], what: str) -> str:
    if am_in_progress(tree):
        raise LabError(f"a git am is already in progress in {tree.path}: finish it with "
                       f"'git -C {tree.path} am --continue' or drop it with "
                       f"'git -C {tree.path} am --abort'")
    tree.checkout(onto)
    log = log_dir() / "series.log"
    for i, patch in enumerate(patches, 1):
        proc = run(["git", "-C", str(tree.path), *_identity(), "am", "-3", "-q",
                    "--no-signoff", str(patch)], capture=True, check=False)
        with open(log, "a") as f:
            f.write(f"$ git am -3 {patch}\n{proc.stdout}{proc.stderr}")
        if proc.returncode != 0:
            diff = run(["git", "-C", str(tree.path), "am", "--show-current-patch=diff"],
                       capture=True, check=False).stdout
            status = git(tree.path, "status", "--short", check=False)
            raise LabError(
                f"{what}: patch {i}/{len(patches)} {patch.name} does not apply onto "
                f"{onto[:12]}\n{(proc.stdout + proc.stderr).strip()}\n"
                f"--- git am --show-current-patch=diff (first 60 lines) ---\n"
                + "\n".join(diff.splitlines()[:60]) +
                f"\n--- conflicting files ---\n{status}\n"
                f"The tree {tree.path} is left at that point. Resolve the conflicts there, "
                f"'git add' them and run 'git -C {tree.path} am --continue' (then "
                f"'./schedlab series export' to write the result back to patches/), or "
                f"give up with 'git -C {tree.path} am --abort'.")
        note_below_cut(tree.path, "HEAD", patch)
    return git(tree.path, "rev-parse", "HEAD")


def _identity() -> List[str]:
    name = git(repo_dir(), "config", "user.name", check=False) or "schedlab"
    email = git(repo_dir(), "config", "user.email", check=False) or "schedlab@localhost"
    return ["-c", f"user.name={name}", "-c", f"user.email={email}"]


def variant_patches(variant: str, measure: bool, kit: bool = False) -> List[Path]:
    if variant not in ("base", "patched"):
        raise LabError(f"unknown variant {variant!r}; known: base, patched")
    if kit and variant != "patched":
        raise LabError("the kit's switches (patches/kit/) apply on the whole series only")
    patches = read_series() + read_series(lab_dir()) if variant == "patched" else []
    if measure or kit:
        patches += read_series(measure_dir())
    if kit:
        patches += read_series(kit_dir())
    return patches


def ensure_variant(tree: Tree, variant: str, measure: bool = False,
                   series: Optional[List[Path]] = None, kit: bool = False) -> str:
    """The commit of a variant: base; "posted", base plus the series; or
    "patched", that plus the lab's checks (patches/lab/); with measure, the
    measurement series on top of that commit; with kit, the kit's switches
    on top of that (the whole series only).  series: the patches of any
    other variant (a topic's, topics.variant_series())."""
    if series is None and variant == "posted" and not (measure or kit):
        return _ensure(tree, "posted", tree.base, read_series())
    if series is None or kit:
        variant_patches(variant, False, kit)
    if kit:
        onto = ensure_variant(tree, variant, True, series)
        patches, name = read_series(kit_dir()), KIT
    elif measure:
        onto = ensure_variant(tree, variant, False, series)
        patches, name = read_series(measure_dir()), variant + "+measure"
    elif series is None and variant == "patched":
        onto = ensure_variant(tree, "posted")
        patches, name = read_series(lab_dir()), variant
    else:
        onto = tree.base
        patches = series if series is not None else []
        name = variant
    return _ensure(tree, name, onto, patches)


def _ensure(tree: Tree, name: str, onto: str, patches: List[Path]) -> str:
    """The commit of PATCHES applied onto ONTO, under the ref NAME: the one
    applied before when neither changed."""
    if not patches:
        tree.set_ref(name, onto)
        return onto
    key = series_hash(onto, patches)
    state = _load_state(tree)
    known = state.get(name, {})
    commit = tree.commit_of(name)
    if known.get("hash") == key and commit and commit == known.get("commit"):
        return commit
    say(f"  applying {len(patches)} patch(es) onto {onto[:12]} for {name}")
    commit = apply_patches(tree, onto, patches, name)
    tree.set_ref(name, commit)
    state[name] = {"hash": key, "commit": commit, "base": tree.base}
    _save_state(tree, state)
    return commit


def resolve_rev(tree: Tree, rev: str) -> str:
    """REV of the lab's kernel tree as a commit: "base" is the tree's base;
    "posted" (the series) and "patched" (with the lab's checks) are applied
    first if they are not up to date, and may start a revision
    ("posted~9"); a ref the lab made before ("topic-swb") likewise."""
    name, sep, rest = rev.partition("~")
    if name == "base":
        commit: Optional[str] = tree.base
    elif name in ("posted", "patched"):
        commit = ensure_variant(tree, name)
    else:
        commit = tree.commit_of(name)
    target = (commit + sep + rest) if commit else rev
    sha = git(tree.path, "rev-parse", "--verify", "-q", target + "^{commit}", check=False)
    if not sha:
        raise LabError(f"no commit {rev!r} in {tree.path} (a commit, 'base', 'posted' or "
                       "'patched', each with an optional ~N)")
    return sha


def lab_commits_in(tree: Tree, start: str, end: str) -> List[str]:
    """The commits of start..end whose subject is that of a patch of
    patches/lab/: a plain export must not take them into the series."""
    subjects = {parse_patch(p.read_text())["subject"] for p in read_series(lab_dir())}
    out = []
    for line in git(tree.path, "log", "--format=%H %s", f"{start}..{end}").splitlines():
        sha, _, subject = line.partition(" ")
        if subject in subjects:
            out.append(sha)
    return out


# ---------------------------------------------------------------- export

def _cover_parts(text: str) -> Tuple[str, str]:
    """Title and blurb of a format-patch cover letter."""
    m = re.search(r"^Subject: \[[^\]]*\] (.*(?:\n .*)*)$", text, re.M)
    title = " ".join(m.group(1).split()) if m else "*** SUBJECT HERE ***"
    body = text.split("\n\n", 1)[1] if "\n\n" in text else ""
    # The blurb ends where format-patch's shortlog starts ("Name (N):").
    m2 = re.search(r"^\S.* \(\d+\):$", body, re.M)
    blurb = body[:m2.start()] if m2 else body
    return title, blurb.strip("\n")


def export(tree: Tree, start: Optional[str] = None, end: str = "HEAD",
           folder: Optional[Path] = None, cover: bool = True,
           reroll: Optional[int] = None) -> List[Path]:
    """Write start..end of the lab tree back as format-patch files and a series
    file into folder (default patches/)."""
    folder = patches_dir() if folder is None else folder
    start = git(tree.path, "rev-parse", start or tree.base)
    end_sha = git(tree.path, "rev-parse", end)
    count = int(git(tree.path, "rev-list", "--count", f"{start}..{end_sha}"))
    if count == 0:
        raise LabError(f"nothing to export: {start[:12]}..{end} is empty")
    folder.mkdir(parents=True, exist_ok=True)
    old_cover = folder / COVER
    title, blurb = (None, None)
    if cover and old_cover.is_file():
        title, blurb = _cover_parts(old_cover.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        # --notes: a commit's git notes go below the '---' line, where a
        # version's changes are written (cut_notes() reads them back).  No
        # --base: the base is the lab's own commit, which no one else can
        # resolve (series mail writes the prerequisite-patch-id: lines).
        args = ["format-patch", "-q", "-o", tmp, "--no-signature", "--abbrev=12",
                "--zero-commit", "--notes", f"{start}..{end_sha}"]
        if cover:
            args.insert(1, "--cover-letter")
        if reroll and reroll > 1:
            # The version in the subjects only: the file names stay put.
            args.insert(1, f"--subject-prefix=PATCH v{reroll}")
        git(tree.path, *args)
        new = sorted(Path(tmp).glob("*.patch"))
        for old in read_series(folder):
            old.unlink()
        names = []
        for p in new:
            text = p.read_text()
            if p.name == COVER:
                if title:
                    text = text.replace("*** SUBJECT HERE ***", title, 1)
                if blurb:
                    text = text.replace("*** BLURB HERE ***", blurb, 1)
            else:
                names.append(p.name)
            (folder / p.name).write_text(text)
    (folder / "series").write_text("".join(n + "\n" for n in names))
    say(f"  exported {len(names)} patch(es) into {folder}")
    _record_export(tree, folder, start, end_sha)
    return [folder / n for n in names]


def _record_export(tree: Tree, folder: Path, start: str, end: str) -> None:
    """The exported files describe start..end: remember it, so that the next
    build uses that commit instead of applying the series again."""
    state = _load_state(tree)
    folder = folder.resolve()
    if folder == patches_dir().resolve() and start == tree.base:
        name, patches = "posted", read_series(folder)
    elif folder == lab_dir().resolve() and start == tree.commit_of("posted"):
        name, patches = "patched", read_series(folder)
    elif folder == measure_dir().resolve() and start == tree.commit_of("patched"):
        name, patches = "patched+measure", read_series(folder)
    elif folder == kit_dir().resolve() and start == tree.commit_of("patched+measure"):
        name, patches = KIT, read_series(folder)
    else:
        return
    state[name] = {"hash": series_hash(start, patches), "commit": end, "base": tree.base}
    tree.set_ref(name, end)
    _save_state(tree, state)


# ---------------------------------------------------------------- rebase

def rebase(tree: Tree, new_base: Tree) -> str:
    """Apply the series onto another base and show git range-diff of old and new."""
    old_commit = ensure_variant(tree, "posted")
    patches = read_series()
    new_commit = apply_patches(new_base, new_base.base, patches, "rebase")
    new_base.set_ref("patched", new_commit)
    if tree.path != new_base.path and git(tree.path, "rev-parse", "--git-common-dir") != \
            git(new_base.path, "rev-parse", "--git-common-dir"):
        # Different repositories: fetch the old series' objects for range-diff.
        git(new_base.path, "fetch", "-q", str(tree.path), old_commit)
    out = git(new_base.path, "range-diff", f"{tree.base}..{old_commit}",
              f"{new_base.base}..{new_commit}")
    say(out)
    return new_commit
