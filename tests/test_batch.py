"""Many drafts: directories, globs, JSONL, order, bad inputs, exit policy, interrupts."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.judge import serve_judge

REPO = Path(__file__).resolve().parent.parent


def records(stdout: str) -> list[dict]:
    """Return the JSONL records of an output."""
    return [json.loads(line) for line in stdout.splitlines()]


def test_directory_is_walked_recursively_in_sorted_order(run, write):
    write("drafts/b.txt", "two")
    write("drafts/a.md", "one")
    write("drafts/sub/c.txt", "three")
    write("drafts/skip.json", "{}")
    write("drafts/.hidden/d.txt", "hidden")
    result = run("review", "drafts", "--no-config", "--threshold", "0.5")
    assert result.exit_code == 0, result.stderr
    sources = [r["source"] for r in records(result.stdout)]
    assert sources == [os.path.join("drafts", "a.md"), os.path.join("drafts", "b.txt"),
                       os.path.join("drafts", "sub", "c.txt")]


def test_glob_selects_other_files(run, write):
    write("drafts/a.txt", "one")
    write("drafts/b.log", "two")
    result = run("review", "drafts", "--glob", "*.log", "--no-config")
    assert [r["source"] for r in records(result.stdout)] == [os.path.join("drafts", "b.log")]


def test_several_paths_default_to_jsonl(run, write):
    write("a.txt", "one")
    write("b.txt", "two")
    result = run("review", "a.txt", "b.txt", "--no-config")
    assert [r["source"] for r in records(result.stdout)] == ["a.txt", "b.txt"]


def test_json_format_for_several_drafts_is_an_array(run, write):
    write("a.txt", "one")
    write("b.txt", "two")
    result = run("review", "a.txt", "b.txt", "--format", "json", "--no-config")
    assert [r["source"] for r in json.loads(result.stdout)] == ["a.txt", "b.txt"]


def test_a_bad_file_in_a_batch_gets_an_error_record_and_the_others_go_on(run, write):
    write("drafts/a.txt", "fine")
    write("drafts/b.txt", b"\xff\xfe bad bytes")
    write("drafts/c.txt", "also fine")
    result = run("review", "drafts", "--no-config", "--threshold", "0.5")
    assert result.exit_code == 3
    got = records(result.stdout)
    assert [r["verdict"] for r in got] == ["approve", "error", "approve"]
    assert "not UTF-8" in got[1]["error"]
    assert got[1]["reflection"]["ran"] is False


def test_jsonl_input_with_bad_lines(run, write):
    lines = [
        json.dumps({"id": "ok-1", "draft": "fine"}),
        "{not json",
        json.dumps({"id": "no-draft"}),
        json.dumps({"id": "bad-score", "draft": "x",
                    "activation": {"activated_nodes": [{"score": "high"}]}}),
        "",
        json.dumps({"id": "tagged", "draft": "x", "activation": {
            "activated_nodes": [{"score": 1.0, "tags": ["credentials"]}],
            "inference_paths": [1, 2, 3], "traversed_edges": [{"weight": 5}]}}),
        json.dumps({"draft": "no id"}),
    ]
    write("in.jsonl", "\n".join(lines) + "\n")
    result = run("review", "--jsonl", "in.jsonl", "-t", "credentials", "--no-config",
                 "--threshold", "0.5")
    assert result.exit_code == 3
    got = records(result.stdout)
    assert [r["source"] for r in got] == ["ok-1", "in.jsonl:2", "in.jsonl:3", "in.jsonl:4",
                                          "tagged", "in.jsonl:7"]
    assert [r["verdict"] for r in got] == ["approve", "error", "error", "error", "flagged",
                                           "approve"]
    assert got[1]["error"].startswith("in.jsonl:2:2: not valid JSON")
    assert got[2]["error"] == "in.jsonl:3: $.draft: expected a string, got null"
    assert "$.activation.activated_nodes[0].score" in got[3]["error"]
    assert got[4]["sensitive_tag_hit"] == "credentials"


def test_jsonl_from_stdin(run):
    text = json.dumps({"id": "s1", "draft": "hello"}) + "\n"
    result = run("review", "--jsonl", "-", "--no-config", input=text)
    assert [r["source"] for r in records(result.stdout)] == ["s1"]


def test_fail_on_applies_across_the_batch(run, write):
    write("a.txt", "one")
    write("b.txt", "two")
    assert run("review", "a.txt", "b.txt", "--no-config").exit_code == 0  # flagged < revise
    assert run("review", "a.txt", "b.txt", "--no-config", "--fail-on", "flagged").exit_code == 1


def test_text_output_ends_with_a_summary(run, write):
    write("a.txt", "one")
    write("b.txt", "two")
    result = run("review", "a.txt", "b.txt", "--format", "text", "--no-config")
    lines = result.stdout.splitlines()
    assert "approve" in lines[-2] and "cache hits" in lines[-2]
    assert lines[-1].split()[:5] == ["0", "2", "0", "0", "0"]


def test_no_progress_bar_when_stderr_is_not_a_terminal(run, write):
    write("a.txt", "one")
    write("b.txt", "two")
    assert run("review", "a.txt", "b.txt", "--no-config").stderr == ""


def test_ctrl_c_mid_batch_stops_cleanly(tmp_path):
    drafts = tmp_path / "drafts"
    drafts.mkdir()
    for i in range(60):
        (drafts / f"{i:03}.txt").write_text(f"Draft {i}", encoding="utf-8")
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRITIC_", "OPENAI_"))}
    env["CRITIC_CACHE_DIR"] = str(cache)
    with serve_judge(latency=0.2) as judge:
        proc = subprocess.Popen(
            [sys.executable, "-m", "critic_cli", "review", str(drafts), "--model", "m",
             "--base-url", judge.base_url, "-j", "2", "--format", "jsonl", "--no-config"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while len(judge.requests) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert b"Traceback" not in err
    lines = out.decode().splitlines()
    assert 0 < len(lines) < 60
    for i, line in enumerate(lines):
        assert json.loads(line)["source"].endswith(f"{i:03}.txt")
    leftovers = [p for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".json")]
    assert leftovers == []


@pytest.mark.parametrize("jobs", ["1", "8"])
def test_records_stream_in_input_order_whatever_the_jobs(run, write, judge, jobs):
    judge.latency = 0.02
    for i in range(10):
        write(f"d/{i}.txt", f"draft {i}")
    result = run("review", "d", "--model", "m", "--base-url", judge.base_url, "-j", jobs,
                 "--no-config")
    assert [r["source"] for r in records(result.stdout)] == [
        os.path.join("d", f"{i}.txt") for i in range(10)]


SURE = json.dumps({"activated_nodes": [{"score": 1.0}], "inference_paths": [1, 2, 3],
                   "traversed_edges": [{"weight": 5}]})


def test_sidecar_activation_is_used_beside_each_draft(run, write):
    write("d/a.txt", "one")
    write("d/a.activation.json", SURE)
    write("d/b.txt", "two")
    result = run("review", "d", "--no-config")
    got = records(result.stdout)
    assert [(r["source"], r["verdict"], r["confidence_before"]) for r in got] == [
        (os.path.join("d", "a.txt"), "approve", 1.0),
        (os.path.join("d", "b.txt"), "flagged", 0.5)]


def test_sidecar_for_a_single_file_and_activation_flag_wins(run, write):
    write("a.txt", "one")
    write("a.activation.json", SURE)
    write("other.json", json.dumps({"activated_nodes": [{"score": 0.1}]}))
    assert json.loads(run("review", "a.txt", "--no-config").stdout)["confidence_before"] == 1.0
    flagged = json.loads(run("review", "a.txt", "-a", "other.json", "--no-config").stdout)
    assert flagged["confidence_before"] == pytest.approx(0.04)


def test_a_bad_sidecar_is_an_error_record_in_a_batch(run, write):
    write("d/a.txt", "one")
    write("d/a.activation.json", "[1, 2]")
    write("d/b.txt", "two")
    result = run("review", "d", "--no-config")
    got = records(result.stdout)
    assert [r["verdict"] for r in got] == ["error", "flagged"]
    sidecar = os.path.join("d", "a.activation.json")
    assert got[0]["error"] == f"{sidecar}: $: expected an object, got an array"
    assert result.exit_code == 3


CANNED = REPO / "examples" / "canned"


def test_canned_outputs_replay_from_the_committed_cache_offline(run, tmp_path, monkeypatch):
    monkeypatch.delenv("CRITIC_CACHE_DIR")  # the config's cache_dir, as on a CI machine
    report = tmp_path / "report.xml"
    result = run("review", str(CANNED / "drafts"), "--config", str(CANNED / "critic.yaml"),
                 "--offline", "-j", "16", "--format", "junit", "-o", str(report))
    assert result.exit_code == 1, result.stderr  # some drafts are revised or refused
    assert (result.stdout, result.stderr) == ("", "")
    import xml.etree.ElementTree as ET

    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("errors")) == ("12", "0")
    lines = run("review", str(CANNED / "drafts"), "--config", str(CANNED / "critic.yaml"),
                "--offline", "--format", "jsonl", "--fail-on", "never").stdout
    got = records(lines)
    assert [r["verdict"] for r in got].count("error") == 0
    assert all(r["reflection"]["cached"] for r in got if r["reflection"]["ran"])
    assert sum(r["reflection"]["ran"] for r in got) == 11


def big_jsonl(write, count: int = 2600) -> str:
    """Write a JSONL file large enough for the multi-process path, with some bad lines."""
    lines = []
    for i in range(count):
        if i % 997 == 5:
            lines.append("{broken")
            continue
        nodes = [{"score": (i % 10) / 10, "tags": ["credentials"] if i % 7 == 0 else []}]
        lines.append(json.dumps({"id": f"d{i}", "draft": f"draft {i} AKIA{'Q' * 16}" if i % 500
                                 == 3 else f"draft {i}", "activation": {"activated_nodes": nodes}}))
    return write("big.jsonl", "\n".join(lines) + "\n")


def test_many_drafts_on_several_processes_match_one_process(run, write):
    write("pack.yaml", "rules:\n  - id: aws\n    content: no keys\n    check: {pattern: "
                       "'AKIA[0-9A-Z]{16}', action: refuse}\n")
    path = big_jsonl(write)
    args = ("review", "--jsonl", path, "-r", "pack.yaml", "-t", "credentials", "--no-config")
    for fmt in ("jsonl", "json"):
        one = run(*args, "-j", "1", "--format", fmt)
        two = run(*args, "-j", "2", "--format", fmt)
        assert one.exit_code == two.exit_code == 3  # the broken lines are error records
        assert one.stdout == two.stdout
    got = records(run(*args, "-j", "2").stdout)
    assert len(got) == 2600
    assert [r["source"] for r in got[:7]] == ["d0", "d1", "d2", "d3", "d4", f"{path}:6", "d6"]
    assert got[3]["verdict"] == "refuse" and got[2003]["verdict"] == "refuse"
    for i in range(1990, 2020):  # across the hand-over from this process to the workers
        if i % 997 != 5:
            assert (got[i]["sensitive_tag_hit"] == "credentials") == (i % 7 == 0), i


def test_ctrl_c_during_a_multi_process_gate_only_run(tmp_path):
    path = tmp_path / "many.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for i in range(60_000):
            out.write(json.dumps({"id": f"d{i}", "draft": f"draft number {i} " * 20}) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRITIC_", "OPENAI_"))}
    command = [sys.executable, "-m", "critic_cli", "review", "--jsonl", str(path), "-j", "2",
               "--format", "jsonl", "--no-config"]
    with subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()  # the run is under way (the serial head is done)
        proc.send_signal(signal.SIGINT)
        rest = proc.stdout.read()  # this buffered reader: communicate() would skip its buffer
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 130, err
    assert err == b"critic: interrupted\n"
    lines = (first + rest).decode().splitlines()
    assert 0 < len(lines) < 60_000
    assert [json.loads(line)["source"] for line in lines] == [f"d{i}" for i in range(len(lines))]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_counts_rate_and_errors():
    from critic_cli.report.text import ProgressBar

    screen = _Terminal()
    with ProgressBar(3, file=screen) as bar:
        for verdict in ("approve", "error", "revise"):
            bar.advance(verdict)
        bar.progress.refresh()
        shown = screen.getvalue()
    assert "3/3" in shown
    assert "1 errors" in shown
    assert "/s" in shown


def test_sidecars_are_not_drafts_even_when_the_glob_matches_them(run, write):
    write("d/a.json", "{}")
    write("d/a.activation.json", SURE)
    result = run("review", "d", "--glob", "*.json", "--no-config")
    assert [r["source"] for r in records(result.stdout)] == [os.path.join("d", "a.json")]


def test_a_lone_surrogate_in_a_jsonl_id_is_that_line_s_error(run, write):
    write("in.jsonl", '{"id": "a", "draft": "x"}\n{"id": "\\ud800", "draft": "x"}\n'
                      '{"id": "c", "draft": "x"}\n')
    got = records(run("review", "--jsonl", "in.jsonl", "--no-config").stdout)
    assert [r["verdict"] for r in got] == ["flagged", "error", "flagged"]
    assert "lone surrogate" in got[1]["error"]


def test_reports_get_the_usual_file_mode(run, write):
    write("a.txt", "one")
    old = os.umask(0o022)
    try:
        run("review", "a.txt", "-o", "report.json", "--no-config")
    finally:
        os.umask(old)
    assert os.stat("report.json").st_mode & 0o777 == 0o644


def test_control_characters_in_a_source_do_not_reach_the_terminal(run, write):
    write("in.jsonl", json.dumps({"id": "x\u001b[31mred", "draft": "y"}) + "\n"
          + json.dumps({"id": "z", "draft": "y"}) + "\n")
    result = run("review", "--jsonl", "in.jsonl", "--format", "text", "--no-config")
    assert "\x1b" not in result.stdout
    assert "x\\x1b[31mred" in result.stdout
