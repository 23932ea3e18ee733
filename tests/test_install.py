"""build --install: the kit's kernels installed, the default boot entry
kept unless --make-default, GRUB's and grubby's ways, from fixtures."""

from pathlib import Path

import pytest

from schedlab import cli
from schedlab.core.util import LabError
from schedlab.kit import distro
from schedlab.kit import install as inst

UUID = "0b1c"
OLD, NEW = "6.1.0-18-amd64", "7.3.4-schedlab-patched-01234567"


def _entry(release, indent=""):
    return (f"{indent}menuentry 'Debian GNU/Linux, with Linux {release}' --class debian "
            f"$menuentry_id_option 'gnulinux-{release}-advanced-{UUID}' {{\n"
            f"{indent}\tlinux\t/boot/vmlinuz-{release} root=UUID={UUID} ro quiet\n{indent}}}\n"
            f"{indent}menuentry 'Debian GNU/Linux, with Linux {release} (recovery mode)' "
            f"$menuentry_id_option 'gnulinux-{release}-recovery-{UUID}' {{\n"
            f"{indent}\tlinux\t/boot/vmlinuz-{release} root=UUID={UUID} ro single\n{indent}}}\n")


def grub_cfg(releases):
    """grub.cfg as Debian's update-grub writes it: the newest kernel first,
    the others in the Advanced submenu."""
    first = releases[0]
    return ("### BEGIN /etc/grub.d/10_linux ###\n"
            "function gfxmode {\n\tset gfxpayload=\"${1}\"\n}\n"
            f"menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option "
            f"'gnulinux-simple-{UUID}' {{\n\tlinux\t/boot/vmlinuz-{first} root=UUID={UUID}\n}}\n"
            f"submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option "
            f"'gnulinux-advanced-{UUID}' {{\n"
            + "".join(_entry(r, "\t") for r in releases) + "}\n"
            "menuentry 'UEFI Firmware Settings' $menuentry_id_option 'uefi-firmware' {\n"
            "\tfwsetup\n}\n")


def test_grub_cfg_entries_and_the_default():
    entries = inst.grub_entries(grub_cfg([OLD]))
    assert [(e.top, e.release) for e in entries][:2] == [(0, OLD), (1, OLD)]
    assert entries[-1].ids == ("uefi-firmware",) and entries[-1].top == 2
    mine = inst.grub_entry_of(entries, OLD)
    assert mine.path == f"gnulinux-advanced-{UUID}>gnulinux-{OLD}-advanced-{UUID}"
    assert inst.grub_entry_of(entries[::-1], OLD) == mine      # never the recovery one
    assert inst.grub_default_entry(entries, "0", "").release == OLD
    assert inst.grub_default_entry(entries, "saved", "").release == OLD     # none saved: 0
    assert inst.grub_default_entry(entries, "saved", mine.path) == mine
    by_title = "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux " + OLD
    assert inst.grub_default_entry(entries, by_title, "") == mine
    assert inst.grub_default_entry(entries, "1", "") is None    # a submenu boots nothing
    assert inst.grub_default_setting('GRUB_TIMEOUT=5\nGRUB_DEFAULT="saved"\n') == "saved"
    assert inst.grub_default_setting("") == "0"
    assert inst.grubenv_value("# GRUB env\nsaved_entry=a>b\n", "saved_entry") == "a>b"


class FakeDebian:
    """/boot and /etc of a Debian machine; dpkg -i runs update-grub (the
    new kernel sorts first), grub-set-default writes grubenv."""

    def __init__(self, root: Path, setting="saved", saved=""):
        self.root = root
        (root / "etc/default").mkdir(parents=True)
        (root / "boot/grub").mkdir(parents=True)
        (root / "etc/default/grub").write_text(f"GRUB_DEFAULT={setting}\n")
        (root / "boot/grub/grub.cfg").write_text(grub_cfg([OLD]))
        (root / "boot/grub/grubenv").write_text(f"# GRUB Environment Block\nsaved_entry={saved}\n")
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv[:2] == ["dpkg", "-i"]:
            (self.root / "boot/grub/grub.cfg").write_text(grub_cfg([NEW, OLD]))
        elif argv[0] == "grub-set-default":
            (self.root / "boot/grub/grubenv").write_text(f"saved_entry={argv[1]}\n")
        return 0, ""


