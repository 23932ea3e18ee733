"""The test command: its tiers as lists of stage records, and the full tier's record.

Detail: docs/modules.md, section testcmd.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from schedlab import commitlint, pipeline
from schedlab.core import deps, guests
from schedlab.core import stages as stagemod
from schedlab.core import targets
from schedlab.core import topology as topomod
from schedlab.core.build import BuildResult
from schedlab.core.source import Tree
from schedlab.core.spec import BuildSpec, TreeSpec, VmOptions
from schedlab.core.stages import Stage
from schedlab.core.util import LabError, git, package_file, repo_dir, run, say
from schedlab.kit import rehearsal
from schedlab.measuring.measure import probe_build
from schedlab.series import kselftest, kunit, kunit_tool, matrix, objdiff, patchset
from schedlab.series import peer_tests as peermod
from schedlab.series import series_check
from schedlab.series import soak as soakmod
from schedlab.series.topics import built

DEFAULT = targets.get_target(None)
DEFAULT_TOPOLOGIES = DEFAULT.test_topologies
# The other targets' stages in the full tier boot only their first topology
# (their KUnit boots cover the others); 'test --arch A' boots every one.
# The build whose KUnit probe counts are v7.3's: the KUnit series alone.
REFERENCE_VARIANT = "topic-kunit"
# The full tier's short soak (the floors scale with its length), on the
# kit's debug kernel: the whole series, and the should_we_balance() states
# soak.sh flips with the rest.
SOAK_TOPOLOGY, SOAK_MINUTES = "smt4-numa", 3
# The hardware kit's rehearsal in the full tier, in a guest: the reduced one
# (rehearsal.REHEARSAL_ARMS: the stock kernel in a second boot, the
# reference, its repeat and v7.3's should_we_balance(), one benchmark).
REHEARSAL_TOPOLOGY = "smt8"
# A topology boot's limit in the tiers (it takes 15-40 s under TCG).
BOOT_TIMEOUT = 300

Builder = Callable[[Tree, BuildSpec], BuildResult]


@dataclass(frozen=True)
class TestRequest:
    """What 'test' was asked: the tier, the tree, the x86_64 topologies, the VM."""
    tree: TreeSpec = TreeSpec()
    topologies: Tuple[str, ...] = DEFAULT_TOPOLOGIES
    vm: VmOptions = VmOptions()
    full: bool = False
    unit_only: bool = False
    arch: Optional[str] = None      # another target: its stages alone

    @property
    def title(self) -> str:
        if targets.get_target(self.arch) is not DEFAULT:
            return f"test --arch {self.arch}"
        return "test --full" if self.full else "test"


@dataclass
class TestContext:
    """What the stages share: the request and the builder, then what the
    stages fill in: the fetched tree, the builds by key ('lab', 'probe',
    'debug', 'lab-ppc64le', ...)."""
    request: TestRequest
    builder: Builder
    tree: Optional[Tree] = None
    builds: Dict[str, BuildResult] = field(default_factory=dict)

    @property
    def fetched(self) -> Tree:
        """The tree the fetch stage resolved (every stage that reads it needs fetch)."""
        if self.tree is None:
            raise LabError("no kernel tree: the fetch stage has not run")
        return self.tree

    def releases(self) -> Dict[str, str]:
        return {key: b.release for key, b in self.builds.items()}


Body = Callable[[TestContext], bool]


# ------------------------------------------------------------------ stage bodies

def _setup(ctx: TestContext) -> bool:
    deps.setup()
    return True


def _pytest(ctx: TestContext) -> bool:
    return run(deps.pytest_cmd(), check=False).returncode == 0


def _pytest_tree(ctx: TestContext) -> bool:
    """The lab's tests that read a kernel tree, on the fetched one: there a
    test that skips fails (tests/conftest.py).  With --kernel they read the
    lab's own tree under work/trees/, if there is one: they test the lab's
    parsers against the kunit.py and checkpatch.pl it was written for."""
    env = {}
    if ctx.request.tree.kernel is None:
        env["SCHEDLAB_TEST_TREE"] = str(ctx.fetched.path)
    else:
        say("  --kernel: on the lab's own tree under work/trees/, or skipped")
    return run(deps.pytest_cmd("tree"), env=env, check=False).returncode == 0


def _lint(ctx: TestContext) -> bool:
    """mypy over the package, shellcheck over the guest scripts, the lab's
    commit subjects."""
    ok = run(deps.mypy_cmd(), check=False).returncode == 0
    scripts = sorted(str(p) for p in package_file("guest").rglob("*.sh"))
    if run(["shellcheck", *scripts], check=False).returncode != 0:
        return False
    say(f"  shellcheck: {len(scripts)} guest scripts clean")
    problems = commitlint.check(repo_dir())
    for line in problems:
        say(f"  commit subject: {line}")
    if not problems:
        say("  commit subjects: clean since the base in .ci/commit-lint-base")
    return ok and not problems


def _fetch(ctx: TestContext) -> bool:
    ctx.tree = ctx.request.tree.resolve()
    say(f"  base: {ctx.tree.description}")
    return True


def _objdiff(ctx: TestContext) -> bool:
    text, ok = objdiff.run_all(ctx.fetched)
    say(text)
    return ok


def _series_check(ppc: bool) -> Body:
    def body(ctx: TestContext) -> bool:
        if not patchset.read_series(patchset.patches_dir()):
            say("  the series is empty: nothing to check")
            return True
        text, ok = series_check.check_all(ctx.fetched, ppc=ppc)
        say(text)
        return ok
    return body


def _build(key: str, spec: BuildSpec) -> Body:
    def body(ctx: TestContext) -> bool:
        ctx.builds[key] = ctx.builder(ctx.fetched, spec)
        return True
    return body


def _boot(key: str, arch: str, name: str) -> Body:
    def body(ctx: TestContext) -> bool:
        # A topology boot takes 15-40 s under TCG: one that has not ended in
        # BOOT_TIMEOUT hung, and is booted once more (vm.boot).
        opts = ctx.request.vm.with_(timeout=BOOT_TIMEOUT, retry_hung=True)
        if not targets.get_target(arch).runs_commands:
            # The topology check alone: the boot options of the x86_64 runs
            # (a command, --rwdir, icount, --online) are not for this guest.
            opts = opts.with_(online=None, no_check=False, rwdirs=(), accel="auto")
        topo = topomod.parse_topology(name)
        return guests.check_topology(arch, ctx.builds[key].image, topo, opts) == 0
    return body


def _kunit(key: str, arch: str, name: str, online: Optional[int],
           reference: Optional[str] = None) -> Body:
    def body(ctx: TestContext) -> bool:
        return kunit.run_on(ctx.fetched.path, ctx.builds[key].image, name, online, None,
                            ctx.request.vm.timeout, arch=arch,
                            require_live=online is None,
                            reference=ctx.builds[reference].image if reference else None)
    return body


def _kunit_scale(key: str, arch: str) -> Body:
    def body(ctx: TestContext) -> bool:
        return kunit.run_scale(ctx.fetched.path, ctx.builds[key].image,
                               ctx.request.vm.timeout, arch)
    return body


def _kunit_py(key: str, arch: str) -> Body:
    def body(ctx: TestContext) -> bool:
        tree = ctx.fetched
        return kunit_tool.run_readme_command(tree.path, tree.key, ctx.builds[key].image,
                                             arch=arch)
    return body


def _kselftest(ctx: TestContext) -> bool:
    return kselftest.run_selftest(ctx.fetched, ctx.builds["lab"].image, ctx.request.vm)


def _integration(check: Callable[..., bool]) -> Body:
    def body(ctx: TestContext) -> bool:
        return check(ctx.fetched, ctx.builds["probe"], ctx.request.vm)
    return body


def _soak(ctx: TestContext) -> bool:
    return soakmod.run_for(SOAK_TOPOLOGY, SOAK_MINUTES, "patched", ctx.request.tree,
                           no_build=True, kit=True)


def _rehearsal(ctx: TestContext) -> bool:
    # With --c2c: the guest has no load sampling, so this checks that the
    # kit drops it with perf's words and goes on.
    return rehearsal.run(rehearsal.RehearsalRequest(
        REHEARSAL_TOPOLOGY, rehearsal.REHEARSAL_ARMS, rehearsal.BENCH,
        tree=ctx.request.tree, c2c=True)).ok


def _matrix(tier: str) -> Body:
    def body(ctx: TestContext) -> bool:
        text, ok = matrix.run(ctx.fetched, tier)
        say(text)
        return ok
    return body


def _peer_tests(ctx: TestContext) -> bool:
    return peermod.run_peer_tests(ctx.request.tree, ["patched"], no_build=True)


# ------------------------------------------------------------------ the tiers

def _target_stages(target: targets.BootTarget, topologies: Tuple[str, ...], tier: str,
                   kunit_py: bool) -> List[Stage[TestContext]]:
    """A cross target's stages: its lab build, topology boots, KUnit boots."""
    arch, key, guest = target.arch, f"lab-{target.arch}", target.guest
    build = f"build patched/lab {arch}"
    out = [Stage(build, _build(key, BuildSpec("patched", "lab", arch)), ("fetch",), tier)]
    out += [Stage(f"boot {t} ({guest}) + topology check", _boot(key, arch, t), (build,), tier)
            for t in topologies]
    out += [Stage(f"KUnit on {t} ({guest})", _kunit(key, arch, t, online), (build,), tier)
            for t, online in target.kunit_runs]
    if target.kunit_scale:
        out.append(Stage(f"KUnit at scale ({guest}, {kunit.SCALE_TOPOLOGY.cpus} possible CPUs)",
                         _kunit_scale(key, arch), (build,), tier))
    if kunit_py:
        out.append(Stage(f"KUnit with kunit.py for {target.kunit_arch} (the README's command)",
                         _kunit_py(key, arch), (build,), tier))
    return out


