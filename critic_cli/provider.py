"""The OpenAI-compatible client: one request body, lazy ``openai`` import, retries and fallback.

``openai`` is imported only when a call is made; importing this module costs nothing. The
client's own retry loop handles 429, 5xx, timeouts and connection errors (honouring
``Retry-After``); this module adds the response-format fallback and turns every failure into a
one-line :class:`~critic_cli.errors.ReflectionError` that never carries the API key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from critic_cli.errors import ReflectionError
from critic_cli.reflection import response_format

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "FALLBACK_STATUSES",
    "RESPONSE_FORMATS",
    "Provider",
    "ProviderSettings",
    "request_body",
    "response_kinds",
]

RESPONSE_FORMATS = ("auto", "json_schema", "json_object", "none")
# A 4xx that can mean "this server does not take that response_format"; 401/403/429 never do.
FALLBACK_STATUSES = frozenset({400, 404, 415, 422})
NO_KEY = "not-needed"
_SNIPPET = 120
_TOKENS = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=*-]{8,}|\bsk-[A-Za-z0-9_*-]{6,}")


@dataclass(frozen=True)
class ProviderSettings:
    """Where and how to ask the model; the key is kept out of repr."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 60.0
    max_retries: int = 2
    response_format: str = "auto"  # auto | json_schema | json_object | none
    temperature: float = 0.0
    seed: int | None = None


def response_kinds(setting: str) -> list[str]:
    """Return the response formats to try, in order, for a ``--response-format`` setting."""
    if setting == "auto":
        return ["json_schema", "json_object", "none"]
    if setting not in RESPONSE_FORMATS:
        raise ValueError(f"unknown response format {setting!r} (expected one of: "
                         f"{', '.join(RESPONSE_FORMATS)})")
    return [setting]


def request_body(
    settings: ProviderSettings,
    messages: Sequence[dict[str, str]],
    response_kind: str,
) -> dict[str, Any]:
    """Return the exact JSON body POSTed to ``/chat/completions``."""
    body: dict[str, Any] = {
        "model": settings.model,
        "messages": [dict(message) for message in messages],
        "temperature": settings.temperature,
    }
    if settings.seed is not None:
        body["seed"] = settings.seed
    fmt = response_format(response_kind)
    if fmt is not None:
        body["response_format"] = fmt
    return body