DEBIAN = next(d for d in distro.DISTROS if d.name == "Debian")
FEDORA = next(d for d in distro.DISTROS if d.name == "Fedora")


@pytest.mark.parametrize("saved", ["", f"gnulinux-simple-{UUID}"])
def test_debian_pins_a_first_entry_default_before_installing(tmp_path, saved):
    # Nothing saved (entry 0) or the first entry's id: the entry follows the
    # newest kernel, which the new one would be. The old kernel is set by its
    # own entry first, so no hook after update-grub can move it.
    fake = FakeDebian(tmp_path, saved=saved)
    i = inst.Installer(DEBIAN, fake, tmp_path)
    files = [Path(f"/w/linux-image-{NEW}_1_amd64.deb"), Path(f"/w/linux-headers-{NEW}_1.deb")]
    once = i.install(files, NEW, make_default=False)
    old_entry = f"gnulinux-advanced-{UUID}>gnulinux-{OLD}-advanced-{UUID}"
    assert fake.calls == [["grub-set-default", old_entry], ["dpkg", "-i", *map(str, files)]]
    assert i.default().release == OLD
    assert once == (f"grub-reboot 'gnulinux-advanced-{UUID}>gnulinux-{NEW}-advanced-{UUID}' "
                    "&& reboot")


def test_debian_with_the_old_kernel_pinned_changes_nothing(tmp_path):
    fake = FakeDebian(tmp_path, saved=f"gnulinux-advanced-{UUID}>gnulinux-{OLD}-advanced-{UUID}")
    i = inst.Installer(DEBIAN, fake, tmp_path)
    i.install([Path("/w/linux-image.deb")], NEW, make_default=False)
    assert fake.calls == [["dpkg", "-i", "/w/linux-image.deb"]]
    assert i.default().release == OLD


def test_an_unreadable_default_installs_nothing(tmp_path):
    # saved_entry names the submenu: what grub boots is not known here
    fake = FakeDebian(tmp_path, saved=f"gnulinux-advanced-{UUID}")
    with pytest.raises(LabError, match="nothing installed"):
        inst.Installer(DEBIAN, fake, tmp_path).install([Path("/w/a.deb")], NEW, False)
    assert fake.calls == []


def test_debian_make_default(tmp_path):
    fake = FakeDebian(tmp_path)
    i = inst.Installer(DEBIAN, fake, tmp_path)
    i.install([Path("/w/linux-image.deb")], NEW, make_default=True)
    assert i.default().release == NEW
    assert ["grub-set-default", f"gnulinux-advanced-{UUID}>gnulinux-{NEW}-advanced-{UUID}"] \
        in fake.calls


def test_what_install_needs_is_refused_before_the_build(tmp_path, monkeypatch):
    monkeypatch.setattr(inst.os, "geteuid", lambda: 0)
    monkeypatch.setattr(inst.shutil, "which", lambda t: f"/usr/sbin/{t}")
    FakeDebian(tmp_path, setting="0")
    i = inst.Installer(DEBIAN, lambda a: (0, ""), tmp_path)
    why = i.refusal()
    assert "GRUB_DEFAULT=0" in why and "GRUB_DEFAULT=saved" in why and "update-grub" in why
    # grub.d's files come after /etc/default/grub; a comment is not a value
    (tmp_path / "etc/default/grub.d").mkdir()
    (tmp_path / "etc/default/grub.d/50-cloud.cfg").write_text("GRUB_DEFAULT=saved  # here\n")
    assert i.refusal() is None
    (tmp_path / "boot/grub/grub.cfg").write_text("")        # no entry: no default known
    assert "cannot tell which kernel boots" in i.refusal()
    monkeypatch.setattr(inst.shutil, "which", lambda t: None if t == "grub-reboot" else t)
    assert "grub-reboot not found" in i.refusal()
    monkeypatch.setattr(inst.os, "geteuid", lambda: 1000)
    assert "as root" in i.refusal()
    fake = FakeGrubby()
    fake.default = ""
    monkeypatch.setattr(inst.os, "geteuid", lambda: 0)
    monkeypatch.setattr(inst.shutil, "which", lambda t: t)
    assert "cannot tell" in inst.Installer(FEDORA, fake, tmp_path / "none").refusal()


