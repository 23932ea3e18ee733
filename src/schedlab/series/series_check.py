"""The per-patch checks of the series: what a maintainer would run before applying.

Detail: docs/modules.md, section series/series_check.py.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Tuple

from schedlab.core import build as buildmod
from schedlab.core.deps import venv_env
from schedlab.core.source import Tree
from schedlab.core.targets import TARGETS, BootTarget
from schedlab.core.util import Finished, LabError, git, log_dir, repo_dir, run, say, work_dir
from schedlab.series import changelog
from schedlab.series import kit_copies as kitmod
from schedlab.series import topics
from schedlab.series.mailform import check_identity, mail_form
from schedlab.series.patchset import (ensure_variant, kit_dir, lab_dir, measure_dir, parse_patch,
                                      patches_dir, read_series)


@dataclass
class PatchCheck:
    name: str
    subject: str
    problems: List[str]
    notes: List[str]


_TOP_DIRS = ("arch|block|certs|crypto|drivers|fs|include|init|io_uring|ipc|kernel|lib|mm|"
             "net|rust|samples|scripts|security|sound|tools|virt")


def _normalize_warning(line: str) -> str:
    """A warning without its line/column and without the tree's location."""
    line = re.sub(rf"^\S*?(?:^|/)((?:{_TOP_DIRS})/\S+?\.[ch]):", r"\1:", line.strip())
    return re.sub(r"^(\S+?\.[ch]):\d+(?::\d+)?:", r"\1:", line)


def objects_for(tree: Path, files: List[str]) -> Tuple[List[str], List[str]]:
    """Make targets that compile these files, and files left uncompiled (with why)."""
    targets: List[str] = []
    skipped: List[str] = []

    def makefile_has(d: Path, obj: str) -> bool:
        mk = tree / d / "Makefile"
        return mk.is_file() and re.search(rf"\b{re.escape(obj)}\b", mk.read_text()) is not None

    def includers(path: Path) -> List[Path]:
        found = []
        for d in {path.parent, path.parent.parent}:
            for c in sorted((tree / d).glob("*.c")):
                text = c.read_text(errors="replace")
                if re.search(rf'#include\s+"[^"]*\b{re.escape(path.name)}"', text):
                    found.append(c.relative_to(tree))
        return found

    def objects_of(p: Path, depth: int = 0) -> List[str]:
        if p.suffix == ".c" and makefile_has(p.parent, p.stem + ".o"):
            return [str(p.with_suffix(".o"))]
        if depth >= 3:
            return []
        out: List[str] = []
        for inc in includers(p):
            out += [o for o in objects_of(inc, depth + 1) if o not in out]
        return out

    for f in files:
        p = Path(f)
        if p.suffix not in (".c", ".h"):
            continue
        if not (tree / p).exists():
            continue
        objs = objects_of(p)
        if objs:
            targets.extend(o for o in objs if o not in targets)
        else:
            skipped.append(f"{f}: no object compiles it directly")
    return targets, skipped


def checkpatch(tree: Tree, patch: Path) -> Finished:
    """checkpatch.pl --strict from the tree itself.

    FILE_PATH_CHANGES ("does MAINTAINERS need updating?") is answered by
    maintainers_cover() instead: a new file under a path that a MAINTAINERS
    section already covers needs no update.
    """
    ignore = ["FILE_PATH_CHANGES"]
    # A base without history (Debian's tree is one import commit) cannot
    # resolve the upstream commits a changelog names; the form of the
    # reference (GIT_COMMIT_ID) is still checked. A real upstream tree
    # checks that the commits exist.
    if run(["git", "-C", str(tree.path), "rev-parse", "-q", "--verify", f"{tree.base}^"],
           capture=True, check=False).returncode != 0:
        ignore.append("UNKNOWN_COMMIT_ID")
    return run(["perl", "scripts/checkpatch.pl", "--strict", "--no-summary", "--terse",
                "--showfile", "--ignore", ",".join(ignore), str(patch)],
               cwd=tree.path, capture=True, check=False, env=venv_env())


