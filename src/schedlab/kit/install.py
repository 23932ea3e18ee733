"""`build --host-config --install`: the kit's kernels installed the
distribution's way, the default boot entry kept as it was unless
--make-default, and the command that boots the new kernel once.

Detail: docs/modules.md, section kit/install.py.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from schedlab.core.util import LabError, say
from schedlab.kit import distro as distromod

GRUB_DEFAULTS = Path("/etc/default/grub")
GRUB_CFG = Path("/boot/grub/grub.cfg")
GRUB_ENV = Path("/boot/grub/grubenv")

# A command's status and output: its stdout, with its stderr where it
# failed (stubbed in the tests).
Runner = Callable[[Sequence[str]], Tuple[int, str]]
# The package managers run the distribution's hooks (DKMS, dracut): no
# time limit, or a hook would be cut off mid-install.
NO_LIMIT = ("dpkg", "rpm")


def _run(argv: Sequence[str]) -> Tuple[int, str]:
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, check=False,
                           timeout=None if argv[0] in NO_LIMIT else 600)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, str(e)
    return p.returncode, p.stdout + (p.stderr if p.returncode else "")


# ------------------------------------------------------------------ GRUB

@dataclass(frozen=True)
class GrubEntry:
    ids: Tuple[str, ...]        # the submenus' ids and the entry's, outermost first
    titles: Tuple[str, ...]
    top: int                    # the index of its top-level item
    release: str                # the kernel it boots ("" for none)

    @property
    def path(self) -> str:
        """What grub-set-default and grub-reboot take: ids joined by '>'."""
        return ">".join(self.ids)


_ITEM = re.compile(r"^\s*(menuentry|submenu)\s+(['\"])(.*?)\2(.*)\{\s*$")
_ID = re.compile(r"\$menuentry_id_option\s+'([^']*)'")
_LINUX = re.compile(r"^\s*linux(?:16|efi)?\s+\S*vmlinu[xz]-(\S+)")


def grub_entries(cfg: str) -> List[GrubEntry]:
    """The boot entries of a grub.cfg as update-grub writes it."""
    out: List[GrubEntry] = []
    stack: List[Tuple[str, str, str]] = []     # (kind, id, title) of the open blocks
    top, release, depth = -1, "", 0
    for line in cfg.splitlines():
        m = _ITEM.match(line)
        if m:
            if depth == 0:
                top += 1
            ident = _ID.search(m.group(4))
            stack.append((m.group(1), ident.group(1) if ident else m.group(3), m.group(3)))
            depth += 1
            release = ""
            continue
        lm = _LINUX.match(line)
        if lm and stack:
            release = lm.group(1)
        if re.match(r"^\s*\}\s*$", line) and depth:
            kind, _, _ = stack[-1]
            if kind == "menuentry":
                out.append(GrubEntry(tuple(s[1] for s in stack), tuple(s[2] for s in stack),
                                     top, release))
            stack.pop()
            depth -= 1
    return out


def grub_default_setting(text: str) -> str:
    """GRUB_DEFAULT of /etc/default/grub and its grub.d/*.cfg, in the order
    grub-mkconfig reads them (grub's own default: 0)."""
    value = "0"
    for line in text.splitlines():
        m = re.match(r"^\s*(?:export\s+)?GRUB_DEFAULT=(.*)$", line)
        if m:
            try:
                value = " ".join(shlex.split(m.group(1), comments=True))
            except ValueError:      # unbalanced quotes: not a value the kit can trust
                value = m.group(1).strip()
    return value


def grubenv_value(text: str, key: str) -> str:
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep and k == key:
            return v
    return ""


def grub_default_entry(entries: Sequence[GrubEntry], setting: str,
                       saved: str) -> Optional[GrubEntry]:
    """The entry grub boots by default: SETTING (GRUB_DEFAULT), SAVED
    (grubenv's saved_entry where SETTING is 'saved'); each part of an
    'A>B' path matched by id or title, a number by position."""
    want = (saved or "0") if setting == "saved" else setting
    parts = want.split(">")
    found = _entry_at(entries, parts)
    submenu = any(_entry_at([GrubEntry(e.ids[:len(parts)], e.titles[:len(parts)], e.top, "")],
                            parts) for e in entries if len(e.ids) > len(parts))
    if found is not None or submenu or want == "0":
        return found        # a submenu: what grub does with it is not known here
    return _entry_at(entries, ["0"])    # grub boots its first entry where none is named


def _entry_at(entries: Sequence[GrubEntry], parts: Sequence[str]) -> Optional[GrubEntry]:
    """The entry at PARTS, each an id, a title or a position in its menu."""
    for e in entries:
        if len(e.ids) != len(parts):
            continue
        if all(p in (i, t) or (p.isdigit() and _position(entries, e, level) == int(p))
               for level, (p, i, t) in enumerate(zip(parts, e.ids, e.titles))):
            return e
    return None


def _position(entries: Sequence[GrubEntry], e: GrubEntry, level: int) -> int:
    """E's position among the items of its menu at LEVEL (0: the top one)."""
    if level == 0:
        return e.top
    menu = e.ids[:level]
    items: List[Tuple[str, ...]] = []
    for other in entries:
        if other.ids[:level] == menu and len(other.ids) > level:
            item = other.ids[:level + 1]
            if item not in items:
                items.append(item)
    return items.index(e.ids[:level + 1])


def grub_entry_of(entries: Sequence[GrubEntry], release: str) -> Optional[GrubEntry]:
    """The entry that boots RELEASE normally: the one named by its version
    (the submenu's), not a recovery one."""
    found = [e for e in entries if e.release == release and "recovery" not in e.path]
    found.sort(key=lambda e: -len(e.ids))
    return found[0] if found else None


# ------------------------------------------------------------------ plans

@dataclass(frozen=True)
class BootState:
    """What boots by default, as the boot tool names it."""
    release: str
    entry: str          # grub's id path, or grubby's kernel path


@dataclass
class Installer:
    """Install and keep (or set) the default, on one distribution."""
    d: distromod.Distro
    run: Runner = _run
    root: Path = Path("/")

    def refusal(self) -> Optional[str]:
        """Why --install cannot run here, before anything is built."""
        if os.geteuid() != 0:
            return "it installs packages and sets boot entries: run it as root"
        packer = "dpkg-deb" if self.d.kernel_target == "bindeb-pkg" else "rpmbuild"
        tools = [packer] + (["grubby"] if self.d.boot_tool == "grubby"
                            else ["update-grub", "grub-set-default", "grub-reboot"])
        absent = [t for t in tools if not shutil.which(t)]
        if absent:
            return (f"{', '.join(absent)} not found: {self.d.name} packages the kernel with "
                    f"{self.d.kernel_target} and sets boot entries with {self.d.boot_tool}")
        setting = self._grub_setting()
        if setting is None and self.d.boot_tool == "grub":
            setting = "0"       # grub-mkconfig's own default
        if setting is not None and setting != "saved":
            return (f"GRUB_DEFAULT={setting or '(empty)'} in {GRUB_DEFAULTS}: grub boots an "
                    "entry by position, which a new kernel can take, and grub-reboot cannot "
                    "boot a kernel once; set GRUB_DEFAULT=saved there, run "
                    + ("grub2-mkconfig -o /boot/grub2/grub.cfg" if self.d.boot_tool == "grubby"
                       else "update-grub") + ", then install again")
        now = self.default()
        if not now.release:
            return (f"cannot tell which kernel boots by default (read: "
                    f"{now.entry or 'no default entry'}); set it with "
                    + ("grubby --set-default" if self.d.boot_tool == "grubby"
                       else "grub-set-default") + " first")
        return None

    def _grub_setting(self) -> Optional[str]:
        """GRUB_DEFAULT, from /etc/default/grub and grub.d/*.cfg; None without them."""
        files = [GRUB_DEFAULTS] + sorted(
            Path("/") / p.relative_to(self.root)
            for p in (self.root / "etc/default/grub.d").glob("*.cfg"))
        texts = [self._read(f) for f in files if (self.root / f.relative_to("/")).is_file()]
        return grub_default_setting("\n".join(texts)) if texts else None

    def _read(self, path: Path) -> str:
        try:
            return (self.root / path.relative_to("/")).read_text(errors="replace")
        except OSError:
            return ""

    def _grub(self) -> Tuple[List[GrubEntry], Optional[GrubEntry]]:
        entries = grub_entries(self._read(GRUB_CFG))
        return entries, grub_default_entry(entries, self._grub_setting() or "0",
                                           grubenv_value(self._read(GRUB_ENV), "saved_entry"))

    def default(self) -> BootState:
        if self.d.boot_tool == "grubby":
            status, out = self.run(["grubby", "--default-kernel"])
            path = out.strip().splitlines()[-1] if out.strip() and status == 0 else ""
            m = re.search(r"vmlinu[xz]-(\S+)$", path)
            return BootState(m.group(1) if m else "", path or f"grubby status {status}")
        entries, entry = self._grub()
        if entry is None:
            return BootState("", f"{GRUB_CFG}: {len(entries)} entries, none the default")
        return BootState(entry.release, entry.path)

    def _must(self, argv: Sequence[str]) -> None:
        say(f"  # {shlex.join(argv)}")
        status, out = self.run(argv)
        if status != 0:
            raise LabError(f"{shlex.join(argv)} failed (status {status}): "
                           + " ".join(out.strip().splitlines()[-3:]))

    def set_default(self, release: str) -> None:
        if self.d.boot_tool == "grubby":
            self._must(["grubby", "--set-default", f"/boot/vmlinuz-{release}"])
            return
        entry = grub_entry_of(self._grub()[0], release)
        if entry is None:
            raise LabError(f"no entry of {release} in {GRUB_CFG}")
        self._must(["grub-set-default", entry.path])

    def boot_once(self, release: str) -> str:
        """The command that boots RELEASE once."""
        if self.d.boot_tool == "grubby":
            _, out = self.run(["grubby", "--info", f"/boot/vmlinuz-{release}"])
            info = dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln)
            ident = (info.get("id") or info.get("index") or "").strip('"')
            if not ident:
                raise LabError(f"grubby --info /boot/vmlinuz-{release} names no entry")
            return f"grub2-reboot {shlex.quote(ident)} && reboot"
        entry = grub_entry_of(self._grub()[0], release)
        if entry is None:
            raise LabError(f"{GRUB_CFG} has no entry of {release}")
        return f"grub-reboot {shlex.quote(entry.path)} && reboot"

    def install(self, files: Sequence[Path], release: str, make_default: bool) -> str:
        """Install FILES (the packages of RELEASE), keep or set the default;
        returns the command that boots RELEASE once."""
        if not files:
            raise LabError("build --install: the build made no packages to install")
        before = self.default()
        if not before.release:
            raise LabError(f"cannot tell which kernel boots by default ({before.entry}): "
                           "nothing installed")
        if self.d.boot_tool == "grub" and ">" not in before.entry:
            # grub's first entry follows the newest kernel, which the new one
            # would be: the same kernel by its own entry, before anything runs
            say(f"  the default is grub's first entry ({before.entry}), which follows the "
                f"newest kernel: {before.release} by its own entry from now on")
            self.set_default(before.release)
        try:
            self._must(shlex.split(self.d.install_kernel.format(packages=" ".join(
                shlex.quote(str(f)) for f in files))))
        except LabError as e:
            try:
                self._keep(before)
            except LabError as again:
                raise LabError(f"{e}; and the default could not be set back: {again}") \
                    from None
            raise LabError(f"{e}; the default boots {self.default().release}; to finish "
                           f"the install or undo it: {self._undo(files)}") from None
        if make_default:
            self.set_default(release)
        else:
            self._keep(before)
        now = self.default()
        want = release if make_default else before.release
        if now.release != want:
            raise LabError(f"the default boots {now.release or now.entry}, not {want}")
        say(f"  installed {release}; the default boots {now.release}"
            + (" (--make-default)" if make_default else ", as before"))
        return self.boot_once(release)

    def _undo(self, files: Sequence[Path]) -> str:
        if self.d.kernel_target == "bindeb-pkg":
            names = " ".join(f.name.split("_")[0] for f in files)
            return f"dpkg --configure -a, or dpkg -r {names}"
        return "rpm -e " + " ".join(f.name[:-len(".rpm")] for f in files)

    def _keep(self, before: BootState) -> None:
        """The default BEFORE again where installing changed it."""
        after = self.default()
        if after.release == before.release:
            return
        say(f"  installing made {after.release or after.entry} the default: "
            f"{before.release} again")
        self.set_default(before.release)
