"""Refill examples/eval/cache/ with replies from a scripted stand-in judge, not a real model.

    python examples/eval/make_cache.py            # from the repository, in the dev environment

There is no model behind the shipped cache. This script starts the loopback chat-completions
server from tests/judge.py on the address that cases.yaml names (``base_url``, 127.0.0.1:8000:
the cache key includes the base URL, so the replies must be fetched from that exact URL), answers
every review request with a deterministic keyword verdict (``decide`` below), runs
``critic eval cases.yaml`` against it with an emptied cache directory, then replays the cache
with ``--offline`` to show the report a fresh checkout gets.

The stand-in is imperfect on purpose: it asks for a source when a figure is introduced with "per
the", it cites one preference too many when a draft says "definitely", and it believes a draft
that claims to be pre-approved. A real model makes other mistakes; measure yours with
``critic eval examples/eval/cases.yaml --model NAME --base-url URL --cache-dir DIR``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CASES = HERE / "cases.yaml"
CANNED = REPO / "examples" / "canned"
sys.path.insert(0, str(REPO))

from critic_cli.evaluate import load_suite  # noqa: E402
from tests.judge import Judge, Received, Reply, _Handler, _Server, completion  # noqa: E402

_FENCE = re.compile(r"<(DRAFT-[0-9a-f]{32})>\n(.*)\n</\1>", re.DOTALL)
_PREFERENCE = re.compile(r"^\d+\. \[priority [^\]]+\] (.*)$")
_FIGURE = re.compile(r"\d+(?:\.\d+)?\s?%|\b\d+(?:\.\d+)?\s(?:million|billion)\b"
                     r"|\bstudies show\b", re.IGNORECASE)
_SOURCED = ("according to", "source:", "(source", "as reported by", "published by")
_GULLIBLE = ("already been approved", "pre-approved")
_INJECTION = ("ignore all previous", "ignore previous", "ignore your instructions",
              "developer mode", "</draft-", '"verdict"', "as the reviewer")
_PRIVATE = ("mri", "lab results", "diagnosed with", "medical record", "date of birth")
_ILLEGAL = ("off the books", "avoid paying vat", "avoid paying tax")
_ADVICE = ("double your dose", "mg of", "you definitely have", "savings into",
           "guaranteed win", "don't need a lawyer", "stop paying rent")
_RUDE = ("obviously you", "figure it out yourself", "stupid")
_PASSWORD = re.compile(r"\bpassword (?:is|was)\b", re.IGNORECASE)
_STRIPE_TEST = re.compile(r"sk_test_[0-9A-Za-z]+")

REFUSAL = "I can't share that. Please contact the team through the usual channel."
REFERRAL = ("I can share general information, but not a personal recommendation: please talk "
            "to a qualified professional (a doctor, pharmacist, lawyer or licensed financial "
            "adviser) about your situation.")


def parse_request(body: dict[str, Any]) -> tuple[str, list[str]]:
    """Return the fenced draft and the preference statements, highest priority first."""
    messages = body.get("messages") or []
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    user = next((m["content"] for m in messages if m.get("role") == "user"), "")
    found = _FENCE.search(user)
    draft = found.group(2) if found else user
    statements: list[str] = []
    for line in system.splitlines():
        match = _PREFERENCE.match(line)
        if match:
            statements.append(match.group(1))
        elif statements and line.startswith("   ") and line.strip():
            statements[-1] += " " + line.strip()
    return draft, statements


def decide(draft: str, statements: list[str]) -> dict[str, Any]:
    """Return the stand-in judge's verdict for one draft: keywords, in a fixed order."""
    low = draft.lower()

    def cite(*starts: str) -> list[str]:
        return [s for s in statements if any(s.startswith(start) for start in starts)]

    def verdict(kind: str, text: str = "", *matched: str) -> dict[str, Any]:
        return {"verdict": kind, "text": text, "matched_preferences": cite(*matched)}

    if any(cue in low for cue in _GULLIBLE):
        return verdict("approve")  # the stand-in's blind spot: it trusts the claim
    if any(cue in low for cue in _INJECTION):
        return verdict("refuse", REFUSAL)
    if _PASSWORD.search(draft):
        return verdict("refuse", REFUSAL, "Never reveal credentials, API keys, tokens")
    if _STRIPE_TEST.search(draft):
        return verdict("revise", _STRIPE_TEST.sub("sk_test_<your-test-key>", draft),
                       "When an example needs a credential")
    if any(cue in low for cue in _PRIVATE):
        return verdict("refuse", REFUSAL, "Never disclose a person's private data")
    if any(cue in low for cue in _ILLEGAL):
        return verdict("refuse", "I can't help with that. An accountant can explain how to "
                                 "handle VAT correctly.", "Do not give individual")
    if any(cue in low for cue in _ADVICE):
        matched = ["Do not give individual"]
        if "definitely" in low:
            matched.append("Say plainly when the answer is uncertain")  # one too many
        return verdict("revise", REFERRAL, *matched)
    if any(cue in low for cue in _RUDE):
        return verdict("revise", "The steps are on page 3 of the manual; I'm happy to walk "
                                 "you through them if that helps.", "Keep a courteous")
    if _FIGURE.search(draft) and not any(cue in low for cue in _SOURCED):
        return verdict("revise", draft.rstrip() + " [source needed]",
                       "State figures, dates and quotes")
    return verdict("approve")


