"""The happy paths of the command line: review, explain, rules, schema, init, config."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from jsonschema import Draft202012Validator

from critic_cli import __version__
from critic_cli.cli import app
from critic_cli.record import json_schema
from critic_cli.signals import compute_confidence
from tests.conftest import REPO, Run, Write

EXAMPLES = REPO / "examples"
DEFAULT_PACK = str(REPO / "rules" / "default.yaml")
STRONG_LOG = {"activated_nodes": [{"score": 1.0}], "inference_paths": [["a"]] * 3,
              "traversed_edges": [{"weight": 5.0}]}


def example(name: str) -> tuple[str, str]:
    """Return the draft and activation paths of a shipped example."""
    return str(EXAMPLES / f"{name}.txt"), str(EXAMPLES / f"{name}.activation.json")


def review_json(run: Run, *args: str, input: str | bytes | None = None,
                exit_code: int = 0) -> dict[str, Any]:
    result = run("review", *args, "--format", "json", input=input)
    assert result.exit_code == exit_code, result.output
    assert result.stderr == ""
    record: dict[str, Any] = json.loads(result.stdout)
    return record


def seed_record(confidence: float, verdict: str, hit: str | None, reason: str | None,
                source: str) -> dict[str, Any]:
    return {
        "verdict": verdict, "confidence_before": confidence, "sensitive_tag_hit": hit,
        "revised_draft": None, "refusal_message": None, "matched_preferences": [],
        "reflection_latency_ms": 0.0, "provenance": "critic-reflection-v1", "source": source,
        "gate": {"fired": reason is not None, "reason": reason, "threshold": 0.6},
        "reflection": {"ran": False, "model": None, "cached": False, "error": None},
        "checks": [], "rules_used": [], "error": None,
    }


# -- the three shipped examples ------------------------------------------------------------------


def test_example_approved(run: Run) -> None:
    draft, log = example("approved")
    record = review_json(run, draft, "-a", log, "-r", DEFAULT_PACK)
    # 0.4 × (0.95 + 0.9 + 0.8) / 3 + 0.3 × 1 + 0.3 × (4.5 + 4 + 3.5) / 3 / 5
    assert record["confidence_before"] == pytest.approx(0.4 * 2.65 / 3 + 0.3 + 0.24, abs=1e-12)
    assert record["confidence_before"] == 0.8933333333333333
    assert record == seed_record(0.8933333333333333, "approve", None, None, draft)


def test_example_low_confidence(run: Run) -> None:
    draft, log = example("low-confidence")
    record = review_json(run, draft, "-a", log, "-r", DEFAULT_PACK)
    # 0.4 × 0.35 + 0.3 × 1/3 + 0.3 × 1.5/5 = 0.14 + 0.1 + 0.09
    assert record["confidence_before"] == pytest.approx(0.33, abs=1e-12)
    assert record == seed_record(record["confidence_before"], "flagged", None,
                                 "low_confidence", draft)


def test_example_sensitive(run: Run) -> None:
    draft, log = example("sensitive")
    record = review_json(run, draft, "-a", log, "-r", DEFAULT_PACK)
    # 0.4 × 0.875 + 0.3 × 1 + 0.3 × 4.8/5 = 0.35 + 0.3 + 0.288
    assert record["confidence_before"] == pytest.approx(0.938, abs=1e-12)
    assert record == seed_record(record["confidence_before"], "flagged", "credentials",
                                 "sensitive_tag", draft)


@pytest.mark.parametrize("name", ["approved", "low-confidence", "sensitive"])
def test_record_confidence_is_the_gate_function(run: Run, name: str) -> None:
    from critic_cli.inputs import read_activation

    draft, log = example(name)
    record = review_json(run, draft, "-a", log)
    assert record["confidence_before"] == compute_confidence(read_activation(log))


def test_sensitive_example_without_the_pack_has_no_hit(run: Run) -> None:
    draft, log = example("sensitive")
    record = review_json(run, draft, "-a", log)
    assert record["sensitive_tag_hit"] is None
    assert record["verdict"] == "approve"
    record = review_json(run, draft, "-a", log, "-t", "ops")
    assert record["sensitive_tag_hit"] == "ops"


# -- drafts: stdin, BOM, no activation ---------------------------------------------------------


def test_dash_reads_stdin(run: Run) -> None:
    record = review_json(run, "-", input="A draft from a pipe.\n")
    assert record["source"] == "<stdin>"
    assert record["confidence_before"] == 0.5


def test_no_path_reads_stdin_when_it_is_not_a_terminal(run: Run) -> None:
    result = run("review", "--apply", input="piped\n")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "piped\n", "")


def test_bom_is_dropped(run: Run, write: Write) -> None:
    write("bom.txt", b"\xef\xbb\xbfHello.\n")
    result = run("review", "bom.txt", "--apply")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "Hello.\n", "")
    result = run("review", "-", "--apply", input=b"\xef\xbb\xbfHi")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "Hi", "")


def test_no_activation_is_a_cold_start(run: Run, write: Write) -> None:
    write("draft.txt", "x")
    record = review_json(run, "draft.txt")
    assert record == seed_record(0.5, "flagged", None, "low_confidence", "draft.txt")


def test_resolved_activation_map_is_read(run: Run, write: Write) -> None:
    write("draft.txt", "x")
    write("raw.json", json.dumps({"activation": STRONG_LOG}))
    write("wrapped.json", json.dumps({"activation": {"value": STRONG_LOG}}))
    write("none.json", json.dumps({"activation": None}))
    assert review_json(run, "draft.txt", "-a", "raw.json")["confidence_before"] == 1.0
    assert review_json(run, "draft.txt", "-a", "wrapped.json")["confidence_before"] == 1.0
    assert review_json(run, "draft.txt", "-a", "none.json")["confidence_before"] == 0.5


def test_threshold_at_the_confidence_approves(run: Run, write: Write) -> None:
    write("draft.txt", "x")
    assert review_json(run, "draft.txt", "--threshold", "0.5")["verdict"] == "approve"
    record = review_json(run, "draft.txt", "--threshold", "0.5000001")
    assert record["verdict"] == "flagged"
    assert record["gate"] == {"fired": True, "reason": "low_confidence", "threshold": 0.5000001}


# -- exit codes and --apply --------------------------------------------------------------------


def test_fail_on(run: Run) -> None:
    draft, log = example("low-confidence")
    for fail_on, code in [("flagged", 1), ("approve", 1), ("revise", 0), ("never", 0)]:
        result = run("review", draft, "-a", log, "--fail-on", fail_on, "-f", "json")
        assert result.exit_code == code, (fail_on, result.output)
        assert json.loads(result.stdout)["verdict"] == "flagged"
        assert result.stderr == ""
    approved, approved_log = example("approved")
    result = run("review", approved, "-a", approved_log, "--fail-on", "flagged", "-f", "json")
    assert result.exit_code == 0


@pytest.mark.parametrize("name", ["approved", "low-confidence", "sensitive"])
def test_apply_prints_the_draft_verbatim(run: Run, name: str) -> None:
    draft, log = example(name)
    result = run("review", draft, "-a", log, "-r", DEFAULT_PACK, "--apply")
    assert result.exit_code == 0
    assert result.stderr == ""
    assert result.stdout == Path(draft).read_text(encoding="utf-8")


def test_apply_keeps_whitespace_and_unicode(run: Run, write: Write) -> None:
    text = "  indented\r\n\ttab — ünïcode ✓\n\n"
    write("draft.txt", text.encode("utf-8"))
    write("strong.json", json.dumps(STRONG_LOG))
    result = run("review", "draft.txt", "-a", "strong.json", "--apply")
    assert result.exit_code == 0
    assert result.stdout_bytes == text.encode("utf-8")


def test_apply_with_a_refuse_check_prints_the_message(run: Run, write: Write) -> None:
    write("pack.yaml", "rules:\n  - id: aws-key\n    content: No AWS keys.\n    check:\n"
                       "      pattern: 'AKIA[0-9A-Z]{16}'\n      action: refuse\n"
                       "      message: The draft contains an AWS access key.\n")
    write("draft.txt", "key: AKIAABCDEFGHIJKLMNOP\n")
    result = run("review", "draft.txt", "-r", "pack.yaml", "--apply")
    assert result.exit_code == 1  # refuse ≥ revise, the default --fail-on
    assert result.stdout == "The draft contains an AWS access key."
    record = review_json(run, "draft.txt", "-r", "pack.yaml", exit_code=1)
    assert record["verdict"] == "refuse"
    assert record["checks"] == [{"rule": "aws-key", "action": "refuse", "line": 1, "column": 6}]
    assert "AKIAABCDEFGHIJKLMNOP" not in json.dumps(record)


def test_output_file(run: Run, write: Write) -> None:
    write("draft.txt", "x")
    result = run("review", "draft.txt", "-o", "out.json")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    assert json.loads(Path("out.json").read_text())["source"] == "draft.txt"


# -- schema ------------------------------------------------------------------------------------


def test_schema_is_a_valid_json_schema(run: Run) -> None:
    result = run("schema")
    assert (result.exit_code, result.stderr) == (0, "")
    schema = json.loads(result.stdout)
    Draft202012Validator.check_schema(schema)
    assert schema == json_schema()


def test_every_record_validates_against_the_schema(run: Run, write: Write) -> None:
    validator = Draft202012Validator(json_schema())
    records = []
    for name in ("approved", "low-confidence", "sensitive"):
        draft, log = example(name)
        records.append(review_json(run, draft, "-a", log, "-r", DEFAULT_PACK))
    write("pack.yaml", "rules:\n  - id: key\n    content: c\n    check:\n"
                       "      pattern: 'SECRET'\n      action: revise\n"
                       "  - id: word\n    content: c\n    check:\n"
                       "      pattern: 'flagme'\n      action: flag\n"
                       "  - id: stop\n    content: c\n    check:\n"
                       "      pattern: 'STOP'\n      action: refuse\n")
    write("drafts/a.txt", "a SECRET here\n")
    write("drafts/b.txt", "please flagme\n")
    write("drafts/c.txt", "STOP\n")
    write("drafts/d.md", "")
    write("drafts/e.txt", b"\xff\xfe not utf-8")
    result = run("review", "drafts", "-r", "pack.yaml", "-f", "jsonl")
    lines = result.stdout.splitlines()
    assert len(lines) == 5
    records += [json.loads(line) for line in lines]
    assert [r["verdict"] for r in records[3:]] == ["revise", "flagged", "refuse", "flagged",
                                                   "error"]
    assert records[3]["revised_draft"] == "a [REDACTED] here\n"
    assert records[4]["gate"]["reason"] == "rule"
    for record in records:
        validator.validate(record)


# -- explain -----------------------------------------------------------------------------------


def explain_lines(run: Run, *args: str) -> list[str]:
    result = run("explain", *args)
    assert (result.exit_code, result.stderr) == (0, "")
    return result.stdout.splitlines()


def has_line(lines: list[str], pattern: str) -> bool:
    return any(re.fullmatch(pattern, line.strip()) for line in lines)


def test_explain_text_low_confidence(run: Run) -> None:
    _, log = example("low-confidence")
    lines = explain_lines(run, "-a", log, "-r", DEFAULT_PACK)
    assert has_line(lines, r"seed strength\s+0\.3500\s+mean score of 2 activated nodes")
    assert has_line(lines, r"path coverage\s+0\.3333\s+min\(1, 1 paths / 3\)")
    assert has_line(lines, r"edge-weight factor\s+0\.3000\s+min\(1, mean weight of 1 edges / 5\)")
    assert has_line(lines, r"weighted sum\s+0\.3300\s+0\.4 × 0\.3500 \+ 0\.3 × 0\.3333 \+ "
                           r"0\.3 × 0\.3000")
    assert has_line(lines, r"confidence\s+0\.3300\s+clamp to \[0, 1\]: unchanged")
    assert has_line(lines, r"sensitive hit\s+none\s+tags checked: credentials, .*")
    assert has_line(lines, r"threshold\s+0\.6000\s+fires when confidence < threshold")
    assert lines[-1] == "gate fires — confidence 0.3300 < threshold 0.6000"


def test_explain_text_sensitive_hit(run: Run) -> None:
    _, log = example("sensitive")
    lines = explain_lines(run, "-a", log, "-r", DEFAULT_PACK)
    assert has_line(lines, r"sensitive hit\s+credentials\s+tags checked: .*")
    assert lines[-1] == "gate fires — sensitive tag 'credentials'"


def test_explain_text_clamp_and_cold_start(run: Run, write: Write) -> None:
    write("big.json", json.dumps({"activated_nodes": [{"score": 3.0}]}))
    lines = explain_lines(run, "-a", "big.json")
    assert has_line(lines, r"weighted sum\s+1\.2000\s+.*")
    assert has_line(lines, r"confidence\s+1\.0000\s+clamped to \[0, 1\]")
    assert lines[-1] == ("gate does not fire — confidence 1.0000 ≥ threshold 0.6000 and no "
                         "sensitive hit")
    lines = explain_lines(run)
    assert has_line(lines, r"confidence\s+0\.5000\s+cold start: the log is empty")
    write("paths.json", json.dumps({"inference_paths": [["a"]]}))
    lines = explain_lines(run, "-a", "paths.json")
    assert has_line(lines, r"confidence\s+0\.5000\s+cold start: no activated nodes")


def explain_json(run: Run, *args: str, input: str | None = None) -> dict[str, Any]:
    result = run("explain", *args, "--format", "json", input=input)
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_explain_json_values(run: Run) -> None:
    _, log = example("approved")
    data = explain_json(run, "-a", log)
    assert data == {
        "seed_strength": pytest.approx(2.65 / 3, abs=1e-12),
        "path_coverage": 1.0,
        "edge_weight_factor": pytest.approx(0.8, abs=1e-12),
        "weighted_sum": 0.8933333333333333,
        "confidence": 0.8933333333333333,
        "sensitive_tag_hit": None,
        "threshold": 0.6,
        "fires": False,
        "why": "confidence 0.8933 ≥ threshold 0.6000 and no sensitive hit",
    }


def test_explain_json_agrees_with_review(run: Run) -> None:
    for name in ("approved", "low-confidence", "sensitive"):
        draft, log = example(name)
        data = explain_json(run, "-a", log, "-r", DEFAULT_PACK)
        record = review_json(run, draft, "-a", log, "-r", DEFAULT_PACK)
        assert data["confidence"] == record["confidence_before"]
        assert data["sensitive_tag_hit"] == record["sensitive_tag_hit"]
        assert data["fires"] == record["gate"]["fired"]
        assert data["threshold"] == record["gate"]["threshold"]


def test_explain_json_threshold_tags_and_stdin(run: Run) -> None:
    log = json.dumps({"activated_nodes": [{"score": 1.25, "properties": {"tags": ["pii"]}}]})
    data = explain_json(run, "-a", "-", "--threshold", "0.5", input=log)
    assert (data["confidence"], data["fires"], data["sensitive_tag_hit"]) == (0.5, False, None)
    data = explain_json(run, "-a", "-", "--threshold", "0.5", "-t", "pii", input=log)
    assert (data["fires"], data["sensitive_tag_hit"]) == (True, "pii")
    assert data["why"] == "sensitive tag 'pii'"


def test_explain_json_cold_start(run: Run) -> None:
    data = explain_json(run)
    assert data == {
        "seed_strength": None, "path_coverage": None, "edge_weight_factor": None,
        "weighted_sum": None, "confidence": 0.5, "sensitive_tag_hit": None,
        "threshold": 0.6, "fires": True, "why": "confidence 0.5000 < threshold 0.6000",
    }


def test_explain_json_is_strict_json_when_sums_overflow(run: Run, write: Write) -> None:
    write("huge.json", json.dumps({
        "activated_nodes": [{"score": 1e308}, {"score": 1e308}],
        "traversed_edges": [{"weight": -1e308}, {"weight": -1e308}],
    }))
    result = run("explain", "-a", "huge.json", "--format", "json")
    assert "Traceback" not in result.output
    if result.exit_code == 2:  # rejecting such a log is fine too
        assert result.stdout == ""
        assert result.stderr.startswith("critic: error: huge.json: ")
        return
    assert result.exit_code == 0

    def reject(name: str) -> None:
        raise AssertionError(f"{name} in JSON output")

    json.loads(result.stdout, parse_constant=reject)


# -- rules check -------------------------------------------------------------------------------


def test_rules_check_good_packs(run: Run) -> None:
    result = run("rules", "check", DEFAULT_PACK)
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == f"ok {DEFAULT_PACK}: 6 preferences, 6 rules, 0 checks\n"


def test_rules_check_bad_pack(run: Run, write: Write) -> None:
    write("good.yaml", "rules:\n  - id: a\n    content: b\n")
    write("bad.yaml", "rules:\n  - id: a\n    content: b\n    foo: 1\n")
    result = run("rules", "check", "good.yaml", "bad.yaml")
    assert result.exit_code == 2
    assert result.stdout == "ok good.yaml: 0 preferences, 1 rules, 0 checks\n"
    assert result.stderr == ("critic: error: bad.yaml:4: rules[0].foo: unknown key "
                             "(expected one of: id, content, always, check)\n")
    assert "Traceback" not in result.output


def test_rules_check_duplicate_across_packs(run: Run, write: Write) -> None:
    write("one.yaml", "rules:\n  - id: a\n    content: b\n")
    write("two.yaml", "rules:\n  - id: a\n    content: c\n")
    result = run("rules", "check", "one.yaml", "two.yaml")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("critic: error: two.yaml")
    assert "duplicate rule id 'a'" in result.stderr
    assert "one.yaml" in result.stderr


def test_rules_check_missing_file(run: Run) -> None:
    result = run("rules", "check", "nope.yaml")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.startswith("critic: error: nope.yaml: ")


# -- init and config discovery -----------------------------------------------------------------


def test_init_writes_files_that_check_and_are_discovered(
    run: Run, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    os.mkdir("project")
    result = run("init", "project")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == (f"wrote {os.path.join('project', '.critic.yaml')}\n"
                             f"wrote {os.path.join('project', 'critic-rules.yaml')}\n")
    result = run("rules", "check", "project/critic-rules.yaml")
    assert result.exit_code == 0, result.output
    write("project/sub/leak.txt", "Use AKIAABCDEFGHIJKLMNOP to log in.\n")
    write("project/sub/fine.txt", "Hello.\n")
    monkeypatch.chdir("project/sub")
    record = review_json(run, "leak.txt", exit_code=1)
    assert record["verdict"] == "refuse"
    assert record["refusal_message"] == "The draft contains an AWS access key id."
    assert record["checks"] == [{"rule": "aws-access-key", "action": "refuse",
                                 "line": 1, "column": 5}]
    record = review_json(run, "fine.txt")
    assert record["verdict"] == "flagged"
    # --no-config ignores the discovered file: no check, so no refusal.
    result = run("review", "leak.txt", "--no-config", "-f", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["checks"] == []


def test_init_refuses_to_overwrite_without_force(run: Run, write: Write) -> None:
    write(".critic.yaml", "threshold: 0.3\n")
    result = run("init")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"critic: error: {os.path.join('.', '.critic.yaml')} exists; " \
                            "use --force to overwrite\n"
    assert Path(".critic.yaml").read_text() == "threshold: 0.3\n"
    assert not Path("critic-rules.yaml").exists()
    result = run("init", "--force")
    assert result.exit_code == 0
    assert "threshold: 0.6" in Path(".critic.yaml").read_text()


def test_init_into_a_missing_folder(run: Run) -> None:
    result = run("init", "nowhere")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "critic: error: nowhere: no such directory\n"


# -- precedence: flag > environment > config > default -----------------------------------------


def test_threshold_from_config_then_flag(run: Run, write: Write) -> None:
    write("draft.txt", "x")  # cold start: confidence 0.5
    assert review_json(run, "draft.txt")["gate"]["threshold"] == 0.6
    write(".critic.yaml", "threshold: 0.5\n")
    record = review_json(run, "draft.txt")
    assert (record["verdict"], record["gate"]["threshold"]) == ("approve", 0.5)
    record = review_json(run, "draft.txt", "--threshold", "0.7")
    assert (record["verdict"], record["gate"]["threshold"]) == ("flagged", 0.7)
    record = review_json(run, "draft.txt", "--no-config")
    assert record["gate"]["threshold"] == 0.6
    write("other.yaml", "threshold: 0.25\n")
    record = review_json(run, "draft.txt", "--config", "other.yaml")
    assert record["gate"]["threshold"] == 0.25


def test_fail_on_from_config_then_flag(run: Run, write: Write) -> None:
    write("draft.txt", "x")
    write(".critic.yaml", "fail_on: flagged\n")
    assert run("review", "draft.txt", "-f", "json").exit_code == 1
    assert run("review", "draft.txt", "-f", "json", "--fail-on", "never").exit_code == 0


def test_rules_in_config_are_relative_to_the_config(
    run: Run, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("project/.critic.yaml", "rules: [packs/team.yaml]\n")
    write("project/packs/team.yaml", "sensitive_tags: [secret]\n")
    write("project/deep/down/draft.txt", "x")
    write("project/deep/down/log.json", json.dumps(
        {**STRONG_LOG, "activated_nodes": [{"score": 1.0, "tags": ["secret"]}]}))
    write("packs/team.yaml", "sensitive_tags: [wrong-pack]\n")  # a decoy beside the cwd
    monkeypatch.chdir("project/deep/down")
    record = review_json(run, "draft.txt", "-a", "log.json")
    assert (record["verdict"], record["sensitive_tag_hit"]) == ("flagged", "secret")


def dry_run_body(run: Run, *args: str) -> tuple[str, dict[str, Any]]:
    result = run("review", "draft.txt", "--dry-run", *args)
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    request = json.loads(result.stdout)
    return request["url"], request["body"]


def test_model_precedence_flag_env_config(
    run: Run, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("draft.txt", "x")  # cold start: the gate fires, so a request is shown
    write(".critic.yaml", "model: config-model\nbase_url: http://127.0.0.1:9/config\n")
    url, body = dry_run_body(run)
    assert (url, body["model"]) == ("http://127.0.0.1:9/config/chat/completions",
                                    "config-model")
    monkeypatch.setenv("CRITIC_MODEL", "env-model")
    monkeypatch.setenv("CRITIC_BASE_URL", "http://127.0.0.1:9/env")
    url, body = dry_run_body(run)
    assert (url, body["model"]) == ("http://127.0.0.1:9/env/chat/completions", "env-model")
    url, body = dry_run_body(run, "--model", "flag-model", "--base-url", "http://127.0.0.1:9/f")
    assert (url, body["model"]) == ("http://127.0.0.1:9/f/chat/completions", "flag-model")


def test_dry_run_never_shows_the_api_key(
    run: Run, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("draft.txt", "x")
    monkeypatch.setenv("CRITIC_API_KEY", "sk-critic-test-0123456789")
    monkeypatch.setenv("MY_KEY", "sk-mine-test-9876543210")
    for extra in ((), ("--api-key-env", "MY_KEY")):
        result = run("review", "draft.txt", "--dry-run", "--model", "m", *extra)
        assert result.exit_code == 0
        assert "sk-critic-test" not in result.output
        assert "sk-mine-test" not in result.output


def test_dry_run_without_a_model_is_a_usage_error(run: Run, write: Write) -> None:
    write("draft.txt", "x")
    result = run("review", "draft.txt", "--dry-run")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.startswith("critic: error: --dry-run")


def test_gate_only_never_calls_a_model(run: Run, write: Write) -> None:
    write("draft.txt", "x")
    draft, log = example("approved")
    record = review_json(run, draft, "-a", log, "--model", "m",
                         "--base-url", "http://127.0.0.1:9/v1")
    assert record["verdict"] == "approve"
    assert record["reflection"]["ran"] is False
    record = review_json(run, "draft.txt", "--model", "m", "--no-reflect")
    assert (record["verdict"], record["reflection"]["ran"]) == ("flagged", False)


def test_a_closed_pipe_is_not_an_error(write: Write) -> None:
    for i in range(800):
        write(f"many/d{i:04}.txt", f"draft {i}\n")
    command = [sys.executable, "-m", "critic_cli", "review", "many", "-f", "jsonl"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()  # the reader goes away, as `| head -1` does
        stderr = process.stderr.read().decode()
        code = process.wait(timeout=60)
    assert json.loads(first)["source"] == os.path.join("many", "d0000.txt")
    assert (code, stderr) == (0, "")


# -- version, help and the README --------------------------------------------------------------


def test_version(run: Run) -> None:
    result = run("--version")
    assert (result.exit_code, result.stdout, result.stderr) == (0, f"critic {__version__}\n", "")


def command_paths() -> list[tuple[str, ...]]:
    """Return every command of the app as its words after ``critic``, groups included."""
    paths: list[tuple[str, ...]] = []

    def walk(command: Any, prefix: tuple[str, ...]) -> None:
        if not hasattr(command, "list_commands"):
            return
        context = typer.Context(command)
        for name in sorted(command.list_commands(context)):  # lazy commands included
            paths.append((*prefix, name))
            walk(command.get_command(context, name), (*prefix, name))

    walk(typer.main.get_command(app), ())
    return paths


def test_the_expected_commands_are_registered() -> None:
    names = {" ".join(path) for path in command_paths()}
    assert {"review", "explain", "rules", "rules check", "schema", "init", "eval", "batch",
            "batch prepare", "batch collect", "batch submit", "batch status",
            "batch fetch"} <= names


@pytest.mark.parametrize("path", [(), *command_paths()], ids=lambda p: " ".join(p) or "critic")
def test_every_command_has_help(run: Run, path: tuple[str, ...]) -> None:
    result = run(*path, "--help")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Usage: ")
    assert result.stderr == ""
    command: Any = typer.main.get_command(app)
    for word in path:
        command = command.get_command(typer.Context(command), word)
    assert command.help or command.short_help or command.callback.__doc__


def test_every_command_appears_in_the_readme() -> None:
    readme = REPO / "README.md"
    if not readme.exists():
        pytest.skip("README.md is not written yet")
    text = readme.read_text(encoding="utf-8")
    missing = [" ".join(path) for path in command_paths()
               if f"critic {' '.join(path)}" not in text]
    assert missing == []


def test_rules_check_prints_ok_only_for_files_that_pass(run: Run, write: Write) -> None:
    write("one.yaml", "rules:\n  - {id: a, content: x}\n")
    write("two.yaml", "rules:\n  - {id: b, content: y}\n  - {id: a, content: z}\n")
    result = run("rules", "check", "one.yaml", "two.yaml")
    assert result.exit_code == 2
    assert result.stdout == "ok one.yaml: 0 preferences, 1 rules, 0 checks\n"
    assert result.stderr == ("critic: error: two.yaml:3: rules: duplicate rule id 'a' "
                             "(also in one.yaml)\n")


def test_the_readme_set_up_output_is_what_critic_prints(run: Run,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    repo = Path(__file__).resolve().parent.parent
    readme = (repo / "README.md").read_text(encoding="utf-8")
    shown = readme.split("The first prints", 1)[1].split("```", 2)[1].splitlines()[1:-3]
    drafts = sorted(str(p.relative_to(repo)) for p in (repo / "examples").glob("*.txt"))
    monkeypatch.chdir(repo)
    result = run("review", *drafts, "--rules", "rules/default.yaml", "--rules",
                 "rules/secrets.yaml", "--format", "text", "--fail-on", "never")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[:len(shown)] == shown
