"""The one process runner: log, capture, timeout, and the whole group stopped."""

import os
import signal
import time

import pytest

from schedlab.core import procs, util
from schedlab.core.util import LabError


def _gone(pid: int, within: float = 5.0) -> bool:
    """Whether pid has ended (a zombie not yet reaped by init counts as ended)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_log_starts_with_the_command_and_capture(tmp_path):
    log = tmp_path / "x.log"
    lines = []
    done = procs.run_logged(["sh", "-c", "echo out; echo err >&2; exit 3"], log,
                            capture=True, on_line=lines.append)
    assert done.returncode == 3 and not done.timed_out
    assert sorted(done.output.splitlines()) == ["err", "out"]
    assert sorted(lines) == ["err\n", "out\n"]
    text = log.read_text()
    assert text.startswith("$ sh -c 'echo out; echo err >&2; exit 3'\n")
    assert "out\n" in text and "err\n" in text


def test_append_footer_cwd_env_input(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("earlier\n")
    done = procs.run_logged(["sh", "-c", "pwd; echo $V; cat"], log, cwd=tmp_path,
                            env=dict(os.environ, V="vee"), append=True, input="fed\n",
                            footer=True)
    assert done.returncode == 0
    assert log.read_text() == (f"earlier\n\n$ sh -c 'pwd; echo $V; cat'\n{tmp_path}\nvee\nfed\n"
                               "\n[exit 0]\n")


@pytest.mark.parametrize("capture", [False, True])
def test_timeout_stops_the_whole_group(tmp_path, capture):
    pidfile = tmp_path / "child.pid"
    log = tmp_path / "x.log"
    start = time.monotonic()
    done = procs.run_logged(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; echo up; wait"],
                            log, timeout=1, capture=capture, footer=True, grace=1)
    assert done.timed_out and time.monotonic() - start < 20
    assert _gone(int(pidfile.read_text()))
    assert log.read_text().endswith(", timed out]\n")
    if capture:
        assert done.output == "up\n"


def test_children_left_behind_are_stopped(tmp_path):
    pidfile = tmp_path / "child.pid"
    done = procs.run_logged(["sh", "-c", f"sleep 60 >/dev/null & echo $! > {pidfile}"],
                            tmp_path / "x.log", timeout=30)
    assert done.returncode == 0 and not done.timed_out
    assert _gone(int(pidfile.read_text()))


@pytest.mark.parametrize("capture", [False, True])
def test_ctrl_c_stops_the_group(tmp_path, capture):
    pidfile = tmp_path / "child.pid"

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            procs.run_logged(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"],
                             tmp_path / "x.log", timeout=30, capture=capture, grace=1)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert _gone(int(pidfile.read_text()))


def test_run_in_group_keeps_its_contract(tmp_path):
    log = tmp_path / "x.log"
    assert util.run_in_group(["sh", "-c", "echo hi; exit 4"], log, 30, "the thing") == 4
    assert log.read_text() == "$ sh -c 'echo hi; exit 4'\nhi\n"
    with pytest.raises(LabError, match=r"the thing did not finish within 1s.*log: "):
        util.run_in_group(["sleep", "30"], log, 1, "the thing")


def test_run_with_log_appends_and_checks(tmp_path):
    log = tmp_path / "x.log"
    assert util.run(["sh", "-c", "echo one"], log=log).returncode == 0
    assert util.run(["sh", "-c", "echo $X"], log=log, env={"X": "two"}).returncode == 0
    assert log.read_text() == "$ sh -c 'echo one'\none\n\n$ sh -c 'echo $X'\ntwo\n"
    with pytest.raises(LabError, match=r"status 1 \(log: "):
        util.run(["false"], log=log)


def test_run_captures_stdout_and_stderr_apart_without_a_log():
    done = procs.run(["sh", "-c", "echo out; echo err >&2; exit 2"], capture=True)
    assert (done.returncode, done.stdout, done.stderr) == (2, "out\n", "err\n")
    assert done.cmd == ["sh", "-c", "echo out; echo err >&2; exit 2"] and not done.timed_out


def test_run_check_raises_a_lab_error_with_the_stderr_tail(tmp_path):
    with pytest.raises(LabError, match=r"status 3: sh -c .*\nno good$"):
        procs.run(["sh", "-c", "echo no good >&2; exit 3"], capture=True, check=True)
    assert procs.run(["true"], check=True).returncode == 0
    with pytest.raises(LabError, match=r"status 1 \(log: .*x\.log\): false$"):
        procs.run(["false"], log=tmp_path / "x.log", check=True)


def test_run_input_env_cwd_without_a_log(tmp_path):
    done = procs.run(["sh", "-c", "pwd; echo $V; cat"], capture=True, cwd=tmp_path,
                     env=dict(os.environ, V="vee"), input="fed\n")
    assert done.stdout == f"{tmp_path}\nvee\nfed\n"


def test_run_timeout_stops_the_group_and_check_raises(tmp_path):
    pidfile = tmp_path / "child.pid"
    start = time.monotonic()
    with pytest.raises(LabError, match=r"the sleeper did not finish within 1s and was stopped$"):
        procs.run(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], timeout=1, grace=1,
                  check=True, what="the sleeper")
    assert time.monotonic() - start < 20
    assert _gone(int(pidfile.read_text()))
    done = procs.run(["sleep", "30"], timeout=0.5, grace=1)
    assert done.timed_out and done.returncode < 0


def test_util_run_adds_env_and_returns_stdout(monkeypatch):
    monkeypatch.setenv("SCHEDLAB_T1", "kept")
    proc = util.run(["sh", "-c", "echo $SCHEDLAB_T1 $SCHEDLAB_T2"], capture=True,
                    env={"SCHEDLAB_T2": "added"})
    assert proc.stdout == "kept added\n"
    with pytest.raises(LabError, match=r"command failed with status 1: false"):
        util.run(["false"])
    assert util.run(["false"], check=False).returncode == 1
