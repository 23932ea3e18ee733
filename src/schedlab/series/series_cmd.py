"""The 'series' command: list, apply, export, rebase, check, matrix, topics, mail,
objdiff."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, List, Optional

from schedlab.core import source
from schedlab.core.util import LabError, git, repo_dir, say
from schedlab.series import mailform, matrix, objdiff, patchset, series_check, topics


def _rebase_debian(tree: source.Tree, onto: str) -> source.Tree:
    sha = git(tree.path, "rev-parse", "--verify", "-q", onto + "^{commit}", check=False)
    if not sha:
        raise LabError(f"no commit {onto!r} in {tree.path}")
    return source.Tree(key=tree.key, path=tree.path, base=sha,
                       description=f"{tree.path} at {sha[:12]}")


def command(action: str, resolve: Callable[[], source.Tree], *, measure: bool = False,
            kit: bool = False, lab: bool = False,
            start: Optional[str] = None, end: Optional[str] = None,
            reroll: Optional[int] = None, onto: Optional[str] = None,
            kernel: Optional[str] = None, ppc: bool = True, full: bool = False,
            cells: Optional[List[str]] = None, topic: Optional[str] = None,
            out: Optional[Path] = None, sender: Optional[str] = None) -> int:
    if action != "matrix" and (full or cells):
        raise LabError("--full and --cells are for 'series matrix'")
    if action != "mail" and (topic or out or sender):
        raise LabError("--topic, --out and --from are for 'series mail'")
    if action == "mail" and not (topic and out):
        raise LabError("series mail needs --topic NAME and --out DIR")
    if lab and action != "export":
        raise LabError("--lab is for 'series export' (apply, build and the tests use "
                       "patches/lab/ with the series always)")
    if lab and (measure or kit):
        raise LabError("series export: one of --lab, --measure, --kit")
    if (start or end) and action not in ("export", "objdiff", "matrix"):
        raise LabError(f"--start and --end are for export, objdiff and matrix, not {action}")
    if start and action == "matrix":
        raise LabError("series matrix takes --end REV (the commit built), no --start")
    if action == "objdiff" and bool(start) != bool(end):
        raise LabError("series objdiff: --start REV and --end REV together (fair.o at "
                       "one commit against the other), or neither")
    if action == "mail":
        # Who signs off every patch, before the tree is touched.
        sender = mailform.resolve_sender(sender, repo_dir())
    if action == "list":
        for p in patchset.read_series(patchset.patches_dir()):
            say(f"  {p.name}: {patchset.parse_patch(p.read_text())['subject']}")
        return 0
    tree = resolve()
    if action == "topics":
        for t in topics.read_topics():
            say(f"  {t.name}: patches {t.first}-{t.last} of patches/series: {t.title}")
        text, ok = topics.report_apply(topics.check_apply(tree))
        say(text)
        return 0 if ok else 1
    if action == "mail":
        assert topic and out and sender
        topics.mail(tree, topic, out, sender, reroll)
        return 0
    if action == "apply":
        commit = patchset.ensure_variant(tree, "patched", measure, kit=kit)
        tree.checkout(commit)
        n = len(patchset.variant_patches("patched", measure, kit))
        name = patchset.KIT if kit else "patched" + ("+measure" if measure else "")
        say(f"  {n} patch(es) applied: {tree.path} is at {commit[:12]} (ref {tree.ref(name)})")
        return 0
    if action == "export":
        if kit:
            folder = patchset.kit_dir()
            first = start or tree.commit_of("patched+measure") or \
                patchset.ensure_variant(tree, "patched", True)
        elif lab:
            folder = patchset.lab_dir()
            first = start or tree.commit_of("posted") or patchset.ensure_variant(tree, "posted")
        elif measure:
            folder = patchset.measure_dir()
            first = start or tree.commit_of("patched") or patchset.ensure_variant(tree, "patched")
        else:
            folder, first = patchset.patches_dir(), start or tree.base
            lab_in = patchset.lab_commits_in(tree, first, end or "HEAD")
            if lab_in:
                raise LabError(
                    f"{first[:12]}..{end or 'HEAD'} ends with the lab's checks "
                    f"(patches/lab/, {len(lab_in)} commit(s), never posted): export the "
                    f"series with --end {lab_in[-1][:12]}~1, then the lab's with --lab "
                    f"--start {lab_in[-1][:12]}~1")
        patchset.export(tree, first, end or "HEAD", folder, cover=not (measure or kit or lab),
                      reroll=reroll)
        return 0
    if action == "rebase":
        if not onto:
            raise LabError("series rebase needs --onto REV (a commit of the kernel tree)")
        new = source.resolve_tree(kernel, onto) if (kernel or os.environ.get("KERNEL_SRC")) \
            else _rebase_debian(tree, onto)
        patchset.rebase(tree, new)
        say(f"  the series now applies onto {new.base[:12]}; run './schedlab series export' "
            "with the same --kernel/--base to write it back")
        return 0
    if action == "check":
        if not patchset.read_series(patchset.patches_dir()):
            say("  the series is empty: nothing to check")
            return 0
        text, ok = series_check.check_all(tree, ppc=ppc)
        say(text)
        return 0 if ok else 1
    if action == "objdiff" and start and end:
        first, second = (patchset.resolve_rev(tree, r) for r in (start, end))
        with tree.locked("objdiff"):
            c, sizes = objdiff.run_between(tree, first, second)
        (objdiff.out_dir() / "between.diff").write_text(
            "".join(f"== {n}\n" + "\n".join(d) + "\n" for n, d in c.diffs.items()))
        say(objdiff.between_report(c, sizes, first, second))
        say(f"  the objdumps and the per-function diffs: {objdiff.out_dir()}")
        return 0
    if action == "objdiff":
        text, ok = objdiff.run_all(tree)
        say(text)
        say(f"  the objdump of each build and the per-function diffs: {objdiff.out_dir()}")
        return 0 if ok else 1
    if action == "matrix":
        text, ok = matrix.run(tree, "full" if full else "default", cells=cells, end=end)
        say(text)
        return 0 if ok else 1
    raise LabError(f"unknown series action {action}")
