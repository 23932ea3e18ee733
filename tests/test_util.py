"""Which checkout the lab works on: --repo, $SCHEDLAB_REPO, the current folder."""

import pytest

from schedlab.core import util
from schedlab.core.util import LabError


@pytest.fixture
def checkouts(tmp_path, monkeypatch):
    monkeypatch.delenv("SCHEDLAB_REPO", raising=False)
    monkeypatch.delenv("SCHEDLAB_WORK", raising=False)
    monkeypatch.setattr(util, "_repo", None)
    out = []
    for name in ("a", "b"):
        (tmp_path / name / "patches").mkdir(parents=True)
        (tmp_path / name / "patches" / "series").write_text("")
        out.append((tmp_path / name).resolve())
    return out


def test_current_folder_or_a_parent(checkouts, monkeypatch):
    a, _b = checkouts
    (a / "results" / "x").mkdir(parents=True)
    monkeypatch.chdir(a / "results" / "x")
    assert util.repo_dir() == a
    assert util.work_dir() == a / "work"


def test_repo_option_then_environment(checkouts, monkeypatch):
    a, b = checkouts
    monkeypatch.chdir(a)
    monkeypatch.setenv("SCHEDLAB_REPO", str(b))
    assert util.repo_dir() == b
    util.set_repo(a)
    assert util.repo_dir() == a
    monkeypatch.setenv("SCHEDLAB_WORK", str(b / "elsewhere"))
    assert util.work_dir() == b / "elsewhere"


def test_no_checkout_says_what_to_do(checkouts, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LabError, match=r"run it in a schedlab checkout or pass --repo DIR"):
        util.repo_dir()
    with pytest.raises(LabError, match="checkout"):
        util.work_dir()
    monkeypatch.setenv("SCHEDLAB_REPO", str(tmp_path))
    with pytest.raises(LabError, match="SCHEDLAB_REPO .*: not a schedlab checkout"):
        util.repo_dir()
    util.set_repo(tmp_path / "nowhere")
    with pytest.raises(LabError, match="--repo .*nowhere: not a schedlab checkout"):
        util.repo_dir()


def test_package_files():
    assert util.package_file("configs/lab.config").is_file()
    with pytest.raises(LabError, match="broken install"):
        util.package_file("configs/none.config")
