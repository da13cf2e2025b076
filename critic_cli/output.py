"""Where reports go (stdout, or a file written atomically) and progress (stderr, when a tty)."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import IO, Any

from critic_cli.errors import UsageError

_UMASK: int | None = None


def _new_file_mode(path: str) -> int:
    """Return the mode ``path`` should get: an existing file's own, else what the umask gives."""
    global _UMASK
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        pass
    if _UMASK is None:
        _UMASK = os.umask(0)
        os.umask(_UMASK)
    return 0o666 & ~_UMASK


def temporary_beside(path: str, *, binary: bool = False) -> tuple[IO[Any], str]:
    """Open a temporary file beside ``path`` (to be renamed onto it) with the mode it will need.

    mkstemp makes files 0600; a report or a cache entry should read like any file written here.
    """
    import tempfile

    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".critic-", suffix=".part")
    if hasattr(os, "fchmod"):
        os.fchmod(handle, _new_file_mode(path))
    if binary:
        return os.fdopen(handle, "wb", buffering=1 << 20), temporary
    return os.fdopen(handle, "w", encoding="utf-8"), temporary


class Sink:
    """Write text to stdout as it comes, or to a temporary file renamed into place at the end."""

    def __init__(self, path: str | None, *, flush_each: bool = True) -> None:
        if path == "":
            raise UsageError("--output: the file name is empty")
        self.path = None if path in (None, "-") else path
        self.flush_each = flush_each
        self._temporary: str | None = None
        self._stream: IO[str] = sys.stdout
        self._special = False

    def __enter__(self) -> Sink:
        if self.path is not None and os.path.exists(self.path) and not os.path.isfile(
                self.path):
            if os.path.isdir(self.path):
                raise UsageError(f"--output {self.path}: is a directory")
            # A device or a pipe (/dev/null, a FIFO) is written in place, never replaced.
            self._stream = open(self.path, "w", encoding="utf-8")  # noqa: SIM115
            self._special = True
        elif self.path is not None:
            folder = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(folder):
                raise UsageError(f"--output {self.path}: no such directory {folder}")
            with self._failing():
                self._stream, self._temporary = temporary_beside(self.path)
        return self

    @contextlib.contextmanager
    def _failing(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            if self.path is None:
                raise  # stdout: a closed pipe is the CLI's to handle
            self._discard()
            raise UsageError(f"--output {self.path}: cannot write: {exc.strerror or exc}"
                             ) from None

    def _discard(self) -> None:
        with contextlib.suppress(OSError):
            self._stream.close()
        if self._temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._temporary)
            self._temporary = None

    def write(self, text: str) -> None:
        """Write ``text``; flush it too when records come slowly (a model is asked)."""
        if text:
            with self._failing():
                self._stream.write(text)
                if self.flush_each:
                    self._stream.flush()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._special:
            with self._failing():
                self._stream.close()
        if self._temporary is None:
            return
        if kind is not None:
            self._discard()
            return
        with self._failing():
            self._stream.close()
            os.replace(self._temporary, self.path or "")


@contextlib.contextmanager
def progress(show: bool, total: int | None = None) -> Iterator[Callable[[str], None]]:
    """Yield a function that counts one finished draft by its verdict (a bar when ``show``)."""
    if not show:
        yield lambda verdict: None
        return
    from critic_cli.report.text import ProgressBar

    with ProgressBar(total) as bar:
        yield bar.advance
