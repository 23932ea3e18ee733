"""Setup: missing packages are named; without root nothing is installed."""

import pytest

from schedlab.core import deps
from schedlab.core.util import LabError


def test_not_root_lists_missing_packages(monkeypatch):
    monkeypatch.setattr(deps, "missing_debian", lambda pkgs: ["qemu-system-x86", "ccache"])
    monkeypatch.setattr(deps.os, "geteuid", lambda: 1000)
    with pytest.raises(LabError) as err:
        deps.ensure_debian()
    msg = str(err.value)
    assert "needs root" in msg
    assert "apt-get install qemu-system-x86 ccache" in msg


def test_apt_failure_names_the_failing_package(monkeypatch, tmp_path):
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path))
    monkeypatch.setattr(deps, "missing_debian", lambda pkgs: ["good", "broken"])
    monkeypatch.setattr(deps.os, "geteuid", lambda: 0)
    monkeypatch.setattr(deps, "run", lambda *a, **k: type("P", (), {"returncode": 0})())
    monkeypatch.setattr(deps, "_apt_install", lambda pkgs, log: pkgs == ["good"])
    with pytest.raises(LabError, match=r"apt could not install: broken \("):
        deps.ensure_debian()


def test_nothing_missing_installs_nothing(monkeypatch):
    monkeypatch.setattr(deps, "missing_debian", lambda pkgs: [])
    monkeypatch.setattr(deps, "_apt_install", lambda *a: pytest.fail("installed"))
    deps.ensure_debian()


def test_every_package_says_what_it_is_for():
    assert all(deps.DEBIAN_PACKAGES.values())


def test_guest_tool_packages_are_setup_packages():
    for binary, pkg in deps.GUEST_TOOLS.items():
        assert binary in deps.DEBIAN_PACKAGES[pkg], (binary, pkg)
    assert deps.GUEST_TOOLS["hackbench"] == "rt-tests"
    assert "shellcheck" in deps.DEBIAN_PACKAGES


def test_runtime_dependencies_leave_the_lab_extras_out():
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    runtime = deps._pyproject_dependencies(text)
    assert "virtme-ng==1.42" in runtime
    assert not {"pytest>=7", "mypy", "matplotlib"} & set(runtime)
    lab = deps.venv_requirements()
    assert lab[:len(runtime)] == runtime
    assert {"pytest>=7", "mypy", "matplotlib"} <= set(lab)


PYPROJECT = ('[project]\nname = "x"\ndependencies = [\n    "a==1",\n    # why\n'
             '    \'b>=2\',\n]\n[project.optional-dependencies]\nplots = ["c"]\n'
             'dev = [\n  "d[x]>=7", "e",\n]\n[tool.x]\ndependencies = ["no"]\n')


def _read_both(text):
    return deps._pyproject_dependencies(text), deps._pyproject_dependencies(text, ("plots", "dev"))


def test_pyproject_reader():
    assert _read_both(PYPROJECT) == (["a==1", "b>=2"], ["a==1", "b>=2", "c", "d[x]>=7", "e"])


def test_pyproject_reader_without_tomllib(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_tomllib(name, *a, **k):
        if name == "tomllib":
            raise ImportError(name)
        return real_import(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_tomllib)
    assert _read_both(PYPROJECT) == (["a==1", "b>=2"], ["a==1", "b>=2", "c", "d[x]>=7", "e"])


def test_up_to_date_venv_is_left_alone(monkeypatch, tmp_path):
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path))
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "vng").write_text("")
    marker = tmp_path / "venv" / ".schedlab-requirements"
    marker.write_text(deps._requirements_key(deps.venv_requirements()) + "\n")
    monkeypatch.setattr(deps, "run", lambda *a, **k: pytest.fail("pip ran"))
    monkeypatch.setattr(deps.venv, "EnvBuilder", lambda *a, **k: pytest.fail("venv made"))
    assert deps.ensure_venv() == tmp_path / "venv"


def test_changed_requirements_install_the_list(monkeypatch, tmp_path):
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path))
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    for name in ("vng", "python"):
        (tmp_path / "venv" / "bin" / name).write_text("")
    (tmp_path / "venv" / ".schedlab-requirements").write_text("old\n")
    calls = []
    monkeypatch.setattr(deps, "run", lambda cmd, **k: calls.append(cmd) or
                        type("P", (), {"returncode": 0})())
    deps.ensure_venv()
    assert len(calls) == 1 and calls[0][-len(deps.venv_requirements()):] == \
        deps.venv_requirements()
    assert (tmp_path / "venv" / ".schedlab-requirements").read_text().strip() == \
        deps._requirements_key(deps.venv_requirements())


def test_mypy_and_pytest_commands_use_the_venv(monkeypatch, tmp_path):
    monkeypatch.setenv("SCHEDLAB_WORK", str(tmp_path))
    from schedlab.core import util
    py = str(tmp_path / "venv" / "bin" / "python")
    cmd = deps.mypy_cmd()
    assert cmd[:3] == [py, "-m", "mypy"] and cmd[-1] == str(util.PACKAGE)
    assert cmd[cmd.index("--config-file") + 1].endswith("pyproject.toml")
    assert deps.pytest_cmd()[:3] == [py, "-m", "pytest"]
    assert deps.pytest_cmd()[-1] == str(util.repo_dir() / "tests")
