"""The Debian source package's unpacking pipeline (no download)."""

import io
import os
import tarfile

from schedlab.core import procs, source


def _tar(members, mode="w"):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _run(tmp_path, dpkg_deb: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "dpkg-deb"
    fake.write_text(dpkg_deb)
    fake.chmod(0o755)
    inner = _tar([("linux-source-7.3/Makefile", b"VERSION = 7\n")], "w:xz")
    deb = tmp_path / "x.deb"
    deb.write_bytes(_tar([(f"./usr/src/{source.DEBIAN_PACKAGE}.tar.xz", inner)]))
    dest = tmp_path / "out"
    dest.mkdir(exist_ok=True)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    return procs.run(["bash", "-c", source.UNPACK_PIPELINE, "bash", str(deb),
                      f"./usr/src/{source.DEBIAN_PACKAGE}.tar.xz", str(dest)],
                     capture=True, env=env), dest


def test_unpack_pipeline_extracts_the_inner_tarball(tmp_path):
    done, dest = _run(tmp_path, '#!/bin/sh\n[ "$1" = --fsys-tarfile ] && exec cat "$2"\n')
    assert done.returncode == 0, done.stderr
    assert (dest / "Makefile").read_text() == "VERSION = 7\n"


def test_unpack_pipeline_fails_when_dpkg_deb_fails(tmp_path):
    done, _dest = _run(tmp_path, '#!/bin/sh\ncat "$2"\necho broken >&2\nexit 2\n')
    assert done.returncode != 0 and "broken" in done.stderr


def test_the_content_id_follows_the_files_not_the_commit(tmp_path):
    import subprocess

    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c",
                               "user.email=t@t", *args], check=True, capture_output=True,
                              text=True).stdout.strip()
    git("init", "-q")
    (tmp_path / "fair.c").write_text("int x;\n")
    git("add", "fair.c")
    git("commit", "-q", "-m", "one")
    first = git("rev-parse", "HEAD")
    git("commit", "-q", "--allow-empty", "-m", "the same files, applied again")
    again = git("rev-parse", "HEAD")
    (tmp_path / "fair.c").write_text("int y;\n")
    git("commit", "-q", "-am", "a changed series")
    changed = git("rev-parse", "HEAD")
    tree = source.Tree("t", tmp_path, first, "test")
    assert first != again
    assert tree.content_id(first) == tree.content_id(again) != tree.content_id(changed)
