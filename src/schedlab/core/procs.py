"""The one way the lab runs a child process: builds, VMs, KUnit, git, apt, tools.

Detail: docs/modules.md, section core/procs.py.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, List, Mapping, Optional, Sequence, Union

from schedlab.core.errors import LabError


def fmt_secs(secs: float) -> str:
    secs = int(round(secs))
    if secs < 60:
        return f"{secs}s"
    return f"{secs // 60}m{secs % 60:02d}s"


@dataclass
class Finished:
    """How a child ended."""

    returncode: int        # the child's status (negative: the signal that stopped it)
    timed_out: bool
    seconds: float
    output: str = ""       # captured (capture or on_line): its output (no log: stdout only)
    stderr: str = ""       # with capture=True and no log: its stderr
    cmd: List[str] = field(default_factory=list)

    @property
    def stdout(self) -> str:
        """The captured output (the name subprocess.CompletedProcess gives it)."""
        return self.output


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


def _pump(stream: IO[str], sinks: List[Callable[[str], object]]) -> threading.Thread:
    def pump() -> None:
        for line in stream:
            for sink in sinks:
                sink(line)
    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    return reader


def run(cmd: Sequence[str], *, log: Optional[Path] = None, append: bool = False,
        capture: bool = False, check: bool = False, timeout_error: bool = False,
        what: str = "", timeout: Optional[float] = None, cwd: Optional[Path] = None,
        env: Optional[Mapping[str, str]] = None, input: Optional[str] = None,
        on_line: Optional[Callable[[str], None]] = None, footer: bool = False,
        grace: float = 5.0) -> Finished:
    """Run cmd in a new session; the whole group is stopped on every way out
    (grace seconds between SIGTERM and SIGKILL).

    log: the output (stdout and stderr) goes to that file after '$ COMMAND'
    (append=True: appended after a blank line, else the file is started
    afresh); footer=True ends it with '[exit N]' or '[exit N, timed out]'.
    capture=True also returns the output (without a log: stdout in output,
    stderr apart); on_line is called with each line as it comes.  Without a
    log or capture the output is the lab's own.  input: written to stdin
    (else stdin is /dev/null).  env is the whole environment (None: this
    process's).  A timeout stops the group and says so in Finished.timed_out;
    it is a LabError ('WHAT did not finish within ...') with check=True or
    timeout_error=True.  check=True: a status other than 0 is a LabError too.
    """
    cmd = [str(c) for c in cmd]
    start = time.monotonic()
    piped = capture or on_line is not None
    chunks: List[str] = []
    errs: List[str] = []
    timed_out = False
    with ExitStack() as stack:
        f: Optional[IO[str]] = None
        if log is not None:
            f = stack.enter_context(open(log, "a" if append else "w", errors="replace"))
            if append and f.tell() > 0:
                f.write("\n")
            f.write(f"$ {shlex.join(cmd)}\n")
            f.flush()
        out_sinks: List[Callable[[str], object]] = []
        if f is not None:
            out_sinks.append(f.write)
        if piped:
            out_sinks.append(chunks.append)
        if on_line is not None:
            out_sinks.append(on_line)
        stdout: Union[int, IO[str], None] = subprocess.PIPE if piped else f
        stderr: Optional[int] = subprocess.STDOUT if f is not None else (
            subprocess.PIPE if capture else None)
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
            stdout=stdout, stderr=stderr,
            text=True, errors="replace", start_new_session=True)
        readers = []
        if piped:
            assert proc.stdout is not None
            readers.append(_pump(proc.stdout, out_sinks))
        if proc.stderr is not None:
            readers.append(_pump(proc.stderr, [errs.append]))
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
            for reader in readers:
                reader.join(timeout=10)
        if f is not None and footer:
            f.write(f"\n[exit {proc.returncode}{', timed out' if timed_out else ''}]\n")
    done = Finished(proc.returncode, timed_out, time.monotonic() - start, "".join(chunks),
                    "".join(errs), cmd)
    where = f" (log: {log})" if log is not None else ""
    if timed_out and (check or timeout_error):
        raise LabError(f"{what or shlex.join(cmd)} did not finish within "
                       f"{fmt_secs(timeout or 0)} and was stopped{where}")
    if check and done.returncode != 0:
        detail = "\n" + done.stderr.strip()[-2000:] if done.stderr.strip() else ""
        raise LabError(f"command failed with status {done.returncode}{where}: "
                       f"{shlex.join(cmd)}{detail}")
    return done


def run_logged(cmd: Sequence[str], log: Path, *, timeout: Optional[float] = None,
               cwd: Optional[Path] = None, env: Optional[Mapping[str, str]] = None,
               append: bool = False, capture: bool = False,
               on_line: Optional[Callable[[str], None]] = None,
               input: Optional[str] = None, footer: bool = False,
               grace: float = 5.0) -> Finished:
    """run() with a log and nothing raised: the child's status, whether it
    timed out, its output with capture=True."""
    return run(cmd, log=log, timeout=timeout, cwd=cwd, env=env, append=append, capture=capture,
               on_line=on_line, input=input, footer=footer, grace=grace)

