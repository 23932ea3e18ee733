"""The config matrix: the cell table, the config check, the report, the command
line, and the order of the steps (with a fake make and scripts/config)."""

import os
import re
from contextlib import contextmanager
from pathlib import Path

import pytest

from schedlab import cli, cli_series
from schedlab.core import build as buildmod
from schedlab.core.util import LabError
from schedlab.series import matrix, matrix_cells, patchset

REPO = Path(__file__).resolve().parents[1]
BASE, MID, TIP = "b" * 40, "c" * 40, "d" * 40


# ------------------------------------------------------------------ the table

def test_cell_table_is_sane():
    names = [c.name for c in matrix_cells._cells()]
    assert len(names) == len(set(names)) == len(matrix_cells.CELLS)
    for cell in matrix_cells.CELLS.values():
        assert cell.tier in matrix_cells.TIERS and cell.test in matrix_cells.TEST_MODES, cell.name
        assert cell.arch in matrix_cells.ARCHES and cell.why, cell.name
        # a request is never asked for twice with different values
        asked = {}
        for sym, val in cell.requests:
            assert asked.setdefault(sym, val) == val, (cell.name, sym)
    default = {c.name for c in matrix_cells.cells_for("default")}
    assert default == {"all-tests-turns-option-on", "fgs-no-cfs-bandwidth+all-tests"}
    assert len(matrix_cells.cells_for("full")) == len(matrix_cells.CELLS)
    assert set(matrix_cells.BISECT_CELLS) <= set(matrix_cells.CELLS) and matrix_cells.SPARSE_CELL in matrix_cells.CELLS
    for name in names:
        if name.startswith("no-") and not name.endswith("+all-tests"):
            assert matrix_cells.CELLS[name].test == "direct"
            assert matrix_cells.CELLS[name + "+all-tests"].test == "all-tests"
    assert len([n for n in names if n.startswith("no-")]) == 2 * len(matrix_cells.DROPS)


def test_cells_are_grouped_by_arch_in_table_order():
    cells = matrix_cells.cells_for("full")
    arches = [c.arch for c in cells]
    assert arches == sorted(arches, key=list(matrix_cells.ARCHES).index)
    assert [c.name for c in matrix_cells.cells_for("default", ["ppc64le-all", "rt", "tiny"])] == \
        ["tiny", "rt", "ppc64le-all"]


def test_cell_records_refuse_bad_values():
    with pytest.raises(ValueError):
        matrix_cells.Cell("x", "x86_64", (("CONFIG_SMP", "y"),), "off", "default", "why")
    with pytest.raises(ValueError):
        matrix_cells.Cell("x", "x86_64", (("SMP", "m"),), "off", "default", "why")
    with pytest.raises(ValueError):
        matrix_cells.Cell("x", "sparc", (), "off", "default", "why")
    with pytest.raises(ValueError):
        matrix_cells.Cell("x", "x86_64", (), "sometimes", "default", "why")


def _symbols_the_series_tests():
    """The CONFIG_ symbols that the series' lines under kernel/ test in an #if
    or IS_ENABLED(), the test option's own aside."""
    found = set()
    for patch in patchset.read_series():
        path = None
        for line in patch.read_text(errors="replace").splitlines():
            if line.startswith("+++ b/"):
                path = line[len("+++ b/"):]
            elif line.startswith("+") and path and path.startswith("kernel/") and \
                    re.search(r"#\s*(?:el)?if|IS_ENABLED\(", line):
                found.update(re.findall(r"\bCONFIG_([A-Z0-9_]+)", line))
    return found - {matrix_cells.TEST_OPTION}


def test_every_symbol_the_series_tests_is_built_on_and_off():
    syms = _symbols_the_series_tests()
    assert {"FAIR_GROUP_SCHED", "NUMA_BALANCING", "SCHED_CACHE"} <= syms
    cells = matrix_cells.CELLS.values()
    for sym in syms:
        # Asked for or expected, not left to Kconfig's defaults; an arch's
        # own symbol (PPC64) is off in the cells of the other arches.
        values = {v for c in cells for k, v in c.requests + c.expect + matrix_cells.ARCH_EXPECT[c.arch]
                  if k == sym}
        arch_own = [c.arch for c in cells if sym in dict(matrix_cells.ARCH_EXPECT[c.arch])]
        if arch_own and any(c.arch not in arch_own for c in cells):
            values.add("n")
        assert values >= {"y", "n"}, sym


