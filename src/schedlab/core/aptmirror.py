"""Find the Debian mirror this machine already uses, from its apt configuration.

The lab never writes a host name of its own: the Debian archive URI for the
base kernel package is taken from the machine's sources (one-line .list or
deb822 .sources files), and the private apt configuration that downloads
linux-source points at that same URI with another suite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, List, Optional

from schedlab.core.util import LabError, run

DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


@dataclass
class AptSource:
    types: List[str]
    uris: List[str]
    suites: List[str]
    components: List[str]
    signed_by: Optional[str] = None
    origin: str = ""
    enabled: bool = True
    options: dict = field(default_factory=dict)


def parse_one_line(text: str, origin: str = "") -> List[AptSource]:
    """Parse the classic 'deb [opts] uri suite comp...' format."""
    out = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"^(deb|deb-src)\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line)
        if not m:
            continue
        opts = {}
        for item in (m.group(2) or "").split():
            if "=" in item:
                k, v = item.split("=", 1)
                opts[k] = v
        out.append(AptSource(types=[m.group(1)], uris=[m.group(3)], suites=[m.group(4)],
                             components=m.group(5).split(),
                             signed_by=opts.get("signed-by"), origin=origin, options=opts))
    return out


def parse_deb822(text: str, origin: str = "") -> List[AptSource]:
    """Parse deb822 stanzas (Types:, URIs:, Suites:, Components:, Signed-By:)."""
    out = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict = {}
        key = None
        for raw in stanza.splitlines():
            if raw.startswith("#"):
                continue
            if raw[:1] in (" ", "\t") and key:
                fields[key] += "\n" + raw.strip()
                continue
            if ":" not in raw:
                continue
            key, value = raw.split(":", 1)
            key = key.strip().lower()
            fields[key] = value.strip()
        if "uris" not in fields or "types" not in fields:
            continue
        signed = fields.get("signed-by")
        if signed and "\n" in signed:
            signed = None  # an inline key block: not a path we can reuse
        out.append(AptSource(types=fields["types"].split(), uris=fields["uris"].split(),
                             suites=fields.get("suites", "").split(),
                             components=fields.get("components", "").split(),
                             signed_by=signed, origin=origin,
                             enabled=fields.get("enabled", "yes").lower() != "no"))
    return out


def apt_source_files(root: Path = Path("/")) -> List[Path]:
    etc = root / "etc/apt"
    files = []
    if (etc / "sources.list").is_file():
        files.append(etc / "sources.list")
    d = etc / "sources.list.d"
    if d.is_dir():
        files += sorted(p for p in d.iterdir() if p.suffix in (".list", ".sources"))
    return files


def read_sources(files: Iterable[Path]) -> List[AptSource]:
    out: List[AptSource] = []
    for f in files:
        text = f.read_text(errors="replace")
        if f.suffix == ".sources":
            out += parse_deb822(text, str(f))
        else:
            out += parse_one_line(text, str(f))
    return out


_DEBIAN_SUITE = re.compile(
    r"^(buster|bullseye|bookworm|trixie|forky|duke|sid|unstable|testing|stable|oldstable)"
    r"(-updates|-backports|-proposed-updates)?$")


def is_debian_archive(src: AptSource) -> bool:
    """A source of the main Debian archive (not security, not a third party)."""
    if not src.enabled or "deb" not in src.types:
        return False
    if not any(_DEBIAN_SUITE.match(s) for s in src.suites):
        return False
    return "main" in src.components


def derive_mirror(sources: Iterable[AptSource]) -> AptSource:
    """The first enabled source of the Debian archive; its URI is the mirror."""
    for src in sources:
        if is_debian_archive(src):
            return src
    raise LabError("no Debian archive source found in the apt configuration "
                   "(/etc/apt/sources.list, /etc/apt/sources.list.d/): the lab downloads "
                   "linux-source from the mirror this machine already uses; add a Debian "
                   "source or pass --kernel DIR with your own kernel tree")


def machine_mirror(root: Path = Path("/")) -> AptSource:
    return derive_mirror(read_sources(apt_source_files(root)))


def private_sources_line(src: AptSource, suite: str) -> str:
    keyring = src.signed_by or DEBIAN_KEYRING
    return f"deb [signed-by={keyring}] {src.uris[0].rstrip('/')} {suite} main\n"


def apt_options(apt_root: Path, arch: Optional[str] = None) -> List[str]:
    """apt-get/apt-cache options for a private configuration under apt_root.

    Nothing of the machine's own apt state is read or changed: sources, lists,
    status and archives all live under apt_root.  arch: the Debian architecture
    of the packages (default this machine's; ppc64el for the POWER guest).
    """
    arch = arch or run(["dpkg", "--print-architecture"], capture=True,
                       check=False).stdout.strip() or "amd64"
    return [
        "-o", f"Dir::Etc={apt_root}/etc",
        "-o", f"Dir::Etc::sourcelist={apt_root}/etc/sources.list",
        "-o", f"Dir::Etc::sourceparts={apt_root}/etc/sources.list.d",
        "-o", f"Dir::Etc::preferencesparts={apt_root}/etc/preferences.d",
        "-o", f"Dir::State={apt_root}/state",
        "-o", f"Dir::State::lists={apt_root}/lists",
        "-o", f"Dir::State::status={apt_root}/state/status",
        "-o", f"Dir::Cache={apt_root}/cache",
        "-o", f"APT::Architecture={arch}",
        "-o", "Acquire::Languages=none",
        "-o", "Debug::NoLocking=1",
    ]


def prepare_private_apt(apt_root: Path, src: AptSource, suite: str,
                        arch: Optional[str] = None) -> List[str]:
    for d in ("etc/sources.list.d", "etc/preferences.d", "etc/apt.conf.d", "lists/partial",
              "cache/archives/partial", "state"):
        (apt_root / d).mkdir(parents=True, exist_ok=True)
    (apt_root / "etc/sources.list").write_text(private_sources_line(src, suite))
    status = apt_root / "state/status"
    if not status.exists():
        status.write_text("")
    return apt_options(apt_root, arch)