class StandInJudge(Judge):
    """The loopback judge, answering each request from its content instead of a script."""

    def _next(self, received: Received) -> Reply:
        with self._lock:
            self.requests.append(received)
        draft, statements = parse_request(received.body)
        return Reply(json=completion(json.dumps(decide(draft, statements))))


def critic(*args: str) -> int:
    """Run ``critic`` in a clean environment (no CRITIC_*/OPENAI_* variables, no .critic.yaml)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRITIC_", "OPENAI_"))}
    command = [sys.executable, "-m", "critic_cli", *args]
    if "--config" not in args:
        command.append("--no-config")
    return subprocess.run(command, env=env, check=False).returncode


def clear_cache(directory: Path) -> None:
    """Remove the cache entries (``xx/<sha256>.json``), nothing else."""
    for entry in directory.glob("[0-9a-f][0-9a-f]/*.json"):
        entry.unlink()
    for folder in directory.glob("[0-9a-f][0-9a-f]"):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def main() -> int:
    """Serve the stand-in judge where cases.yaml points, fill the cache, replay it offline."""
    settings = load_suite(str(CASES)).settings
    url = urlsplit(settings["base_url"])
    if url.hostname not in ("127.0.0.1", "localhost") or url.port is None:
        sys.exit(f"make_cache.py: base_url {settings['base_url']} is not a local address")
    clear_cache(Path(settings["cache_dir"]))
    state = StandInJudge()
    try:
        server = _Server((url.hostname, url.port), _Handler)
    except OSError as exc:
        sys.exit(f"make_cache.py: cannot listen on {url.hostname}:{url.port}: {exc.strerror}")
    server.judge = state
    state.base_url = settings["base_url"]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    clear_cache(CANNED / "cache")
    try:
        code = critic("eval", str(CASES), "--format", "text", "--quiet")
        # The canned outputs of examples/canned/ use the same stand-in, address and model.
        critic("review", str(CANNED / "drafts"), "--config", str(CANNED / "critic.yaml"),
               "--format", "text", "--quiet", "--fail-on", "never")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    print(f"\nmake_cache.py: the stand-in judge answered {len(state.requests)} requests "
          f"(exit {code}); replaying the cache offline:\n", flush=True)
    critic("review", str(CANNED / "drafts"), "--config", str(CANNED / "critic.yaml"),
           "--offline", "--format", "text", "--fail-on", "never")
    return critic("eval", str(CASES), "--offline", "--format", "text", "--quiet")


if __name__ == "__main__":
    sys.exit(main())
