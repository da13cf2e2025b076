"""Every bad input: exit 2, one `critic: error:` line naming file and place, no traceback."""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from typer.testing import Result

from critic_cli.errors import InputError
from tests.conftest import Run, Write

DRAFT = "draft.txt"


def assert_error(result: Result, expected: str | re.Pattern[str]) -> str:
    """Check exit 2, nothing on stdout, and exactly one error line on stderr; return it."""
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.endswith("\n")
    assert result.stderr.count("\n") == 1, result.stderr
    line = result.stderr[:-1]
    assert line.startswith("critic: error: ")
    if isinstance(expected, str):
        assert line == f"critic: error: {expected}"
    else:
        assert expected.fullmatch(line[len("critic: error: "):]), line
    return line


@pytest.fixture
def draft(write: Write) -> str:
    return write(DRAFT, "A short draft.\n")


def review(run: Run, *args: str) -> Result:
    return run("review", *args, "-f", "json")


# -- drafts ------------------------------------------------------------------------------------


def test_missing_draft(run: Run) -> None:
    assert_error(review(run, "missing.txt"), "missing.txt: no such file or directory")


def test_activation_that_is_a_directory(run: Run, draft: str) -> None:
    os.mkdir("logs")
    assert_error(review(run, draft, "--activation", "logs"),
                 "logs: is a directory, expected an activation log file")


def test_rules_that_is_a_directory(run: Run, draft: str) -> None:
    os.mkdir("packs")
    assert_error(review(run, draft, "--rules", "packs"),
                 re.compile(r"packs: cannot read rule pack: .+"))


def test_apply_with_a_directory(run: Run, write: Write) -> None:
    write("drafts/a.txt", "x")
    assert_error(run("review", "drafts", "--apply"), "--apply takes exactly one draft")


def test_draft_not_utf8(run: Run, write: Write) -> None:
    write("latin1.txt", "caf\xe9\n".encode("latin-1"))
    assert_error(review(run, "latin1.txt"),
                 "latin1.txt: draft is not UTF-8 (invalid byte at offset 3)")


def test_draft_with_a_nul_byte(run: Run, write: Write) -> None:
    write("nul.txt", b"ab\x00cd")
    assert_error(review(run, "nul.txt"), "nul.txt: draft contains a NUL byte at offset 2")


def test_draft_over_max_bytes(run: Run, write: Write) -> None:
    write("big.txt", "x" * 11)
    assert_error(review(run, "big.txt", "--max-bytes", "10"),
                 "big.txt: draft is larger than --max-bytes (10 bytes)")
    assert review(run, "big.txt", "--max-bytes", "11").exit_code == 0


def test_stdin_over_max_bytes(run: Run) -> None:
    result = run("review", "-", "--max-bytes", "4", "-f", "json", input="hello")
    assert_error(result, "<stdin>: draft is larger than --max-bytes (4 bytes)")


def test_stdin_not_utf8(run: Run) -> None:
    result = run("review", "-", "-f", "json", input=b"\xff\xfe")
    assert_error(result, "<stdin>: draft is not UTF-8 (invalid byte at offset 0)")


def test_an_empty_draft_is_valid(run: Run, write: Write) -> None:
    write("empty.txt", "")
    result = review(run, "empty.txt")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    record = json.loads(result.stdout)
    assert record["source"] == "empty.txt"
    assert record["confidence_before"] == 0.5
    assert record["verdict"] == "flagged"  # cold start 0.5 < 0.6, no model


# -- activation logs ---------------------------------------------------------------------------


def activation(run: Run, write: Write, draft: str, text: str) -> Result:
    write("log.json", text)
    return review(run, draft, "--activation", "log.json")


def test_activation_missing(run: Run, draft: str) -> None:
    assert_error(review(run, draft, "-a", "nope.json"), "nope.json: no such file")


def test_activation_not_json(run: Run, write: Write, draft: str) -> None:
    result = activation(run, write, draft, '{\n  "activated_nodes": [,]\n}\n')
    assert_error(result, "log.json:2:23: not valid JSON: Expecting value")