def test_each_all_tests_cell_is_its_direct_cell_with_kunit_all_tests():
    pairs = [(n, n[:-len("+all-tests")]) for n in matrix_cells.CELLS if n.endswith("+all-tests")
             and n[:-len("+all-tests")] in matrix_cells.CELLS]
    assert len(pairs) >= 5
    for name, direct in pairs:
        got, base = dict(matrix_cells.CELLS[name].requests), dict(matrix_cells.CELLS[direct].requests)
        base.pop(matrix_cells.TEST_OPTION, None)
        assert matrix_cells.CELLS[name].test == "all-tests" and got.pop("KUNIT_ALL_TESTS") == "y"
        assert got == base, name


def test_each_no_cell_turns_off_what_its_name_says_and_keeps_the_rest():
    full = dict(matrix_cells.CELLS["all"].requests)
    checked = 0
    for name, cell in matrix_cells.CELLS.items():
        if not name.startswith("no-") or "+" in name:
            continue
        checked += 1
        sym = name[len("no-"):].upper().replace("-", "_")
        sym = {"NOHZ": "NO_HZ_IDLE"}.get(sym, sym)     # the one name Kconfig spells apart
        got = dict(cell.requests)
        assert got.get(sym) == "n" and full.get(sym) == "y", name
        # What else differs is what Kconfig needs for that: dependents of
        # the symbol left out, and the sibling a choice member leaves on
        # (HZ_PERIODIC for NO_HZ_IDLE); nothing else that 'all' has off.
        siblings = {"NO_HZ_IDLE": {"HZ_PERIODIC"}}.get(sym, set())
        assert all(full.get(k) == v for k, v in got.items() if k != sym and k not in siblings), \
            name
    assert checked >= 10


def test_the_test_options_modes():
    on = matrix_cells.CELLS["all-tests-turns-option-on"]
    assert matrix_cells.TEST_OPTION not in dict(on.requests)
    assert (matrix_cells.TEST_OPTION, "y") in matrix_cells.TEST_EXPECT[on.test]
    assert dict(matrix_cells.CELLS["tiny-smp-kunit"].requests)[matrix_cells.TEST_OPTION] == "y"
    assert matrix_cells.TEST_OPTION not in dict(matrix_cells.CELLS["tiny"].requests)


def _kconfig_symbols(tree: Path) -> set:
    found = set()
    for top, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if d != ".git"]
        for f in files:
            if f.startswith("Kconfig"):
                text = Path(top, f).read_text(errors="replace")
                found.update(re.findall(r"^\s*(?:menu)?config\s+([A-Z0-9_]+)\s*$", text, re.M))
    return found


@pytest.mark.tree
def test_every_symbol_of_the_table_is_in_the_trees_kconfig(kernel_tree):
    """In the tree's Kconfig files as checked out, or added by the series (the
    tree may be at the base, without the test option)."""
    known = _kconfig_symbols(kernel_tree("init/Kconfig"))
    for patch in (REPO / "patches").glob("*.patch"):
        known.update(re.findall(r"^\+\s*(?:menu)?config\s+([A-Z0-9_]+)\s*$",
                                patch.read_text(errors="replace"), re.M))
    asked = {sym for c in matrix_cells.CELLS.values()
             for sym, _ in c.requests + c.expect + matrix_cells.ARCH_EXPECT[c.arch]}
    assert asked - known == set()


# ------------------------------------------------------------------ the config check

def test_a_request_kconfig_dropped_fails_naming_the_symbol():
    cell = matrix_cells.CELLS["all"]
    final = buildmod.parse_config("\n".join(f"CONFIG_{s}={v}" for s, v in cell.requests
                                            if v == "y")
                                  + "\nCONFIG_64BIT=y\nCONFIG_NO_HZ_COMMON=y\n")
    assert matrix.check_config(cell, final) == []
    final["CONFIG_SCHED_CORE"] = "n"
    del final["CONFIG_PROVE_LOCKING"]          # "is not set" lines may be missing too
    assert matrix.check_config(cell, final) == ["CONFIG_SCHED_CORE=y requested, got n",
                                                "CONFIG_PROVE_LOCKING=y requested, got n"]
    assert matrix.check_config(cell, final, skip=["SCHED_CORE", "PROVE_LOCKING"]) == []


