"""Setup: missing packages are named; without root nothing is installed."""

import pytest

from schedlab import deps
from schedlab.util import LabError


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
    assert any(p.startswith("virtme-ng") for p in deps.PYPI_PACKAGES)
