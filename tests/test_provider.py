"""The provider against a real loopback server, through the real openai client."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from critic_cli.errors import ReflectionError
from critic_cli.provider import Provider, ProviderSettings, request_body, response_kinds
from critic_cli.reflection import (
    RESPONSE_SCHEMA,
    PromptTemplate,
    Verdict,
    build_messages,
    parse_reply,
    response_format,
)
from tests.judge import Judge, Reply, completion, serve_judge

ROOT = Path(__file__).resolve().parents[1]
MESSAGES = build_messages(PromptTemplate.default(), "A draft.", (), ("Be kind.",), None, 0.4)
KEY = "sk-test-SECRET-123"
REJECT = {"error": {"message": "response_format is not supported", "type": "invalid_request_error"}}


def settings(judge: Judge, **overrides: Any) -> ProviderSettings:
    values: dict[str, Any] = {"model": "judge-1", "base_url": judge.base_url, "max_retries": 0}
    values.update(overrides)
    return ProviderSettings(**values)


def call(provider_settings: ProviderSettings) -> tuple[dict[str, Any], str]:
    async def run() -> tuple[dict[str, Any], str]:
        async with Provider(provider_settings) as provider:
            return await provider.complete(MESSAGES)

    return asyncio.run(run())


def failure(provider_settings: ProviderSettings) -> str:
    with pytest.raises(ReflectionError) as info:
        call(provider_settings)
    message = str(info.value)
    assert "\n" not in message
    assert info.value.exit_code == 3
    return message


def formats(judge: Judge) -> list[Any]:
    return [(body.get("response_format") or {}).get("type") for body in judge.bodies]


# the request


def test_response_kinds() -> None:
    assert response_kinds("auto") == ["json_schema", "json_object", "none"]
    assert response_kinds("json_object") == ["json_object"]
    assert response_kinds("none") == ["none"]
    with pytest.raises(ValueError, match="unknown response format 'yaml'"):
        response_kinds("yaml")


def test_request_body() -> None:
    provider_settings = ProviderSettings(model="m", seed=7, temperature=0.2)
    body = request_body(provider_settings, MESSAGES, "json_schema")
    assert body == {
        "model": "m",
        "messages": MESSAGES,
        "temperature": 0.2,
        "seed": 7,
        "response_format": response_format("json_schema"),
    }
    assert body["response_format"]["json_schema"]["schema"] == RESPONSE_SCHEMA


def test_request_body_without_seed_or_format() -> None:
    assert request_body(ProviderSettings(model="m"), MESSAGES, "none") == {
        "model": "m", "messages": MESSAGES, "temperature": 0.0}


def test_settings_repr_hides_the_key() -> None:
    text = repr(ProviderSettings(model="m", api_key=KEY))
    assert KEY not in text
    assert KEY not in repr(Provider(ProviderSettings(model="m", api_key=KEY)))


def test_importing_provider_does_not_import_openai() -> None:
    code = ("import sys, critic_cli.provider, critic_cli.reflection; "
            "print(sorted(m for m in ('openai', 'httpx2', 'pydantic') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, check=True)
    assert result.stdout == "[]\n"


# against the judge


def test_normal_reply(judge: Judge) -> None:
    judge.default_verdict = {"verdict": "revise", "text": "Better.", "matched_preferences": []}
    reply, kind = call(settings(judge, seed=3))
    assert kind == "json_schema"
    assert reply == completion(json.dumps(judge.default_verdict))
    assert parse_reply(reply, (), "no") == Verdict("revise", "Better.", [])
    assert len(judge.requests) == 1
    seen = judge.requests[0]
    assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
    assert seen.body == request_body(settings(judge, seed=3), MESSAGES, "json_schema")


def test_extra_fields_survive_into_the_dict(judge: Judge) -> None:
    judge.script(Reply(json=completion('{"verdict": "approve"}', reasoning_content="decoy")))
    reply, _ = call(settings(judge))
    assert reply["choices"][0]["message"]["reasoning_content"] == "decoy"


def test_json_schema_rejected_falls_back_to_json_object(judge: Judge) -> None:
    judge.script(Reply(status=400, json=REJECT))
    reply, kind = call(settings(judge))
    assert kind == "json_object"
    assert formats(judge) == ["json_schema", "json_object"]
    assert judge.bodies[1] == request_body(settings(judge), MESSAGES, "json_object")
    assert parse_reply(reply, (), "no").verdict == "approve"


@pytest.mark.parametrize("status", [404, 415, 422, 500, 503])
def test_fallback_statuses(judge: Judge, status: int) -> None:
    judge.script(Reply(status=status, json=REJECT))
    _, kind = call(settings(judge))
    assert kind == "json_object"
    assert formats(judge) == ["json_schema", "json_object"]


def test_both_rejected_falls_back_to_none(judge: Judge) -> None:
    judge.script(Reply(status=400, json=REJECT), Reply(status=422, json=REJECT))
    _, kind = call(settings(judge))
    assert kind == "none"
    assert formats(judge) == ["json_schema", "json_object", None]
    assert "response_format" not in judge.bodies[2]


def test_all_rejected_fails_naming_the_formats_tried(judge: Judge) -> None:
    judge.script(*[Reply(status=400, json=REJECT)] * 3)
    assert failure(settings(judge)) == (
        f"model call failed: HTTP 400 from {judge.base_url}: response_format is not supported "
        "(tried response_format json_schema, json_object, none)")
    assert formats(judge) == ["json_schema", "json_object", None]


def test_fixed_response_format_does_not_fall_back(judge: Judge) -> None:
    judge.script(Reply(status=400, json=REJECT))
    assert failure(settings(judge, response_format="json_schema")) == (
        f"model call failed: HTTP 400 from {judge.base_url}: response_format is not supported")
    assert formats(judge) == ["json_schema"]


def test_response_format_none_sends_no_format(judge: Judge) -> None:
    _, kind = call(settings(judge, response_format="none"))
    assert kind == "none"
    assert formats(judge) == [None]


def test_429_with_retry_after_then_success(judge: Judge) -> None:
    judge.script(Reply(status=429, json={"error": {"message": "slow down"}},
                       headers={"Retry-After": "1"}))
    _, kind = call(settings(judge, max_retries=2))
    assert kind == "json_schema"
    assert len(judge.requests) == 2
    assert judge.requests[1].at - judge.requests[0].at >= 0.95
    assert formats(judge) == ["json_schema", "json_schema"]
    assert judge.requests[1].headers["x-stainless-retry-count"] == "1"


def test_500_then_success(judge: Judge) -> None:
    judge.script(Reply(status=500, json={"error": {"message": "boom"}}))
    _, kind = call(settings(judge, max_retries=1))
    assert kind == "json_schema"
    assert formats(judge) == ["json_schema", "json_schema"]


def test_500_always_fails_after_retries_and_fallback(judge: Judge) -> None:
    judge.script(*[Reply(status=500, json={"error": {"message": "boom"}},
                         headers={"Retry-After": "0.01"})] * 6)
    assert failure(settings(judge, max_retries=1)) == (
        f"model call failed: HTTP 500 from {judge.base_url}: boom "
        "(tried response_format json_schema, json_object, none)")
    assert formats(judge) == ["json_schema"] * 2 + ["json_object"] * 2 + [None] * 2


def test_401_fails_without_fallback_or_retry(judge: Judge) -> None:
    judge.script(Reply(status=401, json={"error": {"message": "bad key"}}))
    assert failure(settings(judge, max_retries=2)) == (
        f"model call failed: HTTP 401 from {judge.base_url}: bad key")
    assert len(judge.requests) == 1


@pytest.mark.parametrize("status", [403, 429])
def test_403_and_429_do_not_fall_back(judge: Judge, status: int) -> None:
    judge.script(Reply(status=status, json={"error": {"message": "no"}}))
    assert failure(settings(judge)) == f"model call failed: HTTP {status} from {judge.base_url}: no"
    assert len(judge.requests) == 1


def test_hang_past_timeout_fails_quickly(judge: Judge) -> None:
    judge.script(Reply(delay=30))
    started = time.monotonic()
    assert failure(settings(judge, timeout=0.5)) == "model call timed out after 0.5 s (1 attempt)"
    assert time.monotonic() - started < 3
    assert len(judge.requests) == 1


def test_timeout_message_counts_attempts(judge: Judge) -> None:
    judge.script(Reply(delay=30), Reply(delay=30, headers={}))
    assert failure(settings(judge, timeout=0.3, max_retries=1)) == (
        "model call timed out after 0.3 s (2 attempts)")
    assert len(judge.requests) == 2


def test_html_200_fails(judge: Judge) -> None:
    judge.script(Reply(text="<html><body>Welcome to nginx!</body></html>",
                       content_type="text/html"))
    assert failure(settings(judge)) == (
        f"model call failed: HTTP 200 from {judge.base_url}: reply is not JSON (text/html)")


def test_invalid_json_200_fails(judge: Judge) -> None:
    judge.script(Reply(text='{"choices": [', content_type="application/json"))
    assert failure(settings(judge)) == (
        f"model call failed: HTTP 200 from {judge.base_url}: reply is not JSON (application/json)")


def test_json_array_200_fails(judge: Judge) -> None:
    judge.script(Reply(json=[1, 2]))
    assert failure(settings(judge)) == (
        f"model call failed: HTTP 200 from {judge.base_url}: reply is not a JSON object")


def test_html_error_page(judge: Judge) -> None:
    judge.script(Reply(status=401, text="<html><h1>401 Authorization Required</h1></html>",
                       content_type="text/html"))
    assert failure(settings(judge)) == f"model call failed: HTTP 401 from {judge.base_url}"


def test_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ReflectionError) as info:
        call(ProviderSettings(model="m", base_url=base_url, max_retries=0))
    assert str(info.value) == f"could not connect to {base_url}"


def test_key_never_in_the_error(judge: Judge) -> None:
    judge.script(Reply(status=401, json={"error": {"message": f"Incorrect API key provided: {KEY}. "
                                                    "Header was: Bearer sk-other-abcdef123"}}))
    message = failure(settings(judge, api_key=KEY))
    assert KEY not in message
    assert "SECRET" not in message
    assert "sk-other-abcdef123" not in message
    assert message == (f"model call failed: HTTP 401 from {judge.base_url}: "
                       "Incorrect API key provided: [key]. Header was: Bearer [key]")


def test_credentials_in_base_url_never_in_the_error(judge: Judge) -> None:
    judge.script(Reply(status=401, json={"error": {"message": "no"}}))
    url = judge.base_url.replace("http://", "http://user:hunter2@")
    message = failure(settings(judge, base_url=url))
    assert "hunter2" not in message
    assert message == f"model call failed: HTTP 401 from {judge.base_url}: no"


def test_key_is_sent_as_bearer_token(judge: Judge) -> None:
    call(settings(judge, api_key=KEY))
    assert judge.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_keyless_provider_works(judge: Judge, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    _, kind = call(settings(judge))
    assert kind == "json_schema"
    assert judge.requests[0].headers["authorization"] == "Bearer not-needed"


def test_one_client_serves_concurrent_calls(judge: Judge) -> None:
    judge.latency = 0.2

    async def run() -> tuple[list[str], int]:
        async with Provider(settings(judge)) as provider:
            results = await asyncio.gather(*(provider.complete(MESSAGES) for _ in range(10)))
            client = provider._client
            await provider.complete(MESSAGES)
            assert provider._client is client
        return [kind for _, kind in results], len(judge.requests)

    started = time.monotonic()
    kinds, count = asyncio.run(run())
    assert kinds == ["json_schema"] * 10
    assert count == 11
    assert time.monotonic() - started < 5  # concurrent: far below 10 sequential timeouts


def test_aclose_twice_and_reconnect(judge: Judge) -> None:
    async def run() -> str:
        provider = Provider(settings(judge))
        await provider.aclose()
        await provider.complete(MESSAGES)
        await provider.aclose()
        await provider.aclose()
        _, kind = await provider.complete(MESSAGES)
        await provider.aclose()
        return kind

    assert asyncio.run(run()) == "json_schema"
    assert len(judge.requests) == 2


def test_invalid_base_url() -> None:
    with pytest.raises(ReflectionError) as info:
        call(ProviderSettings(model="m", base_url="http://[::1/v1", max_retries=0))
    assert str(info.value) == "cannot use base URL http://[::1/v1: Invalid port: ':1'"


def test_fastapi_style_detail_is_reported(judge: Judge) -> None:
    judge.script(Reply(status=403, json={"detail": "Model not allowed"}))
    assert failure(settings(judge)) == (
        f"model call failed: HTTP 403 from {judge.base_url}: Model not allowed")


def test_plain_text_error_body_is_reported_short(judge: Judge) -> None:
    judge.script(Reply(status=401, text="denied " + "x" * 300))
    message = failure(settings(judge))
    assert message.startswith(f"model call failed: HTTP 401 from {judge.base_url}: denied xxx")
    assert message.endswith("x…")
    assert len(message) < len(judge.base_url) + 160


def test_empty_base_url_means_the_default() -> None:
    assert Provider(ProviderSettings(model="m", base_url="")).base_url == (
        "the default OpenAI endpoint")


# the judge itself


def test_judge_shuts_down_promptly_with_a_request_hanging() -> None:
    with serve_judge() as judge:
        judge.script(Reply(delay=60))
        errors: list[BaseException] = []

        def hang() -> None:
            request = urllib.request.Request(judge.base_url + "/chat/completions", data=b"{}",
                                             headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(request, timeout=10).close()
            except Exception as exc:  # the server drops the connection at shutdown
                errors.append(exc)

        client = threading.Thread(target=hang)
        client.start()
        while not judge.requests:
            time.sleep(0.01)
        started = time.monotonic()
    assert time.monotonic() - started < 3  # the hanging reply is dropped, not awaited
    client.join(timeout=5)
    assert not client.is_alive()
    assert len(errors) == 1


def test_serve_judge_default_verdict_and_latency() -> None:
    with serve_judge(latency=0.2) as judge:
        judge.default_verdict = {"verdict": "refuse", "text": "No.", "matched_preferences": []}
        started = time.monotonic()
        reply, _ = call(settings(judge))
        assert time.monotonic() - started >= 0.2
    assert parse_reply(reply, (), "x") == Verdict("refuse", "No.", [])
    assert judge.requests[0].body["model"] == "judge-1"


def test_judge_answers_404_off_route(judge: Judge) -> None:
    with pytest.raises(ReflectionError) as info:
        call(settings(judge, base_url=judge.base_url.removesuffix("/v1")))
    assert str(info.value).startswith("model call failed: HTTP 404 from ")
    assert [r.path for r in judge.requests] == ["/chat/completions"] * 3
