"""The one way the lab runs a child process: builds, VMs, KUnit and host runs.

Every child runs in a session (and process group) of its own, with its
output in a log that starts with the command line.  The whole group is
stopped when the child is done, when the timeout passes, on Ctrl-C and on
any other exception, so no make job, qemu or workload outlives the command
that started it.  Only the standard library is used.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Mapping, Optional, Sequence


@dataclass
class Finished:
    """How a child ended."""

    returncode: int        # the child's status (negative: the signal that stopped it)
    timed_out: bool
    seconds: float
    output: str = ""       # the whole output, with capture=True


def kill_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """Stop a process started with start_new_session=True, and its children:
    SIGTERM to the group, SIGKILL after grace seconds."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def kill_stragglers(pgid: int) -> None:
    """SIGKILL whatever is left in a group whose leader has ended."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_logged(cmd: Sequence[str], log: Path, *, timeout: Optional[float] = None,
               cwd: Optional[Path] = None, env: Optional[Mapping[str, str]] = None,
               append: bool = False, capture: bool = False,
               on_line: Optional[Callable[[str], None]] = None,
               input: Optional[str] = None, footer: bool = False,
               grace: float = 5.0) -> Finished:
    """Run cmd in a new session with its output (stdout and stderr) in log.

    log gets '$ COMMAND' first (append=True: appended after a blank line, else
    the file is started afresh).  capture=True also returns the output;
    on_line is called with each line as it comes.  env is the whole
    environment (None: this process's).  footer=True ends the log with
    '[exit N]' or '[exit N, timed out]'.  A timeout is not an error here:
    the group is stopped and Finished.timed_out says so.  The group is
    stopped on every way out (grace seconds between SIGTERM and SIGKILL).
    """
    cmd = [str(c) for c in cmd]
    start = time.monotonic()
    piped = capture or on_line is not None
    chunks: List[str] = []
    timed_out = False
    with open(log, "a" if append else "w", errors="replace") as f:
        if append and f.tell() > 0:
            f.write("\n")
        f.write(f"$ {shlex.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
            stdout=subprocess.PIPE if piped else f, stderr=subprocess.STDOUT,
            text=True, errors="replace", start_new_session=True)
        reader = None
        if piped:
            def pump() -> None:
                assert proc.stdout is not None
                for line in proc.stdout:
                    f.write(line)
                    chunks.append(line)
                    if on_line is not None:
                        on_line(line)
            reader = threading.Thread(target=pump, daemon=True)
            reader.start()
        try:
            if input is not None:
                assert proc.stdin is not None
                try:
                    proc.stdin.write(input)
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
        finally:
            kill_group(proc, grace)       # also on Ctrl-C and any other exception
            kill_stragglers(proc.pid)
            if reader is not None:
                reader.join(timeout=10)
        if footer:
            f.write(f"\n[exit {proc.returncode}{', timed out' if timed_out else ''}]\n")
    return Finished(proc.returncode, timed_out, time.monotonic() - start, "".join(chunks))