class Provider:
    """One OpenAI-compatible endpoint; one client, reused by every call, safe across tasks."""

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self._client: AsyncOpenAI | None = None

    def __repr__(self) -> str:
        return f"Provider({self.settings!r})"

    async def __aenter__(self) -> Provider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def base_url(self) -> str:
        """Return the endpoint as shown in messages, without any credentials in it."""
        if self._client is not None:
            return safe_url(str(self._client.base_url).rstrip("/"))
        return safe_url(self.settings.base_url or "the default OpenAI endpoint")

    def connect(self) -> AsyncOpenAI:
        """Return the client, creating it (and importing openai) on first use."""
        if self._client is None:
            import openai  # here, not at the top: it takes half a second to import

            try:
                self._client = openai.AsyncOpenAI(
                    base_url=self.settings.base_url or None,
                    api_key=self.settings.api_key or NO_KEY,
                    timeout=self.settings.timeout,
                    max_retries=self.settings.max_retries,
                )
            except Exception as exc:  # httpx2.InvalidURL is no OpenAIError; say why, in one line
                raise ReflectionError(self._scrub(
                    f"cannot use base URL {self.base_url}: {_first_line(str(exc))}")) from None
        return self._client

    async def complete(self, messages: Sequence[dict[str, str]]) -> tuple[dict[str, Any], str]:
        """Send one chat completion; return the reply as a plain dict and the format that worked."""
        import openai

        client = self.connect()
        kinds = response_kinds(self.settings.response_format)
        for i, kind in enumerate(kinds):
            body = request_body(self.settings, messages, kind)
            try:
                # The low-level post skips the SDK's per-call TypedDict transform of the body
                # (~3 ms of CPU a call); the body is already exactly what we mean to send.
                raw = await client.post("/chat/completions", body=body, cast_to=_response_type())
            except openai.APIStatusError as exc:
                if i + 1 < len(kinds) and _format_may_be_at_fault(exc.status_code):
                    continue
                tried = f" (tried response_format {', '.join(kinds[: i + 1])})" if i else ""
                raise ReflectionError(self._scrub(
                    f"model call failed: HTTP {exc.status_code} from {self.base_url}"
                    f"{_detail(exc.body)}{tried}")) from None
            except openai.APITimeoutError:
                attempts = self.settings.max_retries + 1
                raise ReflectionError(
                    f"model call timed out after {self.settings.timeout:g} s "
                    f"({attempts} attempt{'s' if attempts != 1 else ''})") from None
            except openai.APIConnectionError:
                raise ReflectionError(f"could not connect to {self.base_url}") from None
            except openai.OpenAIError as exc:
                raise ReflectionError(self._scrub(
                    f"model call failed: {_first_line(str(exc))}")) from None
            except Exception as exc:  # the HTTP stack's own (a bad port, ...): still one line
                raise ReflectionError(self._scrub(
                    f"model call failed: {type(exc).__name__}: {_first_line(str(exc))}")
                ) from None
            return self._decode(raw.status_code, raw.headers.get("content-type", ""),
                                raw.content), kind
        raise AssertionError("unreachable: response_kinds is never empty")

    def _decode(self, status: int, content_type: str, content: bytes) -> dict[str, Any]:
        """Return the response body as a dict, or fail with a short reason."""
        where = f"model call failed: HTTP {status} from {self.base_url}"
        try:
            data = json.loads(content)
        except (ValueError, UnicodeDecodeError):
            kind = content_type.split(";")[0].strip() or "no content type"
            raise ReflectionError(f"{where}: reply is not JSON ({kind})") from None
        if not isinstance(data, dict):
            raise ReflectionError(f"{where}: reply is not a JSON object")
        return data

    async def aclose(self) -> None:
        """Close the client and its connections; the provider can connect again afterwards."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def _scrub(self, text: str) -> str:
        return scrub(text, self.settings.api_key, self.settings.base_url)


def scrub(text: str, key: str | None, base_url: str | None) -> str:
    """Remove the API key, a password in the base URL, and anything like a token from text."""
    if key:
        text = text.replace(key, "[key]")
    password = _password(base_url)
    if password:
        text = text.replace(password, "[password]")
    return _TOKENS.sub(lambda m: f"{m.group(1)}[key]" if m.group(1) else "[key]", text)


def _response_type() -> Any:
    """Return the HTTP library's Response class, which asks the client for the raw reply."""
    try:
        import httpx2 as http  # what openai 3.x is built on
    except ImportError:  # pragma: no cover - openai 1.x and 2.x use httpx
        import httpx as http  # type: ignore[no-redef, import-not-found]
    return http.Response


def _format_may_be_at_fault(status: int) -> bool:
    return status in FALLBACK_STATUSES or status >= 500


def _detail(body: object) -> str:
    """Return ``": message"`` from an error body, short and on one line, or nothing."""
    message: object = body
    if isinstance(body, dict):
        message = body.get("message") or body.get("error") or body.get("detail")
        if isinstance(message, dict):
            message = message.get("message")
    if not isinstance(message, str):
        return ""
    text = " ".join(message.split())
    if not text or text.lstrip().startswith("<"):  # an HTML error page says nothing useful
        return ""
    if len(text) > _SNIPPET:
        text = text[: _SNIPPET - 1] + "…"
    return f": {text}"


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "unknown error"
    return line if len(line) <= 200 else line[:199] + "…"


def _password(url: str | None) -> str | None:
    try:
        return urlsplit(url).password if url else None
    except ValueError:
        return None


def safe_url(url: str) -> str:
    """Drop any user:password from a URL shown in a message."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