def test_an_expectation_not_met_fails():
    cell = matrix_cells.CELLS["all-tests-turns-option-on"]
    text = ("CONFIG_64BIT=y\nCONFIG_SMP=y\nCONFIG_KUNIT=y\nCONFIG_KUNIT_ALL_TESTS=y\n"
            "CONFIG_SCHED_FAIR_LB_KUNIT_TEST=y\n")
    assert matrix.check_config(cell, buildmod.parse_config(text)) == []
    off = buildmod.parse_config(text.replace("CONFIG_SCHED_FAIR_LB_KUNIT_TEST=y",
                                             "# CONFIG_SCHED_FAIR_LB_KUNIT_TEST is not set"))
    assert matrix.check_config(cell, off) == ["CONFIG_SCHED_FAIR_LB_KUNIT_TEST=y expected, got n"]
    # The arch's expectation: tinyconfig without ARCH=x86_64 is 32-bit.
    assert matrix.check_config(matrix_cells.CELLS["tiny"], {}) == ["CONFIG_64BIT=y expected, got n"]


def test_config_args_follow_the_requests_in_order():
    cell = matrix_cells.CELLS["fgs-no-cfs-bandwidth+all-tests"]
    assert cell.config_args() == [
        "--enable", "SMP", "--enable", "CGROUPS", "--enable", "CGROUP_SCHED",
        "--enable", "FAIR_GROUP_SCHED", "--disable", "CFS_BANDWIDTH", "--enable", "KUNIT",
        "--enable", "KUNIT_ALL_TESTS"]


def test_first_errors_prefer_the_linkers_lines():
    log = ("  CC      kernel/sched/fair.o\n"
           "ld: vmlinux.o: in function `sis_group_idle_counts_what_can_run':\n"
           "fair.c:(.text+0x1a2): undefined reference to `cfs_bandwidth_usage_inc'\n"
           "fair.c:(.text+0x2b3): undefined reference to `cfs_bandwidth_usage_dec'\n"
           "make[2]: *** [scripts/Makefile.vmlinux:77: vmlinux] Error 1\n")
    assert matrix.first_errors(log).splitlines() == [
        "fair.c:(.text+0x1a2): undefined reference to `cfs_bandwidth_usage_inc'",
        "fair.c:(.text+0x2b3): undefined reference to `cfs_bandwidth_usage_dec'"]
    assert matrix.first_errors("a\nmake: *** [Makefile:1] Error 2\n") == \
        "make: *** [Makefile:1] Error 2"
    assert matrix.first_errors("one\ntwo\n", limit=1) == "two"


# ------------------------------------------------------------------ the report

def test_report_lines_times_failures_and_total():
    results = [
        matrix.CellResult("tiny", TIP, "passed", 62.0),
        matrix.CellResult("fgs-no-cfs-bandwidth+all-tests", TIP, "failed", 190.0,
                          "fair.c:(.text+0x1a2): undefined reference to "
                          "`cfs_bandwidth_usage_inc'", log="/w/logs/matrix-fgs.log"),
    ]
    text, ok = matrix.report(results)
    assert not ok
    lines = text.splitlines()
    assert lines[0] == f"config matrix at {TIP[:12]}:"
    assert re.fullmatch(r"\s+\[\s*ok\] tiny\s+1m02s", lines[1])
    assert re.fullmatch(r"\s+\[FAIL\] fgs-no-cfs-bandwidth\+all-tests\s+3m10s", lines[2])
    assert "undefined reference to `cfs_bandwidth_usage_inc'" in lines[3]
    assert "log: /w/logs/matrix-fgs.log" in lines[4]
    assert lines[-1] == "matrix: 1 passed, 1 failed, total 4m12s"
    text, ok = matrix.report(results[:1])
    assert ok and text.endswith("matrix: 1 passed, 0 failed, total 1m02s")