def checkpatch_mailed(tree: Tree, patch: Path, sender: str) -> Tuple[bool, List[str]]:
    """checkpatch() on PATCH as SENDER mails it (mailform.mail_form(): From:
    SENDER, "Assisted-by: LLM" and SENDER's Signed-off-by), which is what
    reaches a maintainer: (clean, what it says, naming PATCH)."""
    with tempfile.TemporaryDirectory() as tmp:
        mailed = Path(tmp) / patch.name
        mailed.write_text(mail_form(patch.read_text(), sender))
        cp = checkpatch(tree, mailed)
    # --showfile names no file for a line of the commit message (":10: ..."):
    # its line in the mail form, which the tree's file shows moved by a few.
    said = (cp.stdout + cp.stderr).replace(str(mailed), patch.name).strip().splitlines()
    return cp.returncode == 0, [f"{patch.name} (mail form){ln}" if ln.startswith(":") else ln
                                for ln in said]


SIGNED_OFF = "signed off in patches/: only the sender signs off, when mailing"


def signed_off(text: str) -> List[str]:
    """A problem if a patch file of patches/ carries a Signed-off-by
    (coding-assistants.rst: only a person adds one; series mail adds the
    sender's)."""
    return [SIGNED_OFF] if parse_patch(text)["signoffs"] else []


def text_problems(text: str) -> List[str]:
    """What a patch of patches/series says wrong, read without a build."""
    return signed_off(text) + changelog.length_problems(text) + \
        changelog.version_problems(text)


def unmailed_checks() -> List[PatchCheck]:
    """The sign-off rule for the patches of patches/lab/, patches/measure/ and
    patches/kit/, which are never mailed (one row each)."""
    out = []
    for folder in (lab_dir(), measure_dir(), kit_dir()):
        for patch in read_series(folder):
            text = patch.read_text()
            out.append(PatchCheck(f"{folder.name}/{patch.name}", parse_patch(text)["subject"],
                                  signed_off(text), []))
    return out


def maintainers_cover(tree: Tree, commit: str, files: List[str]) -> List[str]:
    """Files a patch adds that no MAINTAINERS section (besides THE REST) covers.

    get_maintainer.pl -f wants the file to exist and reads ./MAINTAINERS, so
    the tree is checked out at the patch's own commit first (a patch may add
    the section line that covers its new files); the W=1 builds of the
    series check leave it elsewhere.
    """
    added = git(tree.path, "diff", "--name-only", "--diff-filter=AR", f"{commit}^",
                commit).split()
    if not added:
        return []
    tree.checkout(commit)
    problems = []
    for f in added:
        out = run(["perl", "scripts/get_maintainer.pl", "--no-git", "--no-git-fallback",
                   "--sections", "-f", f], cwd=tree.path, capture=True, check=False).stdout
        problems += _uncovered(f, out)
    return problems


def _uncovered(f: str, out: str) -> List[str]:
    """A problem if get_maintainer.pl --sections names no section but THE REST."""
    # A section's title is a line of its own above its "X:\t..." entries
    # (titles may have lowercase letters: "... (KUnit)").
    sections = {ln.strip() for ln in out.splitlines()
                if ln.strip() and not re.match(r"[A-Z]:\s", ln.strip())}
    if sections - {"THE REST"}:
        return []
    return [f"{f}: new file that no MAINTAINERS section covers"]


# The series' KUnit option; every patch must also build, W=1 clean, without it.
KUNIT_OPTION = "CONFIG_SCHED_FAIR_LB_KUNIT_TEST"
# The lab config that leaves the option off (the package's configs/probe.config).
OPTION_OFF_CONFIG = "probe"


def test_hooks_only(diff: str) -> bool:
    """Whether a unified diff of one file only adds lines, each of them blank or
    inside an '#ifdef CONFIG_SCHED_FAIR_LB_KUNIT_TEST' block that it adds too."""
    depth = 0
    added = False
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            continue
        if line.startswith("-"):
            return False
        if not line.startswith("+"):
            if depth:
                return False
            continue
        text = line[1:].strip()
        added = True
        if depth == 0 and text == f"#ifdef {KUNIT_OPTION}":
            depth = 1
        elif depth and text.startswith("#if"):
            depth += 1
        elif depth and text.startswith("#endif"):
            depth -= 1
        elif depth == 0 and text:
            return False
    return added and depth == 0


