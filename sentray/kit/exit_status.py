"""How a command ends when it did not succeed: one `error: ...` line on stderr and an exit status
that says which of two things happened (`command_error`, used by `sentray.cli`):

- 2, bad input: a flag, a `--config` file, the input, a model or an output folder the job
  refuses. Every check in sentray raises ValueError or FileNotFoundError naming the bad value
  and the fix (the developers' guide), so those two kinds are bad input wherever a job raises
  them (an unknown model is a FileNotFoundError);
- 1, a failed job: anything else (storage that failed under it, a worker lost past its retries,
  a bug).

Ctrl-C ends a command with 130 (`INTERRUPTED_STATUS`). A job's process ends through
`exit_process`, its work written.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from sentray.kit.storage import StorageError

BAD_INPUT = (ValueError, FileNotFoundError)  # what a check raises: exit status 2
BAD_INPUT_STATUS, FAILED_STATUS, INTERRUPTED_STATUS = 2, 1, 130


class CommandError(SystemExit):
    """The end of a command that did not succeed: its one `error: ...` line (the exception's
    `code`, what a Python caller of `Job.main` reads) and its exit status (`status`: 2 bad input,
    1 a failed job), both decided by `command_error`. `command` prints the line and exits with
    the status."""

    def __init__(self, line: str, status: int) -> None:
        super().__init__(line)
        self.status = status


def one_line(message: str) -> str:
    """`message` as one line: a message that lists what differs on indented lines reads as
    `...: a != b; c != d; the fix`."""
    parts = [part.strip() for part in str(message).splitlines() if part.strip()]
    text = parts[0] if parts else ""
    for part in parts[1:]:
        text += (" " if text.endswith(":") else "; ") + part
    return text


def command_error(exc: BaseException) -> CommandError:
    """What `exc` means for the command that raised it (the module docstring): bad input (a
    ValueError or FileNotFoundError: its message alone names the problem), or a failed job (any
    other exception: its type too, and only its first line, which a Ray task's error follows
    with a remote traceback)."""
    if isinstance(exc, CommandError):
        return exc
    if isinstance(exc, BAD_INPUT):
        return CommandError(f"error: {one_line(str(exc))}", BAD_INPUT_STATUS)
    if isinstance(exc, StorageError):  # its message says what failed and what a rerun does
        return CommandError(f"error: {one_line(str(exc))}", FAILED_STATUS)
    first = (str(exc).strip().splitlines() or [""])[0]
    return CommandError(f"error: {type(exc).__name__}: {first}".rstrip(": "), FAILED_STATUS)


def exit_process(status: int) -> NoReturn:
    """End a job's process with `status` once its work is done and written: the exit handlers
    run (Ray's shutdown, logging's flush), stdout and stderr are flushed, and the interpreter's
    teardown of its modules is skipped: with transformers' model code loaded (torch._dynamo,
    sympy) that teardown took ~1 s of a 10,000-row job on this project's 2-core EPYC, after its
    last file was written. A process with other threads still running exits the usual way,
    which waits for them."""
    import atexit
    import threading

    if threading.active_count() > 1:
        raise SystemExit(status)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