def stages_for(req: TestRequest) -> List[Stage[TestContext]]:
    """The stage records of the tier REQ asks for, in the order they run."""
    setup = [Stage("setup", _setup)]
    target = targets.get_target(req.arch)
    if target is not DEFAULT:
        return setup + [Stage("fetch", _fetch, ("setup",))] + \
            _target_stages(target, target.test_topologies, "test", kunit_py=True)
    out = setup + [Stage("lab unit tests (pytest)", _pytest, ("setup",)),
                   Stage("lint (mypy, shellcheck, commit subjects)", _lint, ("setup",))]
    if req.unit_only:
        return out
    lab, probe = "build patched/lab", "build patched/probe + measurement series"
    topo = pipeline.INTEGRATION_TOPOLOGY
    # The series check after the lab build: its W=1 trees share the lab
    # config, so their preparation comes out of ccache on a new machine.
    out += [Stage("fetch", _fetch, ("setup",)),
            Stage("lab unit tests on the kernel tree (pytest -m tree)", _pytest_tree,
                  ("fetch",)),
            Stage(lab, _build("lab", BuildSpec("patched", "lab")), ("fetch",)),
            Stage("series check" + (" (with the ppc64le compile)" if req.full else ""),
                  _series_check(ppc=req.full), ("fetch",)),
            Stage("config matrix (" + ("every cell, the bisection, sparse" if req.full
                                       else "the default cells") + ")",
                  _matrix("full" if req.full else "default"), ("fetch",))]
    out += [Stage(f"boot {t} + topology check", _boot("lab", DEFAULT.arch, t), (lab,))
            for t in req.topologies]
    out += [Stage(f"KUnit on {t}", _kunit("lab", DEFAULT.arch, t, online), (lab,))
            for t, online in DEFAULT.kunit_runs]
    out += [Stage("KUnit with kunit.py (the README's command)", _kunit_py("lab", DEFAULT.arch),
                  (lab,)),
            Stage(f"kselftest sched/{kselftest.SELFTEST[1]} on {kselftest.SELFTEST[0]}",
                  _kselftest, (lab,)),
            Stage(probe, _build("probe", probe_build("patched")), ("fetch",)),
            Stage(f"measure integration ({topo}, {','.join(pipeline.INTEGRATION.names())})",
                  _integration(pipeline.measure_integration), (probe,)),
            Stage(f"icount integration ({topo}, swb-cost)",
                  _integration(pipeline.icount_integration), (probe,))]
    if req.full:
        # v7.3's should_we_balance() probe counts: the suite on the KUnit
        # series alone, the reference of the probe targets.
        ref = f"build {REFERENCE_VARIANT}/lab (the KUnit series alone)"
        t, online = DEFAULT.kunit_runs[0]
        out += [Stage("fair.o's production code with the KUnit option on and off "
                      "(x86_64, ppc64le)", _objdiff, ("fetch",), "full"),
                Stage(ref, _build("reference", BuildSpec(REFERENCE_VARIANT, "lab")), ("fetch",),
                      "full"),
                Stage(f"KUnit on {t} with v7.3's probe counts (the probe targets)",
                      _kunit("lab", DEFAULT.arch, t, online, reference="reference"),
                      (lab, ref), "full")]
        debug, kit_debug = "build patched/debug", "build patched+measure+kit/debug"
        kit_icount = "build patched+measure+kit/icount"
        out += [Stage(debug, _build("debug", BuildSpec("patched", "debug")), ("fetch",), "full"),
                Stage(kit_debug, _build("kit-debug", BuildSpec("patched", "debug", kit=True)),
                      ("fetch",), "full"),
                Stage(f"soak ({SOAK_TOPOLOGY}, patched with the kit's switches, "
                      f"{SOAK_MINUTES:g} min)", _soak, (kit_debug,), "full"),
                Stage("peer tests (patched, against the kept base results)", _peer_tests,
                      (debug,), "full"),
                Stage(kit_icount, _build("kit-icount", BuildSpec("patched", "icount", kit=True)),
                      ("fetch",), "full"),
                Stage(f"hardware kit rehearsal ({REHEARSAL_TOPOLOGY}, the stock kernel and "
                      "three arms, single-thread TCG)", _rehearsal, (kit_icount,), "full")]
        for other in targets.TARGETS.values():
            if other is not DEFAULT:
                out += _target_stages(other, other.test_topologies[:1], "full", kunit_py=False)
    return out


