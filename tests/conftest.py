"""The tests marked 'tree' read a kernel tree: ./schedlab test runs them after
its fetch with $SCHEDLAB_TEST_TREE naming the tree, and there a skip is a
failure. Run alone, they use the first tree under work/trees/ or skip."""

import os
from pathlib import Path

import pytest

TREE_ENV = "SCHEDLAB_TEST_TREE"


def pytest_configure(config):
    config.addinivalue_line("markers", f"tree: needs a kernel tree (${TREE_ENV} or work/trees/)")


@pytest.fixture
def kernel_tree():
    """A function: the kernel tree that has the file NEEDS (a path inside it)."""
    def find(needs: str) -> Path:
        named = os.environ.get(TREE_ENV)
        if named:
            if not (Path(named) / needs).is_file():
                pytest.fail(f"${TREE_ENV} names {named}, which has no {needs}")
            return Path(named)
        work = Path(os.environ.get("SCHEDLAB_WORK") or Path(__file__).resolve().parents[1] / "work")
        found = sorted(work.glob(f"trees/*/{needs}"))
        if not found:
            pytest.skip(f"no kernel tree with {needs} under {work}/trees/ "
                        f"(./schedlab fetch makes one, or name one in ${TREE_ENV})")
        return found[0].parents[len(Path(needs).parts) - 1]
    return find


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get(TREE_ENV) and item.get_closest_marker("tree"):
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped though ${TREE_ENV} names a tree: {why}"
