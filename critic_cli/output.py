"""Where reports go (stdout, or a file written atomically) and progress (stderr, when a tty)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import IO

from critic_cli.errors import UsageError


class Sink:
    """Write text to stdout as it comes, or to a temporary file renamed into place at the end."""

    def __init__(self, path: str | None, *, flush_each: bool = True) -> None:
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
            import tempfile

            folder = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(folder):
                raise UsageError(f"--output {self.path}: no such directory {folder}")
            handle, self._temporary = tempfile.mkstemp(dir=folder, prefix=".critic-",
                                                       suffix=".part")
            self._stream = os.fdopen(handle, "w", encoding="utf-8")
        return self

    def write(self, text: str) -> None:
        """Write ``text``; flush it too when records come slowly (a model is asked)."""
        if text:
            self._stream.write(text)
            if self.flush_each:
                self._stream.flush()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._special:
            self._stream.close()
        if self._temporary is None:
            return
        self._stream.close()
        if kind is None:
            os.replace(self._temporary, self.path or "")
        else:
            with contextlib.suppress(OSError):
                os.unlink(self._temporary)


@contextlib.contextmanager
def progress(show: bool, total: int | None = None) -> Iterator[Callable[[str], None]]:
    """Yield a function that counts one finished draft by its verdict (a bar when ``show``)."""
    if not show:
        yield lambda verdict: None
        return
    from critic_cli.report.text import ProgressBar

    with ProgressBar(total) as bar:
        yield bar.advance