def test_activation_a_list(run: Run, write: Write, draft: str) -> None:
    assert_error(activation(run, write, draft, "[]"),
                 "log.json: $: expected an object, got an array")


def test_activation_lists_that_are_not_lists(run: Run, write: Write, draft: str) -> None:
    assert_error(activation(run, write, draft, '{"inference_paths": 3}'),
                 "log.json: $.inference_paths: expected an array, got a number")
    assert_error(activation(run, write, draft, '{"activated_nodes": {"a": 1}}'),
                 "log.json: $.activated_nodes: expected an array, got an object")


def test_a_node_that_is_not_an_object(run: Run, write: Write, draft: str) -> None:
    text = '{"activated_nodes": [{"score": 1}, "n2"]}'
    assert_error(activation(run, write, draft, text),
                 "log.json: $.activated_nodes[1]: expected an object, got a string")


def test_an_edge_that_is_not_an_object(run: Run, write: Write, draft: str) -> None:
    text = '{"activated_nodes": [{"score": 1}], "traversed_edges": [[1, 2]]}'
    assert_error(activation(run, write, draft, text),
                 "log.json: $.traversed_edges[0]: expected an object, got an array")


@pytest.mark.parametrize(("value", "described"), [
    ('"0.9"', "a string '0.9'"),
    ("true", "a boolean True"),
    ("false", "a boolean False"),
    ("1e999", "a number inf"),
    ("-1e999", "a number -inf"),
    ("[1]", "an array [1]"),
])
def test_a_score_that_is_not_a_finite_number(
    run: Run, write: Write, draft: str, value: str, described: str
) -> None:
    text = f'{{"activated_nodes": [{{"score": 0.5}}, {{"score": {value}}}]}}'
    assert_error(activation(run, write, draft, text),
                 f"log.json: $.activated_nodes[1].score: expected a finite number, got "
                 f"{described}")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_literals_name_their_json_path(
    run: Run, write: Write, draft: str, literal: str
) -> None:
    text = f'{{"activated_nodes": [{{"score": 0.5}}, {{"score": {literal}}}]}}'
    assert_error(activation(run, write, draft, text),
                 f"log.json: $.activated_nodes[1].score: expected a finite number, got "
                 f"{literal} (JSON has no NaN or Infinity)")


def test_a_weight_that_is_not_a_finite_number(run: Run, write: Write, draft: str) -> None:
    text = '{"activated_nodes": [{"score": 1}], "traversed_edges": [{"weight": "heavy"}]}'
    assert_error(activation(run, write, draft, text),
                 "log.json: $.traversed_edges[0].weight: expected a finite number, got "
                 "a string 'heavy'")
    text = '{"activated_nodes": [{"score": 1}], "traversed_edges": [{"weight": NaN}]}'
    assert_error(activation(run, write, draft, text),
                 "log.json: $.traversed_edges[0].weight: expected a finite number, got "
                 "NaN (JSON has no NaN or Infinity)")


def test_tags_not_a_list(run: Run, write: Write, draft: str) -> None:
    assert_error(activation(run, write, draft, '{"activated_nodes": [{"tags": "ops"}]}'),
                 "log.json: $.activated_nodes[0].tags: expected an array of strings, "
                 "got a string")
    text = '{"activated_nodes": [{"properties": {"tags": {"a": 1}}}]}'
    assert_error(activation(run, write, draft, text),
                 "log.json: $.activated_nodes[0].properties.tags: expected an array of "
                 "strings, got an object")


def test_tags_with_a_non_string(run: Run, write: Write, draft: str) -> None:
    text = '{"activated_nodes": [{"tags": ["ops", 7]}]}'
    assert_error(activation(run, write, draft, text),
                 "log.json: $.activated_nodes[0].tags[1]: expected a string, got a number")


def test_properties_not_an_object(run: Run, write: Write, draft: str) -> None:
    assert_error(activation(run, write, draft, '{"activated_nodes": [{"properties": []}]}'),
                 "log.json: $.activated_nodes[0].properties: expected an object, got an array")


