"""Kernels for this machine: the packages a build made, to install."""

from schedlab.core import hostbuild as hb

REL = "7.3.4-schedlab-patched-01234567"


def test_the_packages_made_are_this_release_image_and_headers(tmp_path):
    bdir = tmp_path / "patched-host-x86_64"
    bdir.mkdir()
    for name in (f"linux-image-{REL}_7.3.4-1_amd64.deb", f"linux-headers-{REL}_7.3.4-1_amd64.deb",
                 "linux-libc-dev_7.3.4-1_amd64.deb", f"linux-image-{REL}-dbg_7.3.4-1_amd64.deb",
                 "linux-image-7.3.4-schedlab-patched-89abcdef_7.3.4-1_amd64.deb"):
        (tmp_path / name).write_text("")
    got = [p.name for p in hb.packages_made(bdir, REL, deb=True)]
    assert got == [f"linux-headers-{REL}_7.3.4-1_amd64.deb", f"linux-image-{REL}_7.3.4-1_amd64.deb"]
    rpms = bdir / "rpmbuild/RPMS/x86_64"
    rpms.mkdir(parents=True)
    v = REL.replace("-", "_")
    # kernel-headers (the uapi) would conflict with the distribution's
    for name in (f"kernel-{v}-1.x86_64.rpm", f"kernel-devel-{v}-1.x86_64.rpm",
                 f"kernel-headers-{v}-1.x86_64.rpm",
                 "kernel-7.3.4_schedlab_patched_89abcdef-1.x86_64.rpm"):
        (rpms / name).write_text("")
    assert [p.name for p in hb.packages_made(bdir, REL, deb=False)] == [
        f"kernel-{v}-1.x86_64.rpm", f"kernel-devel-{v}-1.x86_64.rpm"]


def test_a_rebuilt_release_installs_its_newest_revision_only(tmp_path):
    import os
    bdir = tmp_path / "b"
    bdir.mkdir()
    for n, rev in enumerate((2, 10)):       # 10 is the newer; by name it sorts first
        for pkg in ("image", "headers"):
            f = tmp_path / f"linux-{pkg}-{REL}_7.3.4-{rev}_amd64.deb"
            f.write_text("")
            os.utime(f, (1000 + n, 1000 + n))
    assert [p.name for p in hb.packages_made(bdir, REL, deb=True)] == [
        f"linux-headers-{REL}_7.3.4-10_amd64.deb", f"linux-image-{REL}_7.3.4-10_amd64.deb"]