def preprocessed_tokens(text: str) -> str:
    """A preprocessed C file as one line of tokens: no line markers, no layout."""
    return " ".join(tok for ln in text.splitlines() if not ln.startswith("#")
                    for tok in ln.split())


def check(tree: Tree, ppc: bool = True, w1: bool = True) -> List[PatchCheck]:
    """Check every patch: applies, checkpatch --strict, sign-off, W=1 clean objects."""
    tip = ensure_variant(tree, "posted")
    with tree.locked("series check"):
        return _check(tree, tip, ppc, w1)


def _check(tree: Tree, tip: str, ppc: bool, w1: bool) -> List[PatchCheck]:
    patches = read_series()
    if not patches:
        raise LabError(f"{patches_dir() / 'series'} lists no patches")
    commits = git(tree.path, "rev-list", "--reverse", f"{tree.base}..{tip}").split()
    if len(commits) != len(patches):
        raise LabError(f"{len(patches)} patches gave {len(commits)} commits")
    log = log_dir() / "series-check.log"
    log.write_text("")
    arch = buildmod.get_arch("x86_64")
    bdirs = {"on": work_dir() / "build" / tree.key / "check-lab",
             "off": work_dir() / "build" / tree.key / "check-kunit-off"}
    configs = {"on": "lab", "off": OPTION_OFF_CONFIG}
    results: List[PatchCheck] = []
    warn_cache: Dict[Tuple[str, str, str], List[str]] = {}
    prepared = set()

    def prepare(option: str, commit: str) -> None:
        if option not in prepared:
            tree.checkout(commit)
            say(f"  preparing {bdirs[option]} for single-object W=1 builds "
                f"({KUNIT_OPTION} {option})")
            buildmod.prepare(tree, bdirs[option], configs[option], arch, log)
            prepared.add(option)

    def warnings_at(option: str, commit: str, objs: List[str]) -> Dict[str, List[str]]:
        prepare(option, commit)
        todo = [o for o in objs if (option, commit, o) not in warn_cache]
        if todo:
            tree.checkout(commit)
            for o in todo:
                lines = buildmod.compile_objects(tree, bdirs[option], [o], arch, log, w1=w1)
                warn_cache[(option, commit, o)] = sorted({_normalize_warning(w)
                                                          for w in lines})
        return {o: warn_cache[(option, commit, o)] for o in objs}

    def tokens_off(commit: str, source: str) -> str:
        """The source preprocessed with the option off and __LINE__ fixed, so
        that lines a patch adds do not count, only what the compiler sees."""
        prepare("off", commit)
        tree.checkout(commit)
        target = str(Path(source).with_suffix(".i"))
        buildmod.compile_objects(tree, bdirs["off"], [target], arch, log, w1=False,
                                 extra=["KCFLAGS=-D__LINE__=0 -Wno-builtin-macro-redefined"])
        return preprocessed_tokens((bdirs["off"] / target).read_text(errors="replace"))

    sender = check_identity(repo_dir())
    for patch, commit in zip(patches, commits):
        text = patch.read_text()
        info = parse_patch(text)
        problems = text_problems(text)
        notes = [f"checkpatch --strict on the mail form, signed off by {sender}"]
        clean, said = checkpatch_mailed(tree, patch, sender)
        problems += maintainers_cover(tree, commit, info["files"])
        if not clean:
            problems.append("checkpatch --strict (the mail form):\n          " +
                            "\n          ".join(said))
        files = git(tree.path, "diff", "--name-only", f"{commit}^", commit).split()
        objs, skipped = objects_for(tree.path, files)
        notes += skipped
        if objs:
            parent = git(tree.path, "rev-parse", f"{commit}^")
            for option in ("on", "off"):
                before = warnings_at(option, parent, objs)
                after = warnings_at(option, commit, objs)
                for o in objs:
                    new = sorted(set(after[o]) - set(before[o]))
                    if new:
                        problems.append(f"new W=1 warnings in {o} ({KUNIT_OPTION} {option}):"
                                        "\n          " + "\n          ".join(new))
                    notes.append(f"compiled {o} with W=1, {KUNIT_OPTION} {option}: "
                                 f"{len(after[o])} warning(s), {len(new)} new")
            for f in files:
                if not f.endswith(".c") or f"{f[:-2]}.o" not in objs:
                    continue
                if not test_hooks_only(git(tree.path, "diff", parent, commit, "--", f)):
                    continue
                if tokens_off(parent, f) != tokens_off(commit, f):
                    problems.append(f"{f} adds only {KUNIT_OPTION} blocks, yet with the "
                                    "option off the compiler sees other code")
                else:
                    notes.append(f"{f} with {KUNIT_OPTION} off: the compiler sees the same "
                                 "code as before the patch")
        results.append(PatchCheck(patch.name, str(info["subject"]), problems, notes))
    results += unmailed_checks()
    if ppc:
        for target in cross_targets():
            results.append(check_cross(tree, tip, log, target))
    tree.checkout(tip)
    return results