def test_the_default_follows_grubs_rules():
    entries = inst.grub_entries(grub_cfg([NEW, OLD]))
    # a path of positions: submenu 1, its entry 2 (the old kernel's normal one)
    assert inst.grub_default_entry(entries, "saved", "1>2").release == OLD
    assert inst.grub_default_entry(entries, "1>0", "").release == NEW
    # a saved entry that is gone: grub boots the first
    assert inst.grub_default_entry(entries, "saved", "gnulinux-5.10-advanced-x").release == NEW
    ppc = grub_cfg([OLD]).replace("vmlinuz-", "vmlinux-")      # POWER's image
    assert inst.grub_entry_of(inst.grub_entries(ppc), OLD) is not None


def test_a_failed_install_puts_the_default_back(tmp_path):
    fake = FakeDebian(tmp_path, saved=f"gnulinux-advanced-{UUID}>gnulinux-{OLD}-advanced-{UUID}")

    def half(argv):     # update-grub ran, then a hook failed
        status, out = fake(argv)
        return (1, "run-parts: /etc/kernel/postinst.d/dkms exited with return code 1") \
            if argv[0] == "dpkg" else (status, out)
    i = inst.Installer(DEBIAN, half, tmp_path)
    with pytest.raises(LabError, match=f"the default boots {OLD}; .*dpkg --configure -a, "
                       f"or dpkg -r linux-image-{NEW}"):
        i.install([Path(f"/w/linux-image-{NEW}_1_amd64.deb")], NEW, False)
    assert i.default().release == OLD


def test_a_hook_that_fails_before_update_grub_leaves_no_trap(tmp_path):
    # The default was grub's first entry; dpkg fails before update-grub, and
    # the user's dpkg --configure -a runs it later: the old kernel stays.
    fake = FakeDebian(tmp_path)

    def early(argv):
        fake.calls.append(list(argv))
        if argv[0] == "grub-set-default":
            (tmp_path / "boot/grub/grubenv").write_text(f"saved_entry={argv[1]}\n")
        return (1, "dkms failed") if argv[0] == "dpkg" else (0, "")
    i = inst.Installer(DEBIAN, early, tmp_path)
    with pytest.raises(LabError, match="dkms failed"):
        i.install([Path(f"/w/linux-image-{NEW}_1_amd64.deb")], NEW, False)
    (tmp_path / "boot/grub/grub.cfg").write_text(grub_cfg([NEW, OLD]))     # update-grub, later
    assert i.default().release == OLD


class FakeGrubby:
    """Fedora: rpm -ivh's kernel-install makes the new kernel the default
    (UPDATEDEFAULT=yes); grubby reads and sets it."""

    def __init__(self):
        self.default = f"/boot/vmlinuz-{OLD}"
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv[:2] == ["rpm", "-ivh"]:
            self.default = f"/boot/vmlinuz-{NEW}"
        elif argv[:2] == ["grubby", "--default-kernel"]:
            return 0, self.default + "\n"
        elif argv[:2] == ["grubby", "--set-default"]:
            self.default = argv[2]
        elif argv[:2] == ["grubby", "--info"]:
            return 0, (f'index=3\nkernel="{argv[2]}"\ntitle="Fedora ({NEW})"\n'
                       f'id="0af1-{NEW}"\n')
        return 0, ""


