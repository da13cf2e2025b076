"""The reply cache: one small JSON file per valid reply, keyed by what shapes the reply."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

FORMAT = "critic-cache-v1"


def cache_key(base_url: str | None, body: Mapping[str, Any], response_format: str) -> str:
    """Return the key of a request: base URL, model, messages, format, temperature, seed."""
    shaped = {key: value for key, value in body.items() if key != "response_format"}
    blob = json.dumps(
        {"v": FORMAT, "base_url": (base_url or "").rstrip("/"), "body": shaped,
         "response_format": response_format},
        sort_keys=True, ensure_ascii=False, separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _minimal(completion: Mapping[str, Any]) -> dict[str, Any]:
    """Return only what the parser reads, so a committed cache holds no ids or usage."""
    choice = completion["choices"][0]
    message = choice.get("message") or {}
    return {
        "model": completion.get("model"),
        "choices": [{
            "index": 0,
            "finish_reason": choice.get("finish_reason"),
            "message": {"role": "assistant", "content": message.get("content")},
        }],
    }


class Cache:
    """A directory of replies; reads never raise, writes are atomic."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.write_failed = False

    def path(self, key: str) -> str:
        """Return the file that holds ``key``."""
        return os.path.join(self.directory, key[:2], f"{key}.json")

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the cached completion for ``key``, or None (a damaged entry is a miss)."""
        try:
            with open(self.path(key), encoding="utf-8") as handle:
                entry = json.load(handle)
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("format") != FORMAT:
            return None
        completion = entry.get("completion")
        return completion if isinstance(completion, dict) else None

    def put(self, key: str, completion: Mapping[str, Any]) -> None:
        """Store a completion that parsed into a valid verdict, atomically."""
        entry = {"format": FORMAT, "key": key, "completion": _minimal(completion)}
        target = self.path(key)
        try:
            write_atomic(target, json.dumps(entry, ensure_ascii=False, indent=1, sort_keys=True))
        except OSError as exc:
            # The verdict stands; only its replay is lost. Say so once, on stderr.
            if not self.write_failed:
                self.write_failed = True
                sys.stderr.write(f"critic: warning: cannot write the cache in {self.directory}: "
                                 f"{exc.strerror or exc}\n")


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    from critic_cli.output import temporary_beside

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    stream, temporary = temporary_beside(path)
    try:
        with stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
