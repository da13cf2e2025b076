"""The shipped rule packs (rules/secrets.yaml, rules/pii.yaml) and the check engine under them.

Every secret below is synthetic: built here from a prefix and filler so that it has the real
format (and so the real rule must match it) without being, or looking like, a leaked value.
"""

from __future__ import annotations

import base64
import json
import random
import string
import time
from functools import cache
from pathlib import Path

import pytest

from critic_cli.checks import luhn_ok, redact, run_checks
from critic_cli.errors import RuleError
from critic_cli.rules import Rule, load_pack, load_packs

REPO = Path(__file__).resolve().parent.parent
SECRETS = REPO / "rules" / "secrets.yaml"
PII = REPO / "rules" / "pii.yaml"

UPPER = string.ascii_uppercase
LOWER = string.ascii_lowercase
DIGITS = string.digits
ALNUM = UPPER + LOWER + DIGITS
HEX = "0123456789abcdef"


def fake(alphabet: str, n: int, seed: int = 0) -> str:
    """Return ``n`` deterministic pseudo-random characters from ``alphabet``."""
    rng = random.Random(f"{alphabet}:{n}:{seed}")
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(data: dict[str, object]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# --- synthetic values in the real formats -------------------------------------------------

AWS_ID = "AKIA" + fake(UPPER + DIGITS, 16, 1)
AWS_TEMP_ID = "ASIA" + fake(UPPER + DIGITS, 16, 2)
AWS_DOC_ID = "AKIA" + "IOSFODNN7" + "EXAMPLE"  # the key in AWS's documentation
AWS_SECRET = fake(ALNUM + "/+", 40, 3)
AWS_DOC_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
GITHUB_CLASSIC = "ghp" + "_" + fake(ALNUM, 36, 4)
GITHUB_SERVER = "ghs" + "_" + fake(ALNUM, 36, 5)
GITHUB_FINE = "github" + "_pat_" + fake(ALNUM, 22, 6) + "_" + fake(ALNUM, 59, 7)
GITLAB = "glpat" + "-" + fake(ALNUM + "_-", 20, 8)
SLACK_BOT = "-".join(["xoxb", fake(DIGITS, 11, 9), fake(DIGITS, 13, 10), fake(ALNUM, 24, 11)])
SLACK_USER = "-".join(["xoxp", fake(DIGITS, 12, 12), fake(DIGITS, 12, 13), fake(DIGITS, 13, 14),
                       fake(HEX, 32, 15)])
SLACK_HOOK = ("https://hooks.slack.com/services/T" + fake(UPPER + DIGITS, 8, 16) + "/B"
              + fake(UPPER + DIGITS, 10, 17) + "/" + fake(ALNUM, 24, 18))
SLACK_DOC_HOOK = "https://hooks.slack.com/services/T00000000/B00000000/" + "X" * 24
OPENAI_SIGNATURE = "T3Blbk" + "FJ"  # base64 of "OpenAI", in every OpenAI key
OPENAI_LEGACY = "sk-" + fake(ALNUM, 20, 19) + OPENAI_SIGNATURE + fake(ALNUM, 20, 20)
OPENAI_PROJECT = ("sk-proj-" + fake(ALNUM + "_-", 74, 21) + OPENAI_SIGNATURE
                  + fake(ALNUM + "_-", 74, 22))
OPENAI_HEX = "sk-" + fake(HEX, 32, 23)
ANTHROPIC = "sk-ant-api03-" + fake(ALNUM + "_-", 93, 24) + "AA"
GOOGLE = "AIza" + fake(ALNUM + "_-", 35, 25)
STRIPE_LIVE = "sk" + "_live_" + fake(ALNUM, 24, 26)
STRIPE_RESTRICTED = "rk" + "_live_" + fake(ALNUM, 99, 27)
STRIPE_TEST = "sk" + "_test_" + fake(ALNUM, 24, 28)
JWT_HEADER = b64url({"alg": "HS256", "typ": "JWT"})
JWT_PAYLOAD = b64url({"sub": "1234567890", "name": "Test User", "iat": 1516239022})
JWT = f"{JWT_HEADER}.{JWT_PAYLOAD}.{fake(ALNUM + '_-', 43, 29)}"


def pem(kind: str, lines: int = 4, seed: int = 30) -> str:
    body = base64.b64encode(random.Random(seed).randbytes(48 * lines)).decode()
    wrapped = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    label = f"{kind} KEY" if kind.endswith("PRIVATE") else kind
    return f"-----BEGIN {label}-----\n{wrapped}\n-----END {label}-----"


PEM_RSA = pem("RSA " + "PRIVATE")
PEM_PKCS8 = pem("PRIVATE")
PEM_OPENSSH = pem("OPENSSH " + "PRIVATE", seed=31)
PEM_IN_JSON = PEM_PKCS8.replace("\n", "\\n")  # a key inside a JSON string (GCP key files)
PEM_TRUNCATED = PEM_RSA.split("-----END")[0].rstrip()

CARD_VISA = "4111 1111 1111 1111"  # the well-known test numbers: Luhn-valid, not real cards
CARD_MC = "5555-5555-5555-4444"
CARD_MC2 = "2223003122003222"
CARD_AMEX = "3782 822463 10005"
CARD_DISCOVER = "6011111111111117"
IBAN_DE = "DE89 3704 0044 0532 0130 00"  # the standard example IBANs
IBAN_GB = "GB33BUKB20201555555555"
IBAN_NO = "NO9386011117947"
IBAN_MT = "MT84 MALT 0110 0001 2345 MTLC AST0 01S"  # letters in the bank and account parts

SHA1 = "3f786850e387550fdab836ed7e6dc881de23001b"
SHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
UUID = "123e4567-e89b-12d3-a456-426614174000"


# --- the packs --------------------------------------------------------------------------

@cache
def pack_rules() -> dict[str, Rule]:
    """Every rule with a check in both shipped packs, by id."""
    ruleset = load_packs([str(SECRETS), str(PII)])
    return {rule.id: rule for rule in ruleset.checks}


def hits_of(rule_id: str, text: str) -> list[tuple[str, str]]:
    """Return (action, matched text) for each hit of ``rule_id`` in ``text``."""
    rules = list(pack_rules().values())
    return [(h.action, text[h.start:h.end]) for h in run_checks(text, rules) if h.rule == rule_id]


ACTIONS = {
    "aws-access-key-id": "refuse",
    "aws-secret-access-key": "refuse",
    "github-token": "refuse",
    "gitlab-token": "refuse",
    "slack-token": "refuse",
    "slack-webhook-url": "refuse",
    "openai-api-key": "refuse",
    "anthropic-api-key": "refuse",
    "google-api-key": "refuse",
    "stripe-live-key": "refuse",
    "stripe-test-key": "flag",
    "private-key-block": "refuse",
    "jwt": "revise",
    "password-assignment": "revise",
    "api-key-assignment": "revise",
    "secret-assignment": "revise",
    "secret-key-assignment": "revise",
    "token-assignment": "revise",
    "url-credentials": "revise",
    "email-address": "revise",
    "phone-number": "revise",
    "iban": "revise",
    "credit-card": "revise",
}

# rule id -> (draft, the exact text the hit must cover)
POSITIVES: dict[str, list[tuple[str, str]]] = {
    "aws-access-key-id": [
        (f"Use {AWS_ID} for the deploy.", AWS_ID),
        (f"aws_access_key_id = {AWS_TEMP_ID}\n", AWS_TEMP_ID),
        (f'"AccessKeyId": "{AWS_ID}"', AWS_ID),
    ],
    "aws-secret-access-key": [
        (f"aws_secret_access_key = {AWS_SECRET}\n", f"secret_access_key = {AWS_SECRET}"),
        (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", f"SECRET_ACCESS_KEY={AWS_SECRET}"),
        (f'{{"SecretAccessKey": "{AWS_SECRET}"}}', f'SecretAccessKey": "{AWS_SECRET}'),
    ],
    "github-token": [
        (f"export GITHUB_TOKEN={GITHUB_CLASSIC}", GITHUB_CLASSIC),
        (f"token: {GITHUB_SERVER}.", GITHUB_SERVER),
        (f"git clone https://{GITHUB_FINE}@github.com/org/repo", GITHUB_FINE),
    ],
    "gitlab-token": [
        (f"PRIVATE-TOKEN: {GITLAB}", GITLAB),
        (f"--header 'Authorization: Bearer {GITLAB}'", GITLAB),
    ],
    "slack-token": [
        (f"SLACK_BOT_TOKEN={SLACK_BOT}\n", SLACK_BOT),
        (f"Authorization: Bearer {SLACK_USER}", SLACK_USER),
    ],
    "slack-webhook-url": [
        (f"Post to {SLACK_HOOK} when done.", SLACK_HOOK.removeprefix("https://")),
    ],
    "openai-api-key": [
        (f"OPENAI_API_KEY={OPENAI_LEGACY}", OPENAI_LEGACY),
        (f'client = OpenAI(api_key="{OPENAI_PROJECT}")', OPENAI_PROJECT),
        (f"key {OPENAI_HEX} for the compatible endpoint", OPENAI_HEX),
    ],
    "anthropic-api-key": [
        (f"ANTHROPIC_API_KEY={ANTHROPIC}\n", ANTHROPIC),
    ],
    "google-api-key": [
        (f"https://maps.googleapis.com/maps/api/js?key={GOOGLE}&callback=init", GOOGLE),
    ],
    "stripe-live-key": [
        (f"stripe.api_key = '{STRIPE_LIVE}'", STRIPE_LIVE),
        (f"restricted: {STRIPE_RESTRICTED}", STRIPE_RESTRICTED),
    ],
    "stripe-test-key": [
        (f"STRIPE_KEY={STRIPE_TEST}", STRIPE_TEST),
    ],
    "private-key-block": [
        (f"Here is the key:\n{PEM_RSA}\nKeep it safe.", PEM_RSA),
        (f"{PEM_OPENSSH}\n", PEM_OPENSSH),
        (f'{{"private_key": "{PEM_IN_JSON}\\n", "client_email": "x"}}', PEM_IN_JSON),
        (f"{PEM_TRUNCATED}\n", PEM_TRUNCATED + "\n"),
    ],
    "jwt": [
        (f"Authorization: Bearer {JWT}\n", JWT),
        (f"?id_token={JWT}&state=1", JWT),
    ],
    "password-assignment": [
        ("DB_PASSWORD=hunter22 ./run.sh", "PASSWORD=hunter22"),
        ('{"password": "s3cr3t-pw"}', 'password": "s3cr3t-pw"'),
        ("Password: Tr0ub4dor&3", "Password: Tr0ub4dor"),
        ("passwd := 'correct9horse'", "passwd := 'correct9horse'"),
        ("mysql --password=Summer2024! -u app", "password=Summer2024!"),
    ],
    "api-key-assignment": [
        ("X-API-Key: 4f9c2b7e1d", "API-Key: 4f9c2b7e1d"),
        ('const apiKey = "abc123def456";', 'apiKey = "abc123def456"'),
        ("WEATHER_API_KEY=9b1deb4d3b7d4bad9bdd", "API_KEY=9b1deb4d3b7d4bad9bdd"),
    ],
    "secret-assignment": [
        ("client_secret = 'q8Zr2mWx9'", "secret = 'q8Zr2mWx9'"),
        ("webhook_secret: whs3cr3tvalue\n", "secret: whs3cr3tvalue"),
    ],
    "secret-key-assignment": [
        ("SECRET_KEY = 'django-insecure-7x!k2p'", "SECRET_KEY = 'django-insecure-7x!k2p'"),
        ('"secretKey": "m4st3rk3y"', 'secretKey": "m4st3rk3y"'),
    ],
    "token-assignment": [
        ('access_token: "at.9f8e7d6c5b4a"', 'token: "at.9f8e7d6c5b4a"'),
        ("https://api.example.com/feed?token=8f3a9c2e71&page=2", "token=8f3a9c2e71"),
    ],
    "url-credentials": [
        ("DATABASE_URL=postgres://app:Tr0ub4dor3@db.internal:5432/app", "://app:Tr0ub4dor3@"),
        ("redis://:s3cretpw1@cache:6379/0", "://:s3cretpw1@"),
    ],
    "email-address": [
        ("Write to ann.lee+news@mail.example.co.uk now.", "ann.lee+news@mail.example.co.uk"),
        ("<bob@example.org>", "bob@example.org"),
        ("gitlab@company.io handles it", "gitlab@company.io"),
        ("wang.li@163.com", "wang.li@163.com"),
    ],
    "phone-number": [
        ("Call +14155552671 now", "+14155552671"),
        ("Office: +44 20 7946 0958.", "+44 20 7946 0958"),
        ("US: +1 (415) 555-2671", "+1 (415) 555-2671"),
        ("(415) 555-2671 is the desk", "(415) 555-2671"),
        ("Call 415-555-2671 or", "415-555-2671"),
        ("Toll free 1-800-555-0199.", "1-800-555-0199"),
        ("Fax 415.555.2671", "415.555.2671"),
        ("Tél. 01 23 45 67 89", "01 23 45 67 89"),
        ("London 020 7946 0958", "020 7946 0958"),
        ("Berlin 030 12345678", "030 12345678"),
        ("Mobiel 06-12345678", "06-12345678"),
    ],
    "iban": [
        (f"Pay to {IBAN_DE}.", IBAN_DE),
        (f"IBAN: {IBAN_GB}", IBAN_GB),
        (f"{IBAN_NO} (Norway)", IBAN_NO),
        (f"Malta: {IBAN_MT}.", IBAN_MT),
    ],
    "credit-card": [
        (f"Card {CARD_VISA}, exp 12/27", CARD_VISA),
        (f"card={CARD_MC}", CARD_MC),
        (f"{CARD_MC2} (2-series)", CARD_MC2),
        (f"Amex {CARD_AMEX}", CARD_AMEX),
        (f"Discover {CARD_DISCOVER}.", CARD_DISCOVER),
    ],
}

# rule id -> drafts that must not produce a hit of that rule (near misses and placeholders)
NEGATIVES: dict[str, list[str]] = {
    "aws-access-key-id": [
        f"The documented example key {AWS_DOC_ID} is fine.",
        "AKIAXXXXXXXXEXAMPLE",  # 15 characters after AKIA
        "AKIA" + fake(UPPER + DIGITS, 15, 40),
        "AKIA" + fake(UPPER + DIGITS, 17, 41),
        "akia" + fake(LOWER + DIGITS, 16, 42),
        "AKIA" + fake(UPPER, 15, 43) + "x",
        "AIDA" + fake(UPPER + DIGITS, 16, 44),  # a user id, not a key
        "ASIA PACIFIC REGION SALES FIGURES",
    ],
    "aws-secret-access-key": [
        f"aws_secret_access_key = {AWS_DOC_SECRET}",
        "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}",
        "aws_secret_access_key = <your-secret-access-key>",
        f"checksum = {AWS_SECRET}",  # a 40-character base64 string without its name
        f"aws_secret_access_key = {AWS_SECRET[:39]}",
    ],
    "github-token": [
        "ghp" + "_" + fake(ALNUM, 35, 45),
        "GITHUB_TOKEN=ghp_your_token_here",
        "ghx" + "_" + fake(ALNUM, 36, 46),
        "github" + "_pat_" + fake(ALNUM, 81, 47),
        "The gh CLI and ghp_ prefixes are documented.",
    ],
    "gitlab-token": [
        "glpat-xxxxxxxxxxxx",
        "glpat" + "-" + fake(ALNUM, 19, 48),
        "PRIVATE-TOKEN: <your_access_token>",
    ],
    "slack-token": [
        "SLACK_BOT_TOKEN=xoxb-your-bot-token",
        "xoxb-123-abc",
        "xoxb-" + "X" * 24,
    ],
    "slack-webhook-url": [
        f"Slack's example: {SLACK_DOC_HOOK}",
        "See https://api.slack.com/messaging/webhooks for setup.",
        "https://hooks.slack.com/services/",
    ],
    "openai-api-key": [
        "OPENAI_API_KEY=sk-" + "x" * 48,
        "OPENAI_API_KEY=sk-proj-XXXXXXXXXXXXXXXXXXXX",
        "pip install scikit-learn  # sk-learn",
        '<div class="sk-fading-circle-spinner-animation-element">',
        "task-" + fake(HEX, 32, 49),
        "sk-" + fake(HEX, 31, 50),
        f"the signature {OPENAI_SIGNATURE} alone",
    ],
    "anthropic-api-key": [
        "ANTHROPIC_API_KEY=sk-ant-api03-xxxx",
        "sk-ant-your-key-here",
    ],
    "google-api-key": [
        "AIza" + fake(ALNUM, 34, 51),
        "key=AIzaSy...",
        "AIzaSyYOUR_API_KEY",
    ],
    "stripe-live-key": [
        "sk" + "_live_" + fake(ALNUM, 23, 52),
        "pk" + "_live_" + fake(ALNUM, 24, 53),  # publishable: meant to be public
        "sk_live_...",
        "desk" + "_live_" + fake(ALNUM, 24, 54),
    ],
    "stripe-test-key": [
        "pk" + "_test_" + fake(ALNUM, 24, 55),
        "sk_test_xxx",
        "task" + "_test_" + "ReturnsTheRightValueForEmptyInput",
    ],
    "private-key-block": [
        "-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----\n<your key here>\n-----END RSA PRIVATE KEY-----",
        pem("PUBLIC KEY"),
        pem("CERTIFICATE"),
        "ssh-ed25519 " + fake(ALNUM + "+/", 68, 56) + " user@host",
    ],
    "jwt": [
        JWT_HEADER,
        f"{JWT_HEADER}.{JWT_PAYLOAD}.",  # unsigned
        f"{JWT_HEADER}.{JWT_PAYLOAD}",
        "eyJhbGciOi...",
    ],
    "password-assignment": [
        "password: ${DB_PASSWORD}",
        "password=<password>",
        'password: "{{ vault_db_password }}"',
        "password: changeme",
        "password: ********",
        "Password: at least 8 characters, 1 digit",
        f"password_hash = {SHA1}",
        "password=[REDACTED]",
        'password = os.environ["DB_PASSWORD"]',
        "password: 12345",
        "passwordless=enabled2",
        "The password is hunter22.",
    ],
    "api-key-assignment": [
        "api_key: <your-api-key>",
        "API_KEY=your_api_key_here",
        "api_key = os.getenv('API_KEY')",
        "apikey: ${API_KEY}",
        "api key rotation: every 90 days",
        "api_key=[REDACTED]",
    ],
    "secret-assignment": [
        "secret: true",
        "kind: Secret",
        "secrets: 3",
        "secret_name: db-creds-2024",
        "secret = {{ vault_secret }}",
    ],
    "secret-key-assignment": [
        "SECRET_KEY = env('SECRET_KEY')",
        "secret_key: <generate-one>",
        "secret_key=[REDACTED]",
    ],
    "token-assignment": [
        "max_tokens=4096",
        "tokens: 128000",
        "token: ${GITHUB_TOKEN}",
        "token_type: bearer",
        "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')",
        '"token": "<token>"',
        "token = 123",
    ],
    "url-credentials": [
        "postgres://user:password@localhost:5432/db",
        "https://user:${TOKEN}@github.com/org/repo.git",
        "https://example.com:8080/path",
        "ssh://git@github.com/org/repo.git",
        "http://localhost:3000/a@b",
    ],
    "email-address": [
        "git clone git@github.com:org/repo.git",
        "user@localhost",
        "@app.route('/')",
        "npm install @scope/pkg@1.2.3",
        "support @ example.com",
        "name at example dot com",
        "background: url(logo@2x.png); srcset: icon@1.5x.webp",
    ],
    "phone-number": [
        "version 1.2.3 and 10.20.3000",
        "released 2024-01-15, 15.01.2024, 01/15/2024",
        "ISBN 978-3-16-148410-0",
        "order 12345678 and 4155552671",
        "192.168.100.200",
        "call 555-0100",
        "SSN 123-45-6789",
        "C++ 2023 and +1 votes and +10%",
        "UTC+05:30, 10:30 - 11:45",
        "1,234,567.89 or 0.123456789",
        "1700000000000 ms",
        "415 555 2671",
        "123-456-7890",  # area code and exchange cannot start with 0 or 1
    ],
    "iban": [
        "DE89 3704 0044",  # too short
        "XX89 3704 0044 0532 0130 00",  # not an IBAN country
        "de89 3704 0044 0532 0130 00",
        "ISO 8601 and RFC 3339",
        "SE12 THIS WILL FAIL",  # the second group has no digit
        SHA1.upper(),
        UUID.upper(),
    ],
    "credit-card": [
        "4111 1111 1111 1112",  # Luhn-invalid
        "1234 5678 9012 3456",
        "4111 1111-1111 1111",  # mixed separators
        "41111111111111111",  # 17 digits
        "411111111111111",  # 15-digit Visa
        UUID,
        "1700000000000",
    ],
}

# Drafts that no rule of either pack may match.
BENIGN = [
    "The quick brown fox jumps over the lazy dog. Revenue grew 12% in Q3 2024.",
    f"sha1 {SHA1}\nsha256 {SHA256}\nuuid {UUID}",
    "pip install critic-cli==1.4.2; node v20.11.1; Python 3.11.7; 10.0.0.1:8080",
    "Released on 2024-03-05T14:22:01Z, again on 05.03.2024 and 03/05/2024.",
    "git checkout 9fceb02 && git clone git@github.com:org/repo.git",
    "password: ${DB_PASSWORD}\napi_key: <your-api-key>\ntoken: \"your-token-here\"\n",
    f"aws_access_key_id = {AWS_DOC_ID}\naws_secret_access_key = {AWS_DOC_SECRET}\n",
    f"webhook: {SLACK_DOC_HOOK}",
    "| order | qty | total |\n|---|---|---|\n| 10042 | 3 | 129.99 |\n| 10043 | 12 | 1,024.00 |",
    "Use scikit-learn (sk-learn) 1.5 and max_tokens=4096 with temperature=0.2.",
    "Call us at our office during business hours; email is on the website.",
]


def _cases(table: dict[str, list]) -> list:
    return [
        pytest.param(rule_id, case, id=f"{rule_id}-{i}")
        for rule_id, cases in table.items()
        for i, case in enumerate(cases)
    ]


# --- the tests --------------------------------------------------------------------------

def test_every_check_is_tested_and_has_the_documented_action() -> None:
    rules = pack_rules()
    assert {rule_id: rule.check.action for rule_id, rule in rules.items()} == ACTIONS
    assert set(POSITIVES) == set(rules)
    assert set(NEGATIVES) == set(rules)


def test_packs_declare_tags_preferences_and_messages() -> None:
    secrets, pii = load_pack(str(SECRETS)), load_pack(str(PII))
    assert secrets.sensitive_tags == {"credentials"}
    assert pii.sensitive_tags == {"pii"}
    for pack, tag in ((secrets, "credentials"), (pii, "pii")):
        assert pack.preferences
        assert all(tag in pref.sensitive_tags for pref in pack.preferences)
        for rule in pack.rules:
            assert rule.content.endswith(".")
            assert rule.check is not None and rule.check.message


def test_all_shipped_packs_load_together() -> None:
    paths = sorted(str(path) for path in (REPO / "rules").glob("*.yaml"))
    assert str(SECRETS) in paths and str(PII) in paths
    load_packs(paths)  # rule ids are unique across every shipped pack


@pytest.mark.parametrize(("rule_id", "case"), _cases(POSITIVES))
def test_true_positive(rule_id: str, case: tuple[str, str]) -> None:
    draft, expected = case
    assert hits_of(rule_id, draft) == [(ACTIONS[rule_id], expected)]


@pytest.mark.parametrize(("rule_id", "draft"), _cases(NEGATIVES))
def test_near_miss(rule_id: str, draft: str) -> None:
    assert hits_of(rule_id, draft) == []


@pytest.mark.parametrize("draft", BENIGN)
def test_benign_draft_has_no_hits(draft: str) -> None:
    assert run_checks(draft, list(pack_rules().values())) == []


def test_hits_carry_rule_action_line_and_column() -> None:
    draft = (
        "Deploy notes\n"
        "\n"
        f"  Café — clé: {AWS_ID}\n"  # non-ASCII before the hit: columns count characters
        f"Ask dana@example.org, or call +44 20 7946 0958.\n"
        f"DB_PASSWORD=hunter22\n"
        f"{PEM_RSA}\n"
        f"bye {CARD_VISA}"
    )
    hits = run_checks(draft, list(pack_rules().values()))
    assert [(h.rule, h.action, h.line, h.column) for h in hits] == [
        ("aws-access-key-id", "refuse", 3, 15),
        ("email-address", "revise", 4, 5),
        ("phone-number", "revise", 4, 31),
        ("password-assignment", "revise", 5, 4),
        ("private-key-block", "refuse", 6, 1),
        ("credit-card", "revise", 6 + PEM_RSA.count("\n") + 1, 5),
    ]
    assert [h.to_dict() for h in hits][0] == {
        "rule": "aws-access-key-id", "action": "refuse", "line": 3, "column": 15}
    assert all(h.message for h in hits)


REDACTIONS = [
    (f"Authorization: Bearer {JWT}\n", "Authorization: Bearer [REDACTED JWT]\n"),
    ("DB_PASSWORD=hunter22 ./run.sh", "DB_password=[REDACTED] ./run.sh"),
    ('{"user": "app", "password": "s3cr3t-pw"}', '{"user": "app", "password=[REDACTED]}'),
    ("X-API-Key: 4f9c2b7e1d\n", "X-api_key=[REDACTED]\n"),
    ("client_secret = 'q8Zr2mWx9'", "client_secret=[REDACTED]"),
    ("SECRET_KEY = 'django-insecure-7x!k2p'\nDEBUG = False",
     "secret_key=[REDACTED]\nDEBUG = False"),
    ('access_token: "at.9f8e7d6c5b4a"', "access_token=[REDACTED]"),
    # The email rule also matches "Tr0ub4dor3@db.internal": overlapping revise matches are
    # replaced as one span, so neither match's text survives (the host goes with it).
    ("DATABASE_URL=postgres://app:Tr0ub4dor3@db.internal:5432/app",
     "DATABASE_URL=postgres://[REDACTED]@:5432/app"),
    ("Write to alice.smith@example.com.", "Write to [EMAIL]."),
    ("Call +1 (415) 555-2671 or 020 7946 0958.", "Call [PHONE] or [PHONE]."),
    (f"Pay to {IBAN_DE} by Friday.", "Pay to [IBAN] by Friday."),
    (f"Card {CARD_AMEX} and {CARD_MC}.", "Card [CARD] and [CARD]."),
    (
        f"Hi Dana,\nyour refund goes to {IBAN_GB}; we will text +14155552671 and\n"
        f"mail dana.k@example.org. Card on file: {CARD_VISA}.\n",
        "Hi Dana,\nyour refund goes to [IBAN]; we will text [PHONE] and\n"
        "mail [EMAIL]. Card on file: [CARD].\n",
    ),
]


@pytest.mark.parametrize(("draft", "expected"), REDACTIONS)
def test_redaction_output(draft: str, expected: str) -> None:
    rules = list(pack_rules().values())
    hits = run_checks(draft, rules)
    assert hits and all(h.action == "revise" for h in hits)
    redacted = redact(draft, hits, rules)
    assert redacted == expected
    assert run_checks(redacted, rules) == []  # a redacted draft is clean


def test_refuse_hits_are_not_redacted() -> None:
    rules = list(pack_rules().values())
    draft = f"key {AWS_ID} and mail bob@example.org"
    assert redact(draft, run_checks(draft, rules), rules) == f"key {AWS_ID} and mail [EMAIL]"


def test_luhn_decides_whether_a_card_shaped_number_counts() -> None:
    card = pack_rules()["credit-card"]
    valid, invalid = "4111 1111 1111 1111", "4111 1111 1111 1112"
    assert luhn_ok(valid) and not luhn_ok(invalid)
    assert card.check is not None and card.check.validate == "luhn"
    assert card.check.regex.search(invalid) is not None  # the pattern matches the shape...
    assert run_checks(f"card {invalid}", [card]) == []  # ...the checksum rejects it
    assert [(h.start, h.end) for h in run_checks(f"card {valid}", [card])] == [(5, 24)]


def write_pack(path: Path, pattern: str, action: str = "flag") -> str:
    path.write_text(
        "version: 1\n"
        "rules:\n"
        "  - id: probe\n"
        "    content: A probe rule.\n"
        "    check:\n"
        f"      pattern: '{pattern}'\n"
        f"      action: {action}\n",
        encoding="utf-8",
    )
    return str(path)


def test_pathological_pattern_runs_in_linear_time(tmp_path: Path) -> None:
    rules = load_pack(write_pack(tmp_path / "slow.yaml", "(a+)+$")).rules
    draft = "a" * (1 << 20)
    start = time.perf_counter()
    missed = run_checks(draft + "b", rules)  # the classic catastrophic case for backtracking
    matched = run_checks(draft, rules)
    elapsed = time.perf_counter() - start
    assert missed == []
    assert [(h.start, h.end) for h in matched] == [(0, len(draft))]
    assert elapsed < 5.0  # a backtracking engine would not finish the first call


@pytest.mark.parametrize(
    "pattern",
    [r"(a)\1", r"(?P<q>[\x22])x(?P=q)", "foo(?=bar)", "foo(?!bar)", "(?<=foo)bar", "(?<!foo)bar"],
    ids=["backreference", "named-backreference", "lookahead", "negative-lookahead",
         "lookbehind", "negative-lookbehind"],
)
def test_non_linear_patterns_are_rejected_with_their_location(
    tmp_path: Path, pattern: str
) -> None:
    path = write_pack(tmp_path / "bad.yaml", pattern)
    with pytest.raises(RuleError) as caught:
        load_pack(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:6: rules[0].check.pattern: ")
    assert "RE2" in message


def test_overlapping_revise_matches_leave_nothing_in_clear(tmp_path):
    pack = tmp_path / "overlap.yaml"
    pack.write_text(
        "rules:\n"
        "  - {id: a, content: a, check: {pattern: 'ab', action: revise, replace: '[A]'}}\n"
        "  - {id: b, content: b, check: {pattern: 'bcdef', action: revise, replace: '[B]'}}\n",
        encoding="utf-8")
    rules = load_pack(str(pack)).rules
    text = "xabcdefy"
    assert redact(text, run_checks(text, rules), rules) == "x[A]y"


def test_luhn_ignores_non_ascii_digits():
    from critic_cli.checks import luhn_ok

    assert luhn_ok("4111 1111 1111 1111")
    assert not luhn_ok("²²²²")


def test_locations_on_a_draft_of_many_lines(tmp_path):
    pack = tmp_path / "p.yaml"
    pack.write_text("rules:\n  - {id: x, content: x, check: {pattern: 'NEEDLE', action: flag}}\n",
                    encoding="utf-8")
    rules = load_pack(str(pack)).rules
    text = "\n" * 200_000 + "ab NEEDLE\n" + "c" * 10 + "NEEDLE"
    hits = run_checks(text, rules)
    assert [(h.line, h.column) for h in hits] == [(200_001, 4), (200_002, 11)]


def test_shipped_packs_load_by_name(run):
    result = run("rules", "check", "secrets", "pii", "default")
    assert result.exit_code == 0, result.stderr
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [
        "ok secrets", "ok pii", "ok default"]
