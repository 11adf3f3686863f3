"""A data directory the broker cannot use at start-up (a file, an unwritable or read-only place)
ends in one line naming the path and the reason, and a non-zero exit: never a traceback, never a
broker that starts and fails on its first write."""
import contextlib
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def serve(data_dir):
    return subprocess.run([sys.executable, "-m", "kgroup", "serve",
                           "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                           "--override", f"log.dirs={data_dir}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def assert_refused(r, path, reason):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1, r.stderr
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"kgroup: cannot use log.dirs {path}: "), lines[0]
    assert reason in lines[0], lines[0]


def test_a_regular_file_as_data_directory(tmp_path):
    f = tmp_path / "not-a-dir"
    f.write_text("x")
    assert_refused(serve(f), f, "Not a directory")
    assert f.read_text() == "x"


def test_a_data_directory_below_a_regular_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    assert_refused(serve(f / "data"), f / "data", "Not a directory")


def test_a_data_directory_that_cannot_be_created():
    # sysfs refuses new directories to everyone, root included
    assert_refused(serve("/sys/kernel/kgroup-data"), "/sys/kernel/kgroup-data", "not permitted")


@contextlib.contextmanager
def read_only_mount(tmp_path):
    """A read-only tmpfs (root, as in CI: the tests run as root) or, for other users, a
    directory without write permission: both refuse the broker's writes."""
    where = tmp_path / "ro"
    where.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(where)], check=True)
        try:
            yield where, "Read-only file system"
        finally:
            subprocess.run(["umount", str(where)], check=True)
    else:
        where.chmod(0o555)
        try:
            yield where, "Permission denied"
        finally:
            where.chmod(0o755)


@pytest.mark.parametrize("below", [False, True], ids=["the-directory-itself", "a-new-directory-inside"])
def test_a_read_only_data_directory(tmp_path, below):
    with read_only_mount(tmp_path) as (where, reason):
        path = where / "data" if below else where
        assert_refused(serve(path), path, reason)
        assert os.listdir(where) == []
