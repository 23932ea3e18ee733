"""Deriving the Debian mirror from the machine's own apt configuration."""

from pathlib import Path

import pytest

from schedlab.core import aptmirror
from schedlab.core.util import LabError

DEB822 = """\
Types: deb
# a comment
URIs: http://mirror.example.test/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example.test/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""

THIRD_PARTY = """\
Types: deb
URIs: https://thirdparty.example.test/node_20.x
Suites: nodistro
Components: main
Signed-By: /usr/share/keyrings/nodesource.gpg
"""


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_deb822_gives_main_archive_not_security(tmp_path):
    write(tmp_path, "etc/apt/sources.list.d/a-nodesource.sources", THIRD_PARTY)
    write(tmp_path, "etc/apt/sources.list.d/debian.sources", DEB822)
    src = aptmirror.machine_mirror(tmp_path)
    assert src.uris == ["http://mirror.example.test/debian"]
    assert src.signed_by.endswith("debian-archive-keyring.gpg")


def test_one_line_format_with_options(tmp_path):
    write(tmp_path, "etc/apt/sources.list",
          "# deb http://old.example.test/debian buster main\n"
          "deb http://sec.example.test/debian-security bookworm-security main\n"
          "deb [arch=amd64 signed-by=/k.gpg] http://one.example.test/debian trixie main contrib\n")
    src = aptmirror.machine_mirror(tmp_path)
    assert src.uris == ["http://one.example.test/debian"]
    assert src.signed_by == "/k.gpg"


def test_disabled_stanza_is_skipped(tmp_path):
    write(tmp_path, "etc/apt/sources.list.d/debian.sources",
          DEB822.replace("Types: deb\n# a comment", "Types: deb\nEnabled: no", 1)
          + "\nTypes: deb\nURIs: http://second.example.test/debian\nSuites: bookworm\n"
            "Components: main\n")
    assert aptmirror.machine_mirror(tmp_path).uris == ["http://second.example.test/debian"]


def test_no_debian_source_is_a_clear_error(tmp_path):
    write(tmp_path, "etc/apt/sources.list.d/node.sources", THIRD_PARTY)
    with pytest.raises(LabError, match="no Debian archive source"):
        aptmirror.machine_mirror(tmp_path)


def test_private_sources_line_uses_the_same_uri():
    src = aptmirror.AptSource(["deb"], ["http://m.example.test/debian/"], ["bookworm"], ["main"])
    line = aptmirror.private_sources_line(src, "trixie-backports")
    assert line == ("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                    "http://m.example.test/debian trixie-backports main\n")


def test_private_apt_options_touch_nothing_of_the_machine(tmp_path):
    src = aptmirror.AptSource(["deb"], ["http://m.example.test/debian"], ["bookworm"], ["main"])
    opts = aptmirror.prepare_private_apt(tmp_path, src, "trixie-backports")
    values = [o.split("=", 1)[1] for o in opts if o.startswith("Dir::")]
    assert values and all(v.startswith(str(tmp_path)) for v in values)
    assert "trixie-backports" in (tmp_path / "etc/sources.list").read_text()
