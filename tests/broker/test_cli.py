"""The `kgroup` command's tool subcommands reach the client CLI (kafka-topics.sh style)."""
import subprocess
import sys

from tests.conftest import ROOT


def kgroup(*args):
    return subprocess.run([sys.executable, "-m", "kgroup", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_topics_and_groups_commands(broker):
    r = kgroup("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "cli-t", "--partitions", "2")
    assert r.returncode == 0, r.stderr
    r = kgroup("topics", "--bootstrap-server", broker.bootstrap, "--list")
    assert r.returncode == 0 and "cli-t" in r.stdout.split()
    r = kgroup("groups", "--bootstrap-server", broker.bootstrap, "--list")
    assert r.returncode == 0, r.stderr
    r = kgroup("topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topic", "nope")
    assert r.returncode != 0


def test_dump_log_command(broker):
    import glob
    r = kgroup("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "dl")
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "kgroup", "produce", "--bootstrap-server", broker.bootstrap,
                        "--topic", "dl"], input="a\nb\n", cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    (seg,) = glob.glob(f"{broker.data_dir}/dl-0/*.log")
    r = kgroup("dump-log", seg)
    assert r.returncode == 0 and "baseOffset: 0" in r.stdout, r.stdout + r.stderr


def test_console_consume_reports_progress(broker):
    r = kgroup("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "prog")
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "kgroup", "produce", "--bootstrap-server", broker.bootstrap,
                        "--topic", "prog"], input="".join(f"m{i}\n" for i in range(50)), cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = kgroup("consume", "--bootstrap-server", broker.bootstrap, "--topic", "prog", "--from-beginning",
               "--timeout-ms", "1500", "--progress")
    assert r.returncode == 0 and r.stdout.split() == [f"m{i}" for i in range(50)]
    assert "consumed 50 records" in r.stderr and "Processed a total of 50 messages" in r.stderr
