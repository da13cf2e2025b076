"""Benchmark the deterministic checks: both shipped packs over a 1 MiB draft.

Builds a realistic draft (prose, Markdown, code and config snippets with versions, dates,
UUIDs, hashes and URLs, plus a few synthetic secrets and personal data), loads
rules/secrets.yaml and rules/pii.yaml, runs ``run_checks`` over the draft N times and prints
the median and the worst time. Exits 1 when the median exceeds the budget (50 ms by default).

    python bench/bench_checks.py [--runs 20] [--budget-ms 50] [--per-rule]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from critic_cli.checks import run_checks  # noqa: E402
from critic_cli.rules import load_packs  # noqa: E402

PACKS = [ROOT / "rules" / "secrets.yaml", ROOT / "rules" / "pii.yaml"]
SIZE = 1024 * 1024

WORDS = (
    "the a of and to in is that for it as was with be by on not this are or from at which but "
    "have an they you were there been one all we their has would when if so no out up into do "
    "can more about than its time only could new them some these then two first may any like "
    "now such make over even most after also made many before must through back much where "
    "your way well down should because each just those people how little good very world "
    "still own see work long get here between both life being under never day same another "
    "know while last might great old year come since against right used take three service "
    "deploy request response server client model draft review config build release cluster "
    "database token secret password key account customer invoice payment order email phone "
    "version update migration schema latency budget error retry cache queue worker pipeline"
).split()
NAMES = ["Alice", "Bob", "Carol", "Dmitri", "Eve", "Fatima", "Grace", "Hiro", "Ines", "Jonas"]


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 22))]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), rng.choice(NAMES))
    if rng.random() < 0.2:
        words.insert(rng.randrange(len(words)), f"{rng.randint(2, 999)}")
    if rng.random() < 0.1:
        words.insert(rng.randrange(len(words)), f"{rng.randint(1, 99)}.{rng.randint(0, 9)}%")
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice([".", ".", ".", "?", "!", ":"])


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _uuid(rng: random.Random) -> str:
    h = _hex(rng, 32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _code_block(rng: random.Random) -> str:
    version = f"{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 99)}"
    date = f"20{rng.randint(10, 29)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    kind = rng.randrange(4)
    if kind == 0:
        return (
            "```yaml\n"
            f"service: {rng.choice(WORDS)}-{rng.choice(WORDS)}\n"
            f"image: registry.example.com/app:{version}\n"
            f"replicas: {rng.randint(1, 12)}\n"
            f"request_id: {_uuid(rng)}\n"
            "password: ${DB_PASSWORD}\n"
            "api_key: <your-api-key>\n"
            f"released: {date}\n"
            "```\n"
        )
    if kind == 1:
        return (
            "```python\n"
            f"def handler(event, retries={rng.randint(1, 5)}):\n"
            f"    digest = \"{_hex(rng, 40)}\"  # sha1 of the payload\n"
            f"    checksum = \"{_hex(rng, 64)}\"\n"
            "    token = os.environ[\"API_TOKEN\"]\n"
            f"    return client.get(\"https://api.example.com/v{rng.randint(1, 3)}/items\","
            f" timeout={rng.randint(5, 60)})\n"
            "```\n"
        )
    if kind == 2:
        return (
            "```console\n"
            f"$ pip install critic-cli=={version}\n"
            f"$ git checkout {_hex(rng, 12)}\n"
            f"$ curl -s https://example.com/releases/{date}/notes.txt\n"
            f"order {rng.randint(10**7, 10**8)} shipped on {date} at 14:{rng.randint(10, 59)}\n"
            "```\n"
        )
    rows = "\n".join(
        f"| {rng.choice(NAMES)} | {rng.randint(1, 9999)} | {rng.randint(0, 100)}% | {date} |"
        for _ in range(rng.randint(3, 8))
    )
    return "| name | count | share | date |\n|---|---|---|---|\n" + rows + "\n"


def _fake(alphabet: str, n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DIGITS = "0123456789"
ALNUM = UPPER + UPPER.lower() + DIGITS


def _embedded() -> list[str]:
    """A few synthetic secrets and personal data, in real formats (none is a real value)."""
    return [
        f"The deploy script used AKIA{_fake(UPPER + DIGITS, 16, 1)} by mistake.",
        f"export GITHUB_TOKEN=ghp_{_fake(ALNUM, 36, 2)}",
        f"DB_PASSWORD=tr0ub4dor{_fake(ALNUM, 6, 3)}",
        "Reach Dana at dana.k" + "@" + "example.org or +44 20 7946 0958.",
        "Refund to DE89 3704 0044 0532 0130 00 and card 4111 1111 1111 1111.",
    ]


def build_draft(size: int = SIZE, seed: int = 7) -> str:
    """Return a deterministic draft of exactly ``size`` characters (ASCII, so also bytes)."""
    rng = random.Random(seed)
    extras = _embedded()
    parts: list[str] = []
    total = 0
    while total < size:
        roll = rng.random()
        if roll < 0.05:
            piece = f"\n## {rng.choice(WORDS).capitalize()} {rng.choice(WORDS)}\n\n"
        elif roll < 0.15:
            piece = "\n" + _code_block(rng) + "\n"
        elif roll < 0.16 and extras:
            piece = extras.pop(0) + "\n"
        else:
            piece = " ".join(_sentence(rng) for _ in range(rng.randint(2, 6))) + "\n\n"
        parts.append(piece)
        total += len(piece)
    return "".join(parts)[:size]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--budget-ms", type=float, default=50.0)
    parser.add_argument("--per-rule", action="store_true", help="also time each rule alone")
    args = parser.parse_args(argv)

    ruleset = load_packs([str(path) for path in PACKS])
    rules = ruleset.checks
    draft = build_draft()
    run_checks(draft, rules)  # warm up: RE2 builds its DFAs lazily

    times = []
    hits = []
    for _ in range(args.runs):
        start = time.perf_counter()
        hits = run_checks(draft, rules)
        times.append((time.perf_counter() - start) * 1000)
    median, worst = statistics.median(times), max(times)

    by_rule: dict[str, int] = {}
    for hit in hits:
        by_rule[hit.rule] = by_rule.get(hit.rule, 0) + 1
    print(f"draft: {len(draft.encode())} bytes, {draft.count(chr(10)) + 1} lines; "
          f"{len(rules)} checks from {len(PACKS)} packs; {args.runs} runs")
    print(f"hits: {len(hits)} ({', '.join(f'{k} {v}' for k, v in sorted(by_rule.items()))})")
    if args.per_rule:
        for rule in rules:
            start = time.perf_counter()
            for _ in range(5):
                run_checks(draft, [rule])
            print(f"  {rule.id:24s} {(time.perf_counter() - start) / 5 * 1000:7.2f} ms")
    print(f"run_checks: median {median:.1f} ms, max {worst:.1f} ms (budget: median <= "
          f"{args.budget_ms:g} ms)")
    if median > args.budget_ms:
        print("FAIL: median over budget", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