def test_resolved_map_errors_name_the_path_inside_the_wrapper(
    run: Run, write: Write, draft: str
) -> None:
    text = '{"activation": {"value": {"activated_nodes": [{"score": "x"}]}}}'
    assert_error(activation(run, write, draft, text),
                 "log.json: $.activation.value.activated_nodes[0].score: expected a finite "
                 "number, got a string 'x'")
    assert_error(activation(run, write, draft, '{"activation": {"value": 3}}'),
                 "log.json: $.activation.value: expected an object, got a number")


def test_deeply_nested_json(run: Run, write: Write, draft: str) -> None:
    result = activation(run, write, draft, "[" * 100_000 + "]" * 100_000)
    assert_error(result, re.compile(r"log\.json: (JSON nested too deeply|\$: expected an "
                                    r"object, got an array)"))


def test_jsonl_bad_lines_name_file_line_and_column(run: Run, write: Write) -> None:
    write("in.jsonl", '{"id": "ok", "draft": "x"}\n{"draft": 3}\n{"draft": [}\n'
                      '{"draft": "y", "activation": {"activated_nodes": [{"score": NaN}]}}\n')
    result = run("review", "--jsonl", "in.jsonl", "-f", "jsonl")
    assert "Traceback" not in result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["source"], r["verdict"]) for r in records] == [
        ("ok", "flagged"), ("in.jsonl:2", "error"), ("in.jsonl:3", "error"),
        ("in.jsonl:4", "error")]
    assert [r["error"] for r in records[1:]] == [
        "in.jsonl:2: $.draft: expected a string, got a number",
        "in.jsonl:3:12: not valid JSON: Expecting value",
        "in.jsonl:4: $.activation.activated_nodes[0].score: expected a finite number, got NaN "
        "(JSON has no NaN or Infinity)",
    ]


def test_stdin_for_both_draft_and_activation(run: Run) -> None:
    result = run("review", "-", "-a", "-", "-f", "json", input='{"activated_nodes": []}')
    assert_error(result, "stdin ('-') can be read only once")


# -- rule packs --------------------------------------------------------------------------------


def pack(run: Run, write: Write, draft: str, text: str) -> Result:
    write("pack.yaml", text)
    return review(run, draft, "--rules", "pack.yaml")


def test_rules_not_yaml(run: Run, write: Write, draft: str) -> None:
    result = pack(run, write, draft, "rules:\n  - id: a\n    content: [unclosed\n")
    assert_error(result, re.compile(r"pack\.yaml:\d+: not valid YAML: .+"))


def test_rules_missing(run: Run, draft: str) -> None:
    assert_error(review(run, draft, "-r", "nope.yaml"),
                 re.compile(r"nope\.yaml: cannot read rule pack: .+"))


def billion_laughs(levels: int = 10) -> str:
    lines = ['lol0: &lol0 "lol"']
    for i in range(1, levels):
        refs = ", ".join([f"*lol{i - 1}"] * 10)
        lines.append(f"lol{i}: &lol{i} [{refs}]")
    return "\n".join(lines) + "\n"


def merge_chain(levels: int = 40) -> str:
    lines = ["m0: &m0 {k: 1}"]
    for i in range(1, levels):
        lines.append(f"m{i}: &m{i}\n  <<: [*m{i - 1}, *m{i - 1}]\n  k{i}: 1")
    return "\n".join(lines) + "\n"


def test_alias_bomb_fails_fast(run: Run, write: Write, draft: str) -> None:
    start = time.monotonic()
    result = pack(run, write, draft, billion_laughs())
    assert time.monotonic() - start < 2.0
    assert_error(result, "pack.yaml:1: anchors (&name) are not allowed")


def test_merge_key_chain_fails_fast(run: Run, write: Write, draft: str) -> None:
    start = time.monotonic()
    result = pack(run, write, draft, merge_chain())
    assert time.monotonic() - start < 2.0
    assert_error(result, "pack.yaml:1: anchors (&name) are not allowed")


def test_merge_key_without_anchor(run: Run, write: Write, draft: str) -> None:
    result = pack(run, write, draft, "rules:\n  - <<: {id: a}\n    content: b\n")
    assert_error(result, "pack.yaml:2: merge keys (<<) are not allowed")


