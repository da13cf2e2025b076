"""The CI formats: SARIF, JUnit XML, GitHub workflow commands and Markdown."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from jsonschema import FormatChecker
from jsonschema.validators import validator_for
from typer.testing import CliRunner

from critic_cli import __version__
from critic_cli.cli import app
from critic_cli.record import Gate, Record, Reflection, Summary
from critic_cli.report import Context, make
from critic_cli.report.github import escape_data, escape_property
from critic_cli.report.markdown import cell
from critic_cli.report.sarif import artifact_location

runner = CliRunner()

SECRET = "AKIAFAKESECRET000042"
FORMATS = ("sarif", "junit", "github", "markdown")
SCHEMA_NAME = "sarif-schema-2.1.0.json"
# The repository's ../shared (a fresh CI clone has a copy of shared/ beside it).
SCHEMA_CANDIDATES = tuple(dict.fromkeys([
    Path(__file__).parents[2] / "shared" / "schemas" / SCHEMA_NAME,
    Path(__file__).resolve().parents[1].parent / "shared" / "schemas" / SCHEMA_NAME,
]))


def hit(rule: str, action: str, line: int, column: int) -> dict[str, Any]:
    return {"rule": rule, "action": action, "line": line, "column": column}


def records() -> list[Record]:
    """One record per verdict, each carrying the secret in its draft."""
    return [
        Record("approve", 0.82, None, "drafts/fine.txt", Gate(False, None, 0.6),
               draft=f"all good {SECRET}"),
        Record("flagged", 0.43, "credentials", "drafts/b.md", Gate(True, "sensitive_tag", 0.6),
               checks=(hit("aws-key", "flag", 1, 3),), draft=f"my {SECRET}"),
        Record("revise", 0.8, None, "drafts/c d.txt", Gate(False, None, 0.6),
               revised_draft="the key is [REDACTED]",
               checks=(hit("token", "revise", 2, 7), hit("token", "revise", 4, 1)),
               draft=f"hello\nthe key {SECRET}\n\n{SECRET}"),
        Record("refuse", 0.3, None, "drafts/e.txt", Gate(True, "low_confidence", 0.6),
               refusal_message="I can't share keys.", matched_preferences=("Never reveal keys",),
               reflection=Reflection(True, "judge-1", False, None), reflection_latency_ms=812.4,
               checks=(hit("aws-key", "refuse", 3, 9),), rules_used=("aws-key",),
               draft=f"a\nb\nkey: {SECRET}"),
        Record("error", 0.2, None, "data.jsonl:7", Gate(True, "low_confidence", 0.6),
               reflection=Reflection(True, "judge-1", False, "judge timed out"),
               reflection_latency_ms=60000.0, error="judge timed out", draft=SECRET),
        Record("error", 0.5, None, "<stdin>", Gate(False, None, 0.6),
               error="<stdin>: draft is not UTF-8 (invalid byte at offset 3)"),
    ]


def render(name: str, items: Iterable[Record], fail_on: str = "revise") -> str:
    report = make(name, Context(fail_on=fail_on, several=True))
    summary = Summary()
    parts = [report.start()]
    for record in items:
        summary.add(record)
        parts.append(report.add(record))
    summary.seconds = 1.25
    parts.append(report.finish(summary))
    return "".join(parts)


def sarif(items: Iterable[Record]) -> dict[str, Any]:
    log: dict[str, Any] = json.loads(render("sarif", items))
    return log


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "CRITIC_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CRITIC_CACHE_DIR", str(tmp_path / "cache"))
    yield


@pytest.mark.parametrize("name", FORMATS)
def test_no_matched_text_leaks(name: str) -> None:
    assert SECRET not in render(name, records())


@pytest.mark.parametrize("name", FORMATS)
def test_nothing_is_written_before_the_records(name: str) -> None:
    assert make(name, Context()).start() == ""


# SARIF


@pytest.fixture(scope="module")
def sarif_schema() -> dict[str, Any]:
    for path in SCHEMA_CANDIDATES:
        if path.is_file():
            schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return schema
    pytest.skip(f"the OASIS SARIF schema is not at {SCHEMA_CANDIDATES[0]}")


def validate_sarif(log: Any, schema: dict[str, Any]) -> None:
    cls = validator_for(schema)
    cls.check_schema(schema)
    errors = sorted(cls(schema, format_checker=FormatChecker()).iter_errors(log), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])


def test_sarif_validates_against_the_oasis_schema(sarif_schema: dict[str, Any]) -> None:
    validate_sarif(sarif(records()), sarif_schema)
    validate_sarif(sarif([]), sarif_schema)
    validate_sarif(sarif(records()[:1]), sarif_schema)


def test_sarif_log_tool_and_rules() -> None:
    log = sarif(records())
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert log["version"] == "2.1.0"
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("critic", __version__)
    assert driver["informationUri"].startswith("https://")
    ids = [rule["id"] for rule in driver["rules"]]
    assert ids == ["critic/flagged", "aws-key", "critic/revise", "token", "critic/refuse",
                   "critic/error"]
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]


def test_sarif_results_per_verdict() -> None:
    results = sarif(records())["runs"][0]["results"]
    verdicts = [(r["ruleId"], r["level"], r["locations"][0]["physicalLocation"]
                 ["artifactLocation"]["uri"]) for r in results if r["ruleId"].startswith("critic/")]
    assert verdicts == [
        ("critic/flagged", "note", "drafts/b.md"),
        ("critic/revise", "warning", "drafts/c%20d.txt"),
        ("critic/refuse", "error", "drafts/e.txt"),
        ("critic/error", "error", "data.jsonl%3A7"),
        ("critic/error", "error", "%3Cstdin%3E"),
    ]
    texts = [r["message"]["text"] for r in results if r["ruleId"].startswith("critic/")]
    assert texts[0] == ("flagged: checks: aws-key (flag) at 1:3; gate fired: sensitive tag "
                        "'credentials'; confidence 0.43 < threshold 0.60; no reflection ran")
    assert texts[2] == ("refuse: checks: aws-key (refuse) at 3:9; gate fired: low confidence; "
                        "confidence 0.30 < threshold 0.60; reviewed by judge-1; "
                        "matched preferences: Never reveal keys")
    assert texts[3].endswith("error: judge timed out")
    assert texts[4] == "error: <stdin>: draft is not UTF-8 (invalid byte at offset 3)"


def test_sarif_regions_match_the_checks() -> None:
    results = sarif(records())["runs"][0]["results"]
    regions = [(r["ruleId"], r["level"], r["locations"][0]["physicalLocation"]["region"])
               for r in results if not r["ruleId"].startswith("critic/")]
    assert regions == [
        ("aws-key", "note", {"startLine": 1, "startColumn": 3}),
        ("token", "warning", {"startLine": 2, "startColumn": 7}),
        ("token", "warning", {"startLine": 4, "startColumn": 1}),
        ("aws-key", "error", {"startLine": 3, "startColumn": 9}),
    ]
    assert sarif(records())["runs"][0]["columnKind"] == "unicodeCodePoints"


def test_sarif_approved_drafts_have_no_results() -> None:
    assert sarif(records()[:1])["runs"][0]["results"] == []


@pytest.mark.parametrize(("source", "location"), [
    ("drafts/a.txt", {"uri": "drafts/a.txt", "uriBaseId": "%SRCROOT%"}),
    ("drafts\\win.txt", {"uri": "drafts/win.txt", "uriBaseId": "%SRCROOT%"}),
    ("a b/50%#?.md", {"uri": "a%20b/50%25%23%3F.md", "uriBaseId": "%SRCROOT%"}),
    ("data.jsonl:12", {"uri": "data.jsonl%3A12", "uriBaseId": "%SRCROOT%"}),
    ("case-42", {"uri": "case-42", "uriBaseId": "%SRCROOT%"}),
    ("/abs/dir/x y.txt", {"uri": "file:///abs/dir/x%20y.txt"}),
    ("C:\\work\\x.txt", {"uri": "file:///C:/work/x.txt"}),
])
def test_sarif_artifact_locations(source: str, location: dict[str, str]) -> None:
    assert artifact_location(source) == location
    assert re.fullmatch(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*", location["uri"])
    if "uriBaseId" in location:
        assert urlsplit(location["uri"]).scheme == ""  # a relative reference, never a scheme


# JUnit


def junit(items: Iterable[Record], fail_on: str = "revise") -> ET.Element:
    return ET.fromstring(render("junit", items, fail_on).encode("utf-8"))


def test_junit_counts_and_cases() -> None:
    root = junit(records())
    assert root.tag == "testsuites"
    [suite] = root
    assert suite.tag == "testsuite"
    assert suite.attrib == {"name": "critic", "tests": "6", "failures": "2", "errors": "2",
                            "time": "1.250", "skipped": "0"}
    assert {k: root.attrib[k] for k in ("tests", "failures", "errors")} == {
        "tests": "6", "failures": "2", "errors": "2"}
    cases = list(suite)
    assert [c.attrib["name"] for c in cases] == [r.source for r in records()]
    assert {c.attrib["classname"] for c in cases} == {"critic"}
    assert [c.attrib["time"] for c in cases] == ["0.000", "0.000", "0.000", "0.812", "60.000",
                                                 "0.000"]
    outcome = [[child.tag for child in c] for c in cases]
    assert outcome == [[], ["system-out"], ["failure", "system-out"],
                       ["failure", "system-out"], ["error", "system-out"],
                       ["error", "system-out"]]


def test_junit_failure_and_error_details() -> None:
    suite = junit(records())[0]
    failure = suite[3].find("failure")
    assert failure is not None
    assert failure.attrib["type"] == "refuse"
    assert failure.attrib["message"].startswith("refuse: checks: aws-key (refuse) at 3:9;")
    assert failure.text == "drafts/e.txt:aws-key (refuse) at 3:9"
    error = suite[4].find("error")
    assert error is not None
    assert (error.attrib["type"], error.text) == ("error", "judge timed out")
    out = suite[2].findtext("system-out") or ""
    assert out.endswith("revised draft:\nthe key is [REDACTED]")
    assert (suite[3].findtext("system-out") or "").endswith("refusal:\nI can't share keys.")


@pytest.mark.parametrize(("fail_on", "failing"), [
    ("never", []),
    ("refuse", ["refuse"]),
    ("revise", ["revise", "refuse"]),
    ("flagged", ["flagged", "revise", "refuse"]),
    ("approve", ["approve", "flagged", "revise", "refuse"]),
])
def test_junit_failures_follow_fail_on(fail_on: str, failing: list[str]) -> None:
    suite = junit(records(), fail_on)[0]
    assert suite.attrib["failures"] == str(len(failing))
    assert suite.attrib["errors"] == "2"  # errors are errors whatever --fail-on says
    types = [f.attrib["type"] for f in suite.iter("failure")]
    assert types == failing


def test_junit_strips_characters_xml_cannot_carry() -> None:
    nasty = Record("error", 0.5, None, "bad\x01name\x1b.txt", Gate(False, None, 0.6),
                   error="bell\x07 nul\x00 ff\x0c\ufffe end")
    revise = Record("revise", 0.8, None, "ok.txt", Gate(False, None, 0.6),
                    revised_draft="tab\tline\nvt\x0bdone\ud800", draft="x")
    text = render("junit", [nasty, revise])
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]", text)
    suite = ET.fromstring(text.encode("utf-8"))[0]
    assert suite[0].attrib["name"] == "bad\\x01name\\x1b.txt"
    error = suite[0].find("error")
    assert error is not None
    assert error.text == "bell\\x07 nul\\x00 ff\\x0c\\ufffe end"
    assert (suite[1].findtext("system-out") or "").endswith("tab\tline\nvt\\x0bdone\\ud800")


def test_junit_empty_run_parses() -> None:
    suite = junit([])[0]
    assert suite.attrib["tests"] == "0"
    assert list(suite) == []


# GitHub


def test_github_escaping_is_exact() -> None:
    assert escape_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b"
    assert escape_property("100% a:b,c\r\nd") == "100%25 a%3Ab%2Cc%0D%0Ad"
    assert escape_data("%0A") == "%250A"  # an escape in the text stays text


def test_github_annotations_are_streamed_per_record() -> None:
    report = make("github", Context())
    flagged, revise = records()[1:3]
    assert report.add(records()[0]) == ""
    assert report.add(revise) == (
        "::warning file=drafts/c d.txt,title=critic revise::revise: checks: token (revise) at "
        "2:7, token (revise) at 4:1; gate did not fire: confidence 0.80 >= threshold 0.60\n"
        "::warning file=drafts/c d.txt,line=2,col=7,title=critic revise::check token matched "
        "(revise); the draft's verdict: revise\n"
        "::warning file=drafts/c d.txt,line=4,col=1,title=critic revise::check token matched "
        "(revise); the draft's verdict: revise\n"
    )
    assert report.add(flagged).splitlines()[1] == (
        "::notice file=drafts/b.md,line=1,col=3,title=critic flag::check aws-key matched (flag);"
        " the draft's verdict: flagged")


def test_github_commands_by_verdict_and_summary() -> None:
    lines = render("github", records()).splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == [
        "::notice", "::notice", "::warning", "::warning", "::warning", "::error", "::error",
        "::error", "::error", "::notice::critic:"]
    assert lines[5] == (
        "::error file=drafts/e.txt,title=critic refuse::refuse: checks: aws-key (refuse) at 3:9;"
        " gate fired: low confidence; confidence 0.30 < threshold 0.60; reviewed by judge-1;"
        " matched preferences: Never reveal keys")
    assert lines[6] == ("::error file=drafts/e.txt,line=3,col=9,title=critic refuse::check "
                        "aws-key matched (refuse); the draft's verdict: refuse")
    assert lines[7].startswith("::error file=data.jsonl%3A7,title=critic error::error: ")
    assert lines[-1] == ("::notice::critic: 6 drafts: 1 approve, 1 flagged, 1 revise, "
                         "1 refuse, 2 error")


def test_github_escapes_sources_and_messages() -> None:
    record = Record("error", 0.5, None, "odd,name:1%.txt", Gate(False, None, 0.6),
                    error="line one\nline two\r\n::error::injected 100%")
    assert render("github", [record]).splitlines() == [
        "::error file=odd%2Cname%3A1%25.txt,title=critic error::error: line one%0Aline two%0D%0A"
        "::error::injected 100%25",
        "::notice::critic: 1 draft: 1 error",
    ]


def test_github_summary_of_nothing() -> None:
    assert render("github", []) == "::notice::critic: 0 drafts\n"


# Markdown


def test_markdown_cell_escaping_is_exact() -> None:
    assert cell("a|b") == "a\\|b"
    assert cell("one\ntwo\r\nthree\rfour") == "one<br>two<br>three<br>four"
    assert cell("<stdin> & *x* _y_ `z` [l] ~s~ \\") == (
        "\\<stdin\\> \\& \\*x\\* \\_y\\_ \\`z\\` \\[l\\] \\~s\\~ \\\\")
    assert cell("\\|") == "\\\\\\|"  # a backslash before a pipe cannot unescape it


def test_markdown_report() -> None:
    text = render("markdown", records())
    assert text.startswith("## critic\n\n**error** (fail on revise) · 6 drafts: 1 approve, "
                           "1 flagged, 1 revise, 1 refuse, 2 error\n\n"
                           "| Verdict | Draft | Confidence | Gate | Checks | Notes |\n"
                           "| --- | --- | --- | --- | --- | --- |\n")
    rows = [line for line in text.splitlines() if line.startswith("| **")]
    assert [row.split(" | ")[0] for row in rows] == [
        "| **flagged**", "| **revise**", "| **refuse**", "| **error**", "| **error**"]
    assert rows[1] == ("| **revise** | drafts/c d.txt | 0.80 ≥ 0.60 | did not fire | "
                       "token (revise) at 2:7<br>token (revise) at 4:1 | — |")
    assert rows[2] == ("| **refuse** | drafts/e.txt | 0.30 < 0.60 | fired: low confidence | "
                       "aws-key (refuse) at 3:9 | model judge-1<br>matched: Never reveal keys"
                       "<br>refusal: I can't share keys. |")
    assert rows[4] == ("| **error** | \\<stdin\\> | — | — | — | error: \\<stdin\\>: draft is "
                       "not UTF-8 (invalid byte at offset 3) |")
    assert text.endswith("\n\n1 approved draft not listed.\n")


def test_markdown_cells_stay_in_their_columns() -> None:
    record = Record("refuse", 0.3, None, "a|b\nc.txt", Gate(True, "low_confidence", 0.6),
                    refusal_message="no | never\n| --- |", matched_preferences=("x|y",),
                    reflection=Reflection(True, "m|1"))
    [row] = [line for line in render("markdown", [record]).splitlines()
             if line.startswith("| **")]
    assert len(re.findall(r"(?<!\\)\|", row)) == 7
    assert "a\\|b<br>c.txt" in row


def test_markdown_all_approved_and_pass() -> None:
    assert render("markdown", records()[:1]) == (
        "## critic\n\n**pass** (fail on revise) · 1 draft: 1 approve\n\n"
        "Every draft was approved.\n")
    assert render("markdown", records()[:2], fail_on="flagged").startswith(
        "## critic\n\n**fail** (fail on flagged) · 2 drafts: 1 approve, 1 flagged\n")


# End to end, through the real command line


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    drafts = tmp_path / "drafts"
    drafts.mkdir()
    (drafts / "fine.txt").write_text("All good here.\n", encoding="utf-8")
    (drafts / "leak.txt").write_text("Hello.\nHere it is: SECRET-12345\n", encoding="utf-8")
    (tmp_path / "pack.yaml").write_text(
        "version: 1\n"
        "rules:\n"
        "  - id: secret-token\n"
        "    content: The draft never contains a secret token.\n"
        "    check:\n"
        "      pattern: 'SECRET-[0-9]+'\n"
        "      action: refuse\n"
        "      message: The draft contains a secret token.\n",
        encoding="utf-8")
    return tmp_path


def review(name: str, out: str) -> Any:
    return runner.invoke(app, ["review", "drafts", "--format", name, "-o", out, "--threshold",
                               "0", "--rules", "pack.yaml", "--no-config"])


@pytest.mark.parametrize("name", FORMATS)
def test_cli_writes_each_format(name: str, project: Path) -> None:
    out = project / f"out.{name}"
    result = review(name, str(out))
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", "")
    text = out.read_text(encoding="utf-8")
    assert "SECRET-12345" not in text
    assert [p.name for p in project.iterdir() if p.name.startswith(".critic-")] == []
    if name == "sarif":
        [run] = json.loads(text)["runs"]
        located = [(r["ruleId"], r["locations"][0]["physicalLocation"]) for r in run["results"]]
        assert located == [
            ("critic/refuse", {"artifactLocation": {"uri": "drafts/leak.txt",
                                                    "uriBaseId": "%SRCROOT%"}}),
            ("secret-token", {"artifactLocation": {"uri": "drafts/leak.txt",
                                                   "uriBaseId": "%SRCROOT%"},
                              "region": {"startLine": 2, "startColumn": 13}}),
        ]
    elif name == "junit":
        suite = ET.fromstring(text.encode("utf-8"))[0]
        assert (suite.attrib["tests"], suite.attrib["failures"]) == ("2", "1")
        assert [c.attrib["name"] for c in suite] == ["drafts/fine.txt", "drafts/leak.txt"]
        assert "refusal:\nThe draft contains a secret token." in (
            suite[1].findtext("system-out") or "")
    elif name == "github":
        assert text.splitlines() == [
            "::error file=drafts/leak.txt,title=critic refuse::refuse: checks: secret-token "
            "(refuse) at 2:13; gate did not fire: confidence 0.50 >= threshold 0.00",
            "::error file=drafts/leak.txt,line=2,col=13,title=critic refuse::check secret-token"
            " matched (refuse); the draft's verdict: refuse",
            "::notice::critic: 2 drafts: 1 approve, 1 refuse",
        ]
    else:
        assert "| **refuse** | drafts/leak.txt | 0.50 ≥ 0.00 | did not fire | secret-token " \
               "(refuse) at 2:13 | refusal: The draft contains a secret token. |" in text
        assert text.endswith("\n1 approved draft not listed.\n")


def test_cli_sarif_validates(project: Path, sarif_schema: dict[str, Any]) -> None:
    result = review("sarif", "out.sarif")
    assert result.exit_code == 1
    validate_sarif(json.loads((project / "out.sarif").read_text(encoding="utf-8")),
                   sarif_schema)
