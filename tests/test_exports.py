"""Drift guards: the package's exports resolve, and importing it stays light."""

from __future__ import annotations

import subprocess
import sys

import critic_cli


def test_every_name_in_all_resolves():
    for name in critic_cli.__all__:
        assert getattr(critic_cli, name) is not None, name


def test_the_front_door_reviews_a_draft():
    from critic_cli import Settings, review

    record = review.review("key AKIA" + "Q7" * 8, {"activated_nodes": [{"score": 0.9}]},
                           Settings(rules=("secrets",)))
    assert record.verdict == "refuse"
    assert record.to_dict()["checks"][0]["rule"] == "aws-access-key-id"


def test_unknown_attribute_is_an_attribute_error():
    try:
        critic_cli.nope  # noqa: B018
    except AttributeError as exc:
        assert "nope" in str(exc)
    else:
        raise AssertionError("critic_cli.nope resolved")


def test_a_gate_only_review_imports_neither_openai_nor_rich():
    code = ("import sys; from critic_cli.cli import main; sys.argv = ['critic', 'review', "
            "'-', '--format', 'json', '--no-config'];\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('openai', 'rich', 'asyncio', 'pydantic') "
            "if m in sys.modules), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], input=b"hello", capture_output=True,
                            check=True)
    assert result.stderr.decode().strip().splitlines()[-1] == "[]"