def test_alias_bomb_in_the_config_fails_fast(run: Run, write: Write, draft: str) -> None:
    write(".critic.yaml", billion_laughs())
    start = time.monotonic()
    result = review(run, draft)
    assert time.monotonic() - start < 2.0
    assert_error(result, re.compile(r".*/\.critic\.yaml:1: anchors \(&name\) are not allowed"))


def test_deeply_nested_yaml(run: Run, write: Write, draft: str) -> None:
    start = time.monotonic()
    result = pack(run, write, draft, "[" * 1000 + "]" * 1000 + "\n")
    assert time.monotonic() - start < 2.0
    assert_error(result, re.compile(r"pack\.yaml:1: nested deeper than \d+ levels"))


def test_python_tag_in_rules(run: Run, write: Write, draft: str) -> None:
    result = pack(run, write, draft, "rules:\n  - !!python/object/apply:os.system [echo hi]\n")
    assert_error(result, re.compile(r"pack\.yaml:2: the tag tag:yaml\.org,2002:python/object/"
                                    r"apply:os\.system is not allowed"))


def test_unknown_key(run: Run, write: Write, draft: str) -> None:
    result = pack(run, write, draft, "rules:\n  - id: a\n    content: b\n    foo: 1\n")
    assert_error(result, "pack.yaml:4: rules[0].foo: unknown key "
                         "(expected one of: id, content, always, check)")


def test_unknown_top_level_key(run: Run, write: Write, draft: str) -> None:
    result = pack(run, write, draft, "version: 1\nrulez: []\n")
    assert_error(result, "pack.yaml:2: rulez: unknown key "
                         "(expected one of: version, sensitive_tags, preferences, rules)")


def test_wrong_type(run: Run, write: Write, draft: str) -> None:
    result = pack(run, write, draft, "rules:\n  - id: a\n    content: [b]\n")
    assert_error(result, "pack.yaml:3: rules[0].content: expected a string, got a list")
    result = pack(run, write, draft, "preferences:\n  - priority: high\n    statement: s\n")
    assert_error(result, "pack.yaml:2: preferences[0].priority: expected a number, got a string")
    result = pack(run, write, draft, "sensitive_tags: credentials\n")
    assert_error(result, "pack.yaml:1: sensitive_tags: expected a list, got a string")
    result = pack(run, write, draft, "rules: {id: a}\n")
    assert_error(result, "pack.yaml:1: rules: expected a list, got a mapping")


def test_missing_required_key(run: Run, write: Write, draft: str) -> None:
    result = pack(run, write, draft, "rules:\n  - id: a\n")
    assert_error(result, "pack.yaml:2: rules[0]: missing required key 'content'")


def test_bad_check_action_and_pattern(run: Run, write: Write, draft: str) -> None:
    result = pack(run, write, draft, "rules:\n  - id: a\n    content: b\n    check:\n"
                                     "      pattern: x\n      action: delete\n")
    assert_error(result, "pack.yaml:6: rules[0].check.action: expected one of refuse, revise, "
                         "flag, got 'delete'")
    result = pack(run, write, draft, "rules:\n  - id: a\n    content: b\n    check:\n"
                                     "      pattern: '(a)\\1'\n      action: flag\n")
    assert_error(result, re.compile(r"pack\.yaml:5: rules\[0\]\.check\.pattern: pattern does "
                                    r"not compile in RE2 .+"))


def test_bad_scalar_in_rules(run: Run, write: Write, draft: str) -> None:
    result = pack(run, write, draft, "preferences:\n  - priority: !!int ten\n"
                                     "    statement: s\n")
    assert_error(result, "pack.yaml:2: cannot read value: 'ten' is not a valid int")
    result = pack(run, write, draft, "rules:\n  - id: a\n    content: 2024-13-45\n")
    assert_error(result, "pack.yaml:3: cannot read value: '2024-13-45' is not a valid timestamp")


def test_duplicate_rule_id_within_a_pack(run: Run, write: Write, draft: str) -> None:
    result = pack(run, write, draft, "rules:\n  - id: a\n    content: b\n"
                                     "  - id: a\n    content: c\n")
    assert_error(result, "pack.yaml:4: rules[1].id: duplicate rule id 'a'")