def test_fedora_keeps_the_default_unless_asked():
    fake = FakeGrubby()
    i = inst.Installer(FEDORA, fake)
    rpms = [Path(f"/r/kernel-{NEW.replace('-', '_')}-1.x86_64.rpm")]
    assert i.install(rpms, NEW, make_default=False) == f"grub2-reboot 0af1-{NEW} && reboot"
    assert fake.default == f"/boot/vmlinuz-{OLD}"
    assert ["grubby", "--set-default", f"/boot/vmlinuz-{OLD}"] in fake.calls
    fake = FakeGrubby()
    inst.Installer(FEDORA, fake).install(rpms, NEW, make_default=True)
    assert fake.default == f"/boot/vmlinuz-{NEW}"


def test_a_failed_install_or_a_default_that_did_not_take_stops(tmp_path):
    def failing(argv):
        return (1, "dpkg: error processing archive") if argv[0] == "dpkg" else (0, "")
    FakeDebian(tmp_path, saved=f"gnulinux-advanced-{UUID}>gnulinux-{OLD}-advanced-{UUID}")
    with pytest.raises(LabError, match="dpkg -i .* failed"):
        inst.Installer(DEBIAN, failing, tmp_path).install([Path("/a.deb")], NEW, False)
    fake = FakeGrubby()
    stuck = lambda argv: (0, "") if argv[:2] == ["grubby", "--set-default"] else fake(argv)
    with pytest.raises(LabError, match=f"the default boots {NEW}, not {OLD}"):
        inst.Installer(FEDORA, stuck).install([Path("/k.rpm")], NEW, False)
    with pytest.raises(LabError, match="no packages"):
        inst.Installer(FEDORA, fake).install([], NEW, False)
    with pytest.raises(LabError, match="no entry of 9.9"):
        inst.Installer(DEBIAN, fake, tmp_path).boot_once("9.9")


@pytest.mark.parametrize("argv", [["build", "--install"], ["build", "--make-default"],
                                  ["build", "--host-config", "--make-default"],
                                  ["build", "--host-config", "--install", "--no-deb"],
                                  ["build", "--host-config", "--install", "--configure-only"]])
def test_install_options_are_refused_out_of_place(argv, monkeypatch, capsys):
    from schedlab.core.spec import TreeSpec
    monkeypatch.setattr(TreeSpec, "resolve", lambda self: pytest.fail("no tree before"))
    assert cli.main(argv) != 0
    assert "--install" in capsys.readouterr().err


def test_a_failed_rpm_that_moved_the_default_puts_it_back():
    # kernel-install made the new kernel the default, then a scriptlet failed
    fake = FakeGrubby()

    def failing(argv):
        status, out = fake(argv)
        return (1, "error: %post(kernel) scriptlet failed") if argv[0] == "rpm" \
            else (status, out)
    rpm = Path(f"/r/kernel-{NEW.replace('-', '_')}-1.x86_64.rpm")
    with pytest.raises(LabError, match=f"the default boots {OLD}; .*rpm -e "
                       f"kernel-{NEW.replace('-', '_')}-1.x86_64"):
        inst.Installer(FEDORA, failing).install([rpm], NEW, False)
    assert fake.default == f"/boot/vmlinuz-{OLD}"


def test_no_grub_defaults_file_is_grubs_default_zero(tmp_path, monkeypatch):
    monkeypatch.setattr(inst.os, "geteuid", lambda: 0)
    monkeypatch.setattr(inst.shutil, "which", lambda t: t)
    FakeDebian(tmp_path)
    (tmp_path / "etc/default/grub").unlink()
    assert "GRUB_DEFAULT=0" in inst.Installer(DEBIAN, lambda a: (0, ""), tmp_path).refusal()
