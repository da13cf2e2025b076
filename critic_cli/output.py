"""Where reports go: stdout, or a file written atomically (whole or not at all)."""

from __future__ import annotations

import contextlib
import os
import sys
from types import TracebackType
from typing import IO

from critic_cli.errors import UsageError


class Sink:
    """Write text to stdout as it comes, or to a temporary file renamed into place at the end."""

    def __init__(self, path: str | None) -> None:
        self.path = None if path in (None, "-") else path
        self._temporary: str | None = None
        self._stream: IO[str] = sys.stdout

    def __enter__(self) -> Sink:
        if self.path is not None:
            import tempfile

            folder = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(folder):
                raise UsageError(f"--output {self.path}: no such directory {folder}")
            handle, self._temporary = tempfile.mkstemp(dir=folder, prefix=".critic-",
                                                       suffix=".part")
            self._stream = os.fdopen(handle, "w", encoding="utf-8")
        return self

    def write(self, text: str) -> None:
        """Write ``text`` and flush, so each record reaches the reader whole."""
        if text:
            self._stream.write(text)
            self._stream.flush()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._temporary is None:
            return
        self._stream.close()
        if kind is None:
            os.replace(self._temporary, self.path or "")
        else:
            with contextlib.suppress(OSError):
                os.unlink(self._temporary)