def test_duplicate_rule_id_across_packs(run: Run, write: Write, draft: str) -> None:
    write("one.yaml", "rules:\n  - id: a\n    content: b\n")
    write("two.yaml", "rules:\n  - id: z\n    content: y\n  - id: a\n    content: c\n")
    result = review(run, draft, "-r", "one.yaml", "-r", "two.yaml")
    assert_error(result, "two.yaml:4: rules: duplicate rule id 'a' (also in one.yaml)")


def test_unsupported_version(run: Run, write: Write, draft: str) -> None:
    assert_error(pack(run, write, draft, "version: 2\n"),
                 "pack.yaml:1: version: unsupported version 2 (expected 1)")


# -- thresholds and config ---------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1.5", "-0.1"])
def test_threshold_flag_outside_zero_one(run: Run, draft: str, value: str) -> None:
    assert_error(review(run, draft, "--threshold", value),
                 f"--threshold must be between 0 and 1, got {float(value)}")


def test_threshold_flag_not_a_number(run: Run, draft: str) -> None:
    result = review(run, draft, "--threshold", "high")
    assert "Traceback" not in result.output
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "--threshold" in result.stderr


def config_path() -> str:
    return os.path.join(os.path.realpath(os.getcwd()), ".critic.yaml")


def test_threshold_in_config_outside_zero_one(run: Run, write: Write, draft: str) -> None:
    write(".critic.yaml", "fail_on: never\nthreshold: 1.2\n")
    assert_error(review(run, draft),
                 f"{config_path()}:2: threshold: must be between 0.0 and 1.0, got 1.2")


def test_config_unknown_key(run: Run, write: Write, draft: str) -> None:
    write(".critic.yaml", "threshold: 0.5\nmodle: gpt-4o-mini\n")
    line = assert_error(review(run, draft), re.compile(
        re.escape(f"{config_path()}:2: modle: unknown key (expected one of: ") + r".*\)"))
    assert "model" in line


def test_config_wrong_type(run: Run, write: Write, draft: str) -> None:
    write(".critic.yaml", "jobs: 4\ntop_k: many\n")
    assert_error(review(run, draft),
                 f"{config_path()}:2: top_k: expected a whole number, got a string")
    write(".critic.yaml", "rules: default.yaml\n")
    assert_error(review(run, draft), f"{config_path()}:1: rules: expected a list, got a string")


def test_config_not_yaml(run: Run, write: Write, draft: str) -> None:
    write(".critic.yaml", "threshold: [0.5\n")
    assert_error(review(run, draft),
                 re.compile(re.escape(config_path()) + r":\d+: not valid YAML: .+"))


def test_config_not_a_mapping(run: Run, write: Write, draft: str) -> None:
    write(".critic.yaml", "- threshold\n")
    assert_error(review(run, draft), f"{config_path()}:1: expected a mapping, got a list")


def test_config_given_by_flag_is_missing(run: Run, draft: str) -> None:
    assert_error(review(run, draft, "--config", "nope.yaml"), "nope.yaml: no such config file")


def test_config_api_key_is_refused(run: Run, write: Write, draft: str) -> None:
    write(".critic.yaml", "api_key: sk-secret-value\n")
    line = assert_error(review(run, draft), re.compile(re.escape(config_path()) +
                                                       r":1: api_key: .+"))
    assert "sk-secret-value" not in line


def test_api_key_env_pointing_at_an_unset_variable(run: Run, draft: str) -> None:
    assert_error(review(run, draft, "--api-key-env", "CRITIC_TEST_NO_SUCH_KEY", "--model", "m"),
                 "api_key_env: the variable CRITIC_TEST_NO_SUCH_KEY is not set")


@pytest.mark.parametrize(("flag", "value"), [("--jobs", "0"), ("--max-bytes", "0"),
                                             ("--top-k", "-1"), ("--timeout", "0")])
def test_out_of_range_flags(run: Run, draft: str, flag: str, value: str) -> None:
    line = assert_error(review(run, draft, flag, value), re.compile(".+"))
    assert flag in line