def test_report_names_the_first_failing_commit_of_a_bisection():
    results = [matrix.CellResult("fgs", c, o, 10.0, "" if o == "passed" else "ld: boom",
                                 kind="bisect", subject=s)
               for c, o, s in ((BASE, "passed", "one"), (MID, "failed", "two"),
                               (TIP, "failed", "three"))]
    results += [matrix.CellResult("tiny", c, "passed", 5.0, kind="bisect", subject="x")
                for c in (BASE, MID, TIP)]
    text, ok = matrix.report(results)
    assert not ok
    assert f"bisection in fgs, 3 commit(s): first failing commit {MID[:12]} (two)" in text
    assert "bisection in tiny, 3 commit(s): every commit builds" in text


# ------------------------------------------------------------------ the command line

def test_cli_matrix_request(monkeypatch):
    seen = {}

    def fake_run(tree, tier, cells=None, end=None):
        seen.update(tree=tree, tier=tier, cells=cells, end=end)
        return "report", True
    monkeypatch.setattr(matrix, "run", fake_run)
    monkeypatch.setattr(cli_series, "tree_spec", lambda args: type(
        "S", (), {"resolve": staticmethod(lambda: "TREE")})())
    assert cli.main(["series", "matrix", "--full", "--cells", "tiny,rt", "--end", "my-tip"]) == 0
    assert seen == {"tree": "TREE", "tier": "full", "cells": ["tiny", "rt"], "end": "my-tip"}
    assert cli.main(["series", "matrix"]) == 0
    assert seen["tier"] == "default" and seen["cells"] is None and seen["end"] is None


# ------------------------------------------------------------------ the run, with fakes

class FakeTree:
    def __init__(self, path, events):
        self.key, self.path, self.base, self.description = "fake", path, BASE, "fake tree"
        self.head = BASE
        self.events = events
        self.locks = 0

    def checkout(self, commit):
        self.head = commit

    def commit_of(self, variant):
        return None

    @contextmanager
    def locked(self, what):
        assert self.locks == 0, "the tree's lock taken twice"
        self.locks += 1
        self.events.append(("lock", what))
        try:
            yield
        finally:
            self.locks -= 1
            self.events.append(("unlock", what))