# ------------------------------------------------------------------ the record

def patches_hash(folder: Optional[Path] = None) -> str:
    """sha256 over every file under patches/ (path and content), sorted."""
    folder = folder or patchset.patches_dir()
    h = hashlib.sha256()
    for p in sorted(q for q in folder.rglob("*") if q.is_file()):
        h.update(p.relative_to(folder).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()


def record_dir() -> Path:
    return repo_dir() / "results" / "test-full"


def record_path(digest: str) -> Path:
    return record_dir() / f"{digest[:16]}.json"


def full_record(req: TestRequest, report: stagemod.Report, ctx: TestContext,
                started: float, digest: str) -> Dict[str, Any]:
    tree = ctx.tree
    lab = git(repo_dir(), "rev-parse", "HEAD", check=False)
    return {
        "tier": req.title,
        "patches_sha256": digest,
        "passed": report.ok,
        "closing_line": report.closing_line(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started),
        "lab_commit": lab,
        "kernel": {"base": tree.description if tree else None,
                   "base_commit": tree.base if tree else None,
                   "releases": ctx.releases()},
        "machine": {"cpus": os.cpu_count(), "arch": platform.machine()},
        "stages": [r.to_json() for r in report.results],
    }


def say_record_status(digest: str) -> None:
    """A warning, not a failure: is there a passing full record for these patches?"""
    path = record_path(digest)
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        rec = None
    if rec and rec.get("passed") and rec.get("patches_sha256") == digest:
        say(f"test --full: a passing record exists for patches/ as they are: "
            f"{path.relative_to(repo_dir())} ({rec.get('started')}, {rec.get('closing_line')})")
    else:
        say(f"warning: no passing './schedlab test --full' record for patches/ as they are "
            f"(sha256 {digest[:16]}): run it and commit {path.relative_to(repo_dir())} "
            "before a changed patch is called done")


def test_command(req: TestRequest, builder: Builder = built) -> int:
    """Run the tier REQ asks for; 0 when every stage passed."""
    digest = patches_hash()
    started = time.time()
    ctx = TestContext(req, builder)
    if not req.full and not req.arch:
        say_record_status(digest)
    report = stagemod.run(req.title, stages_for(req), ctx)
    if req.full and not req.unit_only:
        path = record_path(digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(full_record(req, report, ctx, started, digest), indent=1)
                        + "\n")
        say(f"record: {path.relative_to(repo_dir())} (commit it)")
    return 0 if report.ok else 1