def test_bad_fail_on_and_format(run: Run, draft: str) -> None:
    assert_error(review(run, draft, "--fail-on", "sometimes"),
                 "--fail-on must be one of approve, flagged, revise, refuse, never")
    assert_error(run("review", draft, "-f", "yaml"),
                 re.compile(r"--format must be one of .+, got 'yaml'"))


# -- tracebacks on request ---------------------------------------------------------------------


def test_raise_errors_shows_the_exception(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRITIC_RAISE_ERRORS", "1")
    result = review(run, "missing.txt")
    assert isinstance(result.exception, InputError)
    assert result.exception.message == "missing.txt: no such file or directory"
    assert "critic: error:" not in result.stderr
    with pytest.raises(InputError):
        run("review", "missing.txt", catch_exceptions=False)


def test_unset_key_variable_is_fine_without_a_model(run: Run, write: Write, draft: str) -> None:
    write(".critic.yaml", "api_key_env: CRITIC_TEST_NO_SUCH_KEY\n")
    result = review(run, draft)
    assert (result.exit_code, result.stderr) == (0, "")


def test_config_timeout_zero_is_refused(run: Run, write: Write, draft: str) -> None:
    write(".critic.yaml", "timeout: 0\n")
    assert_error(review(run, draft), re.compile(re.escape(config_path()) +
                                                r":1: timeout: must be positive"))


def test_config_names_a_shipped_pack(run: Run, write: Write) -> None:
    write(".critic.yaml", "rules: [secrets]\n")
    write("leak.txt", "key AKIA" + "Q7" * 8 + "\n")
    result = review(run, "leak.txt")
    assert result.exit_code == 1, result.stderr
    assert json.loads(result.stdout)["checks"][0]["rule"] == "aws-access-key-id"


@pytest.mark.parametrize(("args", "expected"), [
    (("review", "--bogus"), "No such option: --bogus"),
    (("review", "--threshold", "abc", "x"), "Invalid value for '--threshold'"),
    (("revew",), "No such command 'revew'. Did you mean 'review'?"),
    (("eval",), "Missing argument 'cases'."),
])
def test_usage_errors_are_one_line(run: Run, args: tuple[str, ...], expected: str) -> None:
    line = assert_error(run(*args), re.compile(r".+ \(see 'critic[^']* --help'\)"))
    assert expected in line


@pytest.mark.parametrize(("flag", "value"), [
    ("--timeout", "nan"), ("--timeout", "inf"), ("--temperature", "nan"),
    ("--temperature", "-5"), ("--threshold", "nan"),
])
def test_numbers_out_of_range_by_flag(run: Run, draft: str, flag: str, value: str) -> None:
    line = assert_error(review(run, draft, flag, value), re.compile(rf"{flag} must be between .+"))
    assert value in line


def test_a_key_an_http_header_cannot_carry(run: Run, draft: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRITIC_API_KEY", "clé-SECRET")
    line = assert_error(review(run, draft, "--model", "m"),
                        re.compile(r"the API key in CRITIC_API_KEY holds characters .+"))
    assert "SECRET" not in line


def test_no_cache_and_offline_contradict(run: Run, draft: str) -> None:
    assert_error(review(run, draft, "--no-cache", "--offline"),
                 "--offline answers from the cache; it cannot go with --no-cache")


def test_an_empty_output_name(run: Run, draft: str) -> None:
    assert_error(review(run, draft, "-o", ""), "--output: the file name is empty")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_an_output_that_cannot_be_written(run: Run, draft: str) -> None:
    assert_error(review(run, draft, "-o", "/dev/full"),
                 re.compile(r"--output /dev/full: cannot write: .+"))


def test_a_missing_prompt_template_fails_even_without_a_model(run: Run, draft: str) -> None:
    assert_error(review(run, draft, "--prompt-template", "nope.txt"),
                 re.compile(r"nope.txt: cannot read prompt template: .+"))


def test_a_folder_with_no_drafts_is_not_a_pass(run: Run, write: Write) -> None:
    write("empty/notes.json", "{}")
    assert_error(run("review", "empty", "--no-config"),
                 "no drafts found in empty (files matching *.txt, *.md)")