def _write_config(path: Path, values: dict) -> None:
    path.write_text("".join(f"{k}={v}\n" if v != "n" else f"# {k} is not set\n"
                            for k, v in values.items()))


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A fake make and scripts/config that keep .config as Kconfig would if
    every request held (state: 'kconfig', what olddefconfig forces;
    'link_fails', the cells whose vmlinux fails; 'sparse', the checker's
    lines per commit), and git's answers for a series of two commits
    (MID, TIP) on BASE, with the tag my-tip at MID."""
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path / "work"))
    events = []
    tree = FakeTree(tmp_path / "linux", events)
    # 'absent_at': commits whose Kconfig does not define the test option
    state = {"kconfig": {}, "link_fails": set(), "sparse": {}, "absent_at": set()}
    monkeypatch.setattr(matrix.shutil, "which", lambda name: f"/usr/bin/{name}")

    def fake_make(cmd, tree_path, log, what, quiet=False):
        odir = Path(next(a[2:] for a in cmd if a.startswith("O=")))
        karch = next(a[5:] for a in cmd if a.startswith("ARCH="))
        target = cmd[-1]
        events.append(("make", target, odir.name, karch, tree.head[:1]))
        with open(log, "a") as f:
            f.write("$ " + " ".join(cmd) + "\n")
            cfg = odir / ".config"
            if target == "tinyconfig":
                odir.mkdir(parents=True, exist_ok=True)
                _write_config(cfg, {"CONFIG_64BIT": "y" if karch == "x86_64" else "n"})
            elif target == "olddefconfig":
                values = buildmod.parse_config(cfg.read_text())
                values["CONFIG_NO_HZ_COMMON"] = values.get("CONFIG_NO_HZ_IDLE", "n")  # select
                if values.get("CONFIG_KUNIT_ALL_TESTS") == "y":      # the option's default
                    values.setdefault("CONFIG_" + matrix_cells.TEST_OPTION, "y")
                values.update(state["kconfig"])
                if tree.head in state["absent_at"]:
                    values.pop("CONFIG_" + matrix_cells.TEST_OPTION, None)
                _write_config(cfg, values)
            elif target == "vmlinux" and what.split(":")[0] in state["link_fails"]:
                f.write("fair.c:(.text+0x1a2): undefined reference to "
                        "`cfs_bandwidth_usage_inc'\nmake: *** [Makefile] Error 2\n")
                raise LabError(f"{what} failed")
            elif target == "kernel/sched/":
                f.write("".join(state["sparse"].get(tree.head[:1], [])))
        return 1.0

    def fake_scripts_config(cmd, cwd=None, log=None, **kw):
        assert cmd[0] == str(tree.path / "scripts" / "config") and cmd[1] == "--file"
        cfg = Path(cmd[2])
        events.append(("scripts/config", cfg.parent.name, tuple(cmd[3:])))
        values = buildmod.parse_config(cfg.read_text())
        args = cmd[3:]
        for op, sym in zip(args[::2], args[1::2]):
            values["CONFIG_" + sym] = "y" if op == "--enable" else "n"
        _write_config(cfg, values)

    def fake_git(path, *args, check=True):
        if args[0] == "rev-parse":
            return {"my-tip^{commit}": MID}.get(args[-1], "")
        if args[0] == "rev-list":
            assert args[-1] in (f"{BASE}..{TIP}", f"{BASE}..{MID}")
            return f"{MID}\n{TIP}\n" if args[-1].endswith(TIP) else f"{MID}\n"
        if args[0] == "log":
            return f"subject of {args[-1][:1]}"
        raise AssertionError(args)

    monkeypatch.setattr(buildmod, "run_make", fake_make)
    monkeypatch.setattr(matrix, "run_cmd", fake_scripts_config)
    monkeypatch.setattr(matrix, "git", fake_git)
    monkeypatch.setattr(matrix.patchset, "git", fake_git)
    monkeypatch.setattr(matrix.patchset, "ensure_variant", lambda t, variant: TIP)
    monkeypatch.setattr(buildmod, "known_symbols",
                        lambda path, syms: {s for s in syms if s != "CONFIG_" +
                                            matrix_cells.TEST_OPTION or
                                            tree.head not in {BASE} | state["absent_at"]})
    return tree, events, state


def _steps(events):
    """(target, folder, ARCH, commit) of each make and scripts/config, in order."""
    out = []
    for e in events:
        if e[0] == "make":
            out.append((e[1], e[2], e[3], e[4]))
        elif e[0] == "scripts/config":
            out.append(("scripts/config", e[1], "", ""))
    return out


def test_default_tier_runs_the_four_steps_per_cell_in_one_folder(lab, capsys):
    tree, events, _ = lab
    text, ok = matrix.run(tree)
    assert ok, text
    steps = _steps(events)
    cells = matrix_cells.cells_for("default")
    expected = []
    for cell in cells:
        expected += [("tinyconfig", "matrix-x86_64", "x86_64", "d")]
        if cell.requests:
            expected += [("scripts/config", "matrix-x86_64", "", "")]
        expected += [("olddefconfig", "matrix-x86_64", "x86_64", "d")]
        if cell.link:
            expected += [("vmlinux", "matrix-x86_64", "x86_64", "d")]
    assert steps == expected
    assert not matrix_cells.CELLS["all-tests-turns-option-on"].link   # the config alone
    assert events[0] == ("lock", "series matrix") and events[-1] == ("unlock", "series matrix")
    for cell in cells:
        assert (Path(os.environ["SCHEDLAB_WORK"]) / "logs" / f"matrix-{cell.name}.log").is_file()
        assert re.search(rf"\[\s*ok\] {re.escape(cell.name)}\s", text)
    # the requests reach scripts/config in the cell's order
    fgs = matrix_cells.CELLS["fgs-no-cfs-bandwidth+all-tests"]
    assert ("scripts/config", "matrix-x86_64", tuple(fgs.config_args())) in events


def test_one_build_folder_per_arch(lab):
    tree, events, _ = lab
    text, ok = matrix.run(tree, cells=["ppc64le-nosmt", "tiny", "i386", "ppc64le-all", "rt"])
    assert ok, text
    folders = {}
    for target, folder, karch, _ in _steps(events):
        if karch:
            folders.setdefault(folder, set()).add(karch)
    assert folders == {"matrix-x86_64": {"x86_64"}, "matrix-i386": {"i386"},
                       "matrix-ppc64le": {"powerpc"}}
    makes = [e for e in events if e[0] == "make" and e[1] == "vmlinux"]
    assert [e[2] for e in makes] == ["matrix-x86_64", "matrix-x86_64", "matrix-i386",
                                     "matrix-ppc64le", "matrix-ppc64le"]


def test_ppc64le_passes_cross_compile(lab, monkeypatch):
    tree, events, _ = lab
    seen = []
    real = buildmod.run_make
    monkeypatch.setattr(buildmod, "run_make",
                        lambda cmd, *a, **k: (seen.append(cmd), real(cmd, *a, **k))[1])
    matrix.run(tree, cells=["ppc64le-nosmt"])
    assert all("CROSS_COMPILE=powerpc64le-linux-gnu-" in cmd and "ARCH=powerpc" in cmd
               for cmd in seen)


def test_a_dropped_request_fails_the_cell_without_building(lab):
    tree, events, state = lab
    state["kconfig"] = {"CONFIG_SCHED_CORE": "n"}
    text, ok = matrix.run(tree, cells=["all", "tiny"])
    assert not ok
    assert "CONFIG_SCHED_CORE=y requested, got n" in text
    vmlinux = [e for e in events if e[0] == "make" and e[1] == "vmlinux"]
    assert len(vmlinux) == 1                    # tiny's only
    assert re.search(r"\[FAIL\] all\s", text) and re.search(r"\[\s*ok\] tiny\s", text)


def test_a_link_failure_shows_its_first_error_lines(lab):
    tree, _, state = lab
    state["link_fails"] = {"fgs-no-cfs-bandwidth+all-tests"}
    text, ok = matrix.run(tree, cells=["fgs-no-cfs-bandwidth+all-tests"], end="my-tip")
    assert not ok
    assert f"config matrix at {MID[:12]}" in text
    assert "undefined reference to `cfs_bandwidth_usage_inc'" in text


def test_an_unknown_end_is_refused(lab):
    tree, events, _ = lab
    with pytest.raises(LabError, match="no commit 'v0'"):
        matrix.run(tree, end="v0")
    assert not events


def test_a_missing_cross_compiler_fails_the_cell_only(lab, monkeypatch):
    tree, _, _ = lab
    monkeypatch.setattr(matrix.shutil, "which",
                        lambda name: None if name.startswith("powerpc") else f"/usr/bin/{name}")
    text, ok = matrix.run(tree, cells=["tiny", "ppc64le-nosmt"])
    assert not ok
    assert "powerpc64le-linux-gnu-gcc not found (Debian package " \
           "gcc-powerpc64le-linux-gnu)" in text
    assert re.search(r"\[\s*ok\] tiny\s", text)


def test_full_tier_bisects_cell_major_and_diffs_sparse(lab):
    tree, events, state = lab
    state["link_fails"] = {"fgs-no-cfs-bandwidth+all-tests"}
    state["sparse"] = {
        "b": ["/k/kernel/sched/core.c:10:5: warning: symbol 'x' was not declared\n"],
        "d": ["/k/kernel/sched/core.c:12:5: warning: symbol 'x' was not declared\n",
              "/k/kernel/sched/tests/fair_kunit_topology.c:357:9: warning: incorrect type in "
              "assignment (different address spaces)\n",
              "    expected struct sched_domain [noderef] __rcu *sd\n"]}
    text, ok = matrix.run(tree, "full")
    assert not ok
    steps = _steps(events)
    # every cell at the tip first
    linked = [c for c in matrix_cells.CELLS.values() if c.link]
    assert [s[3] for s in steps if s[0] == "vmlinux"][:len(linked)] == ["d"] * len(linked)
    x86 = ("matrix-x86_64", "x86_64")

    def configured(commit, requests=True):
        return [("tinyconfig", *x86, commit)] + \
            ([("scripts/config", "matrix-x86_64", "", "")] if requests else []) + \
            [("olddefconfig", *x86, commit)]
    # then the bisection, cell-major; the tip's results are reused, so only
    # the middle commit is built in each cell; then sparse at the base and tip
    assert steps[-15:] == (
        configured("c", requests=False) + [("vmlinux", *x86, "c")]
        + configured("c") + [("vmlinux", *x86, "c")]
        + configured("b") + [("kernel/sched/", *x86, "b")]
        + configured("d") + [("kernel/sched/", *x86, "d")])
    assert f"bisection in fgs-no-cfs-bandwidth+all-tests, 2 commit(s): first failing " \
           f"commit {MID[:12]} (subject of c)" in text
    assert "bisection in tiny, 2 commit(s): every commit builds" in text
    assert "1 warning(s) the base does not have:" in text
    assert "kernel/sched/tests/fair_kunit_topology.c: warning: incorrect type in " \
           "assignment (different address spaces)" in text
    assert "symbol 'x' was not declared" not in text     # moved, not new


def test_the_bisection_checks_the_option_only_where_the_tree_has_it(lab, capsys):
    """A series whose first patch comes before the one that adds the test
    option: at that commit KUNIT_ALL_TESTS cannot turn the option on, and
    the bisection must not call it broken; at the tip the check is strict."""
    tree, events, state = lab
    state["absent_at"] = {MID}
    text, ok = matrix.run(tree, "full")
    assert ok, text
    assert "bisection in fgs-no-cfs-bandwidth+all-tests, 2 commit(s): every commit builds" \
        in text
    assert "not in this tree, not checked: SCHED_FAIR_LB_KUNIT_TEST" in capsys.readouterr().out
    state["absent_at"] = {MID, TIP}
    text, ok = matrix.run(tree, "full")
    assert not ok
    assert "CONFIG_SCHED_FAIR_LB_KUNIT_TEST=y expected, got n" in text


def test_sparse_diff_at_the_base_skips_symbols_the_base_lacks(lab):
    tree, events, state = lab
    state["kconfig"] = {"CONFIG_" + matrix_cells.TEST_OPTION: "n"}   # the base has no option
    result = matrix.sparse_diff(tree, BASE, TIP)
    # the tip's config check is strict: the option must be there
    assert result.outcome == "failed" and result.kind == "sparse"
    assert result.problem.startswith("the tip's config: CONFIG_SCHED_FAIR_LB_KUNIT_TEST=y "
                                     "requested, got n")


def test_sparse_missing_stops_before_any_build(lab, monkeypatch):
    tree, events, _ = lab
    monkeypatch.setattr(matrix.shutil, "which", lambda name: None)
    with pytest.raises(LabError, match="apt-get install sparse"):
        matrix.run(tree, "full")
    with pytest.raises(LabError, match="sparse is not installed"):
        matrix.sparse_diff(tree, BASE, TIP)
    assert not [e for e in events if e[0] == "make"]

def test_the_docs_page_lists_every_cell():
    page = (REPO / "docs" / "matrix.md").read_text()
    for name in matrix_cells.CELLS:
        assert f"`{name}`" in page, name


def test_a_sparse_the_tree_refuses_is_skipped_not_passed(lab):
    """7.3's scripts/checker-valid.sh refuses Debian's sparse 0.6.4; make C=2
    then checks nothing, which must not read as 'no new warnings'."""
    tree, events, _ = lab
    script = tree.path / "scripts" / "checker-valid.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("#!/bin/sh\necho 0\n")
    script.chmod(0o755)
    r = matrix._sparse_diff(tree, BASE, TIP)
    assert r.outcome == "skipped" and "checker-valid.sh refuses" in r.problem
    assert not [e for e in events if e[0] == "make" and "C=2" in str(e)]
    text, ok = matrix.report([r])
    assert ok and "[skip] sparse kernel/sched/ (all)" in text
    assert "matrix: 0 passed, 0 failed, 1 skipped" in text
    script.write_text("#!/bin/sh\necho 1\n")
    assert matrix._sparse_diff(tree, BASE, TIP).outcome == "passed"