def cross_targets() -> List[BootTarget]:
    """The boot targets the series check compiles for besides x86_64 (ppc64le)."""
    return [t for t in TARGETS.values() if t.cross_compile]


def check_cross(tree: Tree, commit: str, log: Path, target: BootTarget) -> PatchCheck:
    """kernel/sched/ of the series tip compiles for TARGET without warnings."""
    # A distribution-like config (the arch's check_start, e.g. ppc64le_defconfig),
    # not the lab's small guest: more of kernel/sched/'s options compiled.
    arch = dataclasses.replace(target.build, start=target.build.check_start or target.build.start)
    subject = f"kernel/sched/ compiles for {target.arch}"
    problems: List[str] = []
    notes: List[str] = []
    if not shutil.which(arch.cross_compile + "gcc"):
        problems.append(f"{arch.cross_compile}gcc not found (Debian package "
                        f"gcc-{arch.cross_compile.rstrip('-')})")
        return PatchCheck(target.arch, subject, problems, notes)
    bdir = work_dir() / "build" / tree.key / f"check-lab{target.log_suffix}"
    tree.checkout(commit)
    buildmod.prepare(tree, bdir, "lab", arch, log)
    warnings = buildmod.compile_objects(tree, bdir, ["kernel/sched/"], arch, log, w1=False)
    if warnings:
        problems.append("warnings:\n          " + "\n          ".join(warnings))
    notes.append(f"kernel/sched/ compiled for {target.arch} ({arch.start} + lab fragments)")
    return PatchCheck(target.arch, subject, problems, notes)


def report(results: List[PatchCheck]) -> Tuple[str, bool]:
    lines = []
    ok = True
    for r in results:
        status = "ok" if not r.problems else "FAIL"
        ok &= not r.problems
        lines.append(f"  [{status}] {r.name}: {r.subject}")
        for p in r.problems:
            lines.append(f"      problem: {p}")
        for n in r.notes:
            lines.append(f"      {n}")
    return "\n".join(lines), ok


def check_all(tree: Tree, ppc: bool = True) -> Tuple[str, bool]:
    """The per-patch checks, then (when patches/topics names topics) that each
    topic applies alone and all in order: the text and the verdict."""
    results = check(tree, ppc=ppc)
    kit_problems = kitmod.check(tree)
    if kit_problems is not None:
        results.append(PatchCheck("kit", "the kit's should_we_balance() states (patches/kit/)",
                                  kit_problems,
                                  ["each state's copy is should_we_balance() at its commit"]))
    text, ok = report(results)
    if topics.read_topics():
        applies_text, applies = topics.report_apply(topics.check_apply(tree))
        text, ok = text + "\n" + applies_text, ok and applies
    return text, ok
