"""Batch inference engines: prepare → engine → collect gives what ``critic review`` gives."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from critic_cli.batch import STATE_FORMAT, part_name, record_from_dict
from tests.batch_server import BatchEngine, VerdictJudge, play_engine, serve_batch_engine
from tests.conftest import Run, Write
from tests.judge import Reply, completion

KEY = "sk-batch-test-4f1c0a9e7d2b"
STRONG = {"activated_nodes": [{"score": 1.0}], "inference_paths": [["a"]] * 3,
          "traversed_edges": [{"weight": 5.0}]}
TAGGED = {"activated_nodes": [{"score": 1.0, "tags": ["credentials"]}],
          "inference_paths": [["a"]] * 3, "traversed_edges": [{"weight": 5.0}]}
PACK = """\
version: 1
sensitive_tags: [credentials]
preferences:
  - priority: 10
    statement: Never reveal keys
    sensitive_tags: [credentials]
  - priority: 5
    statement: Keep a courteous tone.
rules:
  - id: cite-figures
    content: When the draft states a figure, it names the source.
  - id: aws-key
    content: The draft holds no AWS access key.
    check:
      pattern: 'AKIA[0-9A-Z]{16}'
      action: refuse
      message: The draft contains an AWS access key.
  - id: email
    content: Contact addresses are redacted.
    check:
      pattern: '[a-z]+@example\\.com'
      action: revise
      replace: '[EMAIL]'
  - id: internal
    content: Internal code names get a second look.
    check:
      pattern: 'PROJECT-X'
      action: flag
"""


def line(ident: str, draft: str, activation: dict[str, Any] | None = None) -> str:
    entry: dict[str, Any] = {"id": ident, "draft": draft}
    if activation is not None:
        entry["activation"] = activation
    return json.dumps(entry)


MIXED = [
    line("plain", "All good here.", STRONG),                           # approve, no call
    line("tagged", "Your key is safe with us.", TAGGED),               # judge: approve
    line("revise", "Please [[revise]] this.", TAGGED),                 # judge: revise
    line("refuse", "Please [[refuse]] this.", TAGGED),                 # judge: refuse
    line("prefs", "Cites [[prefs]] loosely.", TAGGED),                 # approve, preference
    line("garble", "A [[garble]] reply.", TAGGED),                     # error: no JSON
    line("cutoff", "A [[cutoff]] reply.", TAGGED),                     # error: length
    line("aws", "Key AKIAABCDEFGHIJKLMNOP here.", TAGGED),             # refuse, no call
    line("email", "Write to bob@example.com today.", TAGGED),          # revise by the check
    line("flag", "About PROJECT-X.", STRONG),                          # gate: rule
    "{not json",                                                       # bad input
    line("cold", "No activation at all."),                             # low confidence
    line("unicode", "Ünïcödé ✓ \u2028 draft", TAGGED),                 # judge: approve
]
CLEAN = [entry for entry in MIXED if "garble" not in entry and "cutoff" not in entry
         and entry != "{not json"]


@pytest.fixture
def engine() -> Iterator[BatchEngine]:
    """Yield a loopback judge that is also an OpenAI-compatible Files + Batches API."""
    with serve_batch_engine() as state:
        yield state


def setup(write: Write, lines: list[str]) -> None:
    write("pack.yaml", PACK)
    write("drafts.jsonl", "\n".join(lines) + "\n")


def model_args(judge: VerdictJudge | BatchEngine) -> list[str]:
    return ["--jsonl", "drafts.jsonl", "-r", "pack.yaml", "--model", "judge",
            "--base-url", judge.base_url, "--no-config"]


def records(text: str) -> list[dict[str, Any]]:
    return [json.loads(entry) for entry in text.splitlines()]


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """Return a record without what differs between a live call and a batch: time and cache."""
    shown = {key: value for key, value in record.items() if key != "reflection_latency_ms"}
    shown["reflection"] = {k: v for k, v in record["reflection"].items() if k != "cached"}
    return shown


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(raw) for raw in handle if raw.strip()]


def prepare(run: Run, judge: VerdictJudge | BatchEngine, *extra: str) -> list[str]:
    result = run("batch", "prepare", *model_args(judge), *extra)
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def collect(run: Run, *results: str, exit_code: int = 3,
            state: str = "requests.jsonl.state.jsonl") -> list[dict[str, Any]]:
    result = run("batch", "collect", *results, "--state", state, "--format", "jsonl")
    assert result.exit_code == exit_code, result.output
    return records(result.stdout)


def review(run: Run, judge: VerdictJudge | BatchEngine, *extra: str,
           exit_code: int = 3) -> list[dict[str, Any]]:
    result = run("review", *model_args(judge), "--format", "jsonl", *extra)
    assert result.exit_code == exit_code, result.output
    return records(result.stdout)


# -- prepare → engine → collect equals review ----------------------------------------------------


def test_prepare_engine_collect_equals_a_direct_review(run: Run, write: Write,
                                                       engine: BatchEngine) -> None:
    setup(write, MIXED)
    files = prepare(run, engine)
    assert files == ["requests.jsonl"]
    assert play_engine(files, "results.jsonl", engine.origin) == 10
    batched = collect(run, "results.jsonl")
    direct = review(run, engine, "--no-cache")
    assert [comparable(r) for r in batched] == [comparable(r) for r in direct]
    assert [r["verdict"] for r in batched] == [
        "approve", "approve", "revise", "refuse", "approve", "error", "error", "refuse",
        "revise", "approve", "error", "approve", "approve"]
    assert batched[4]["matched_preferences"] == ["Never reveal keys"]
    assert batched[8]["revised_draft"] == "Write to [EMAIL] today."
    assert batched[5]["error"] == "reply holds no JSON object"
    assert batched[6]["error"] == "reply was cut off (finish_reason length)"


def test_request_bodies_are_exactly_what_review_sends(run: Run, write: Write,
                                                      engine: BatchEngine) -> None:
    setup(write, MIXED)
    prepare(run, engine, "--response-format", "json_object", "--temperature", "0.2")
    dry = run("review", *model_args(engine), "--response-format", "json_object",
              "--temperature", "0.2", "--dry-run")
    assert dry.exit_code == 0, dry.output
    decoder, text, position, bodies = json.JSONDecoder(), dry.stdout, 0, []
    while position < len(text.rstrip()):
        value, position = decoder.raw_decode(text, position)
        bodies.append(value["body"])
        while position < len(text) and text[position].isspace():
            position += 1
    requests = read_jsonl("requests.jsonl")
    assert [r["body"] for r in requests] == bodies
    assert all(r["method"] == "POST" and r["url"] == "/v1/chat/completions" for r in requests)
    assert all(b["response_format"] == {"type": "json_object"} for b in bodies)


def test_auto_sends_the_json_schema_format(run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, [line("tagged", "x", TAGGED)])
    prepare(run, engine)
    (request,) = read_jsonl("requests.jsonl")
    assert request["body"]["response_format"]["type"] == "json_schema"
    assert request["custom_id"].startswith("critic-0-")


def test_state_holds_decided_records_and_pending_drafts_in_order(
        run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, MIXED)
    prepare(run, engine)
    header, *body, trailer = read_jsonl("requests.jsonl.state.jsonl")
    assert header["format"] == STATE_FORMAT and header["model"] == "judge"
    assert [entry["i"] for entry in body] == list(range(len(MIXED)))
    assert trailer == {"end": True, "inputs": 13, "decided": 3, "pending": 10,
                       "files": ["requests.jsonl"]}
    pending = [entry["custom_id"] for entry in body if "custom_id" in entry]
    assert pending == [r["custom_id"] for r in read_jsonl("requests.jsonl")]
    assert record_from_dict(body[0]["record"]).to_dict() == body[0]["record"]


def test_custom_ids_are_unique_and_stable(run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, MIXED)
    prepare(run, engine, "--no-cache")
    first = Path("requests.jsonl").read_bytes()
    prepare(run, engine, "--no-cache")
    assert Path("requests.jsonl").read_bytes() == first
    ids = [r["custom_id"] for r in read_jsonl("requests.jsonl")]
    assert len(set(ids)) == len(ids) == 10


# -- the cache ------------------------------------------------------------------------------------


def test_collect_fills_the_cache_so_review_offline_replays_it(
        run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, CLEAN)
    play_engine(prepare(run, engine), "results.jsonl", engine.origin)
    batched = collect(run, "results.jsonl", exit_code=1)
    calls = len(engine.judge.requests)
    replayed = review(run, engine, "--offline", exit_code=1)
    assert len(engine.judge.requests) == calls
    assert [comparable(r) for r in replayed] == [comparable(r) for r in batched]
    assert [r["reflection"]["cached"] for r in replayed] == [
        r["reflection"]["ran"] for r in replayed]


def test_cache_hits_are_decided_at_prepare_and_not_sent(
        run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, CLEAN[:4])
    review(run, engine, exit_code=1)  # fills the cache for the first four drafts
    setup(write, CLEAN)
    result = run("batch", "prepare", *model_args(engine))
    assert result.exit_code == 0, result.output
    assert result.stderr == ("critic: 10 drafts: 5 decided locally (3 from the cache), "
                             "5 requests in 1 file; state in requests.jsonl.state.jsonl\n")
    ids = [r["custom_id"] for r in read_jsonl("requests.jsonl")]
    assert [int(i.split("-")[1]) for i in ids] == [4, 6, 7, 8, 9]
    play_engine(["requests.jsonl"], "results.jsonl", engine.origin)
    batched = collect(run, "results.jsonl", exit_code=1)
    assert [r["reflection"]["cached"] for r in batched] == [
        False, True, True, True, False, False, False, False, False, False]
    direct = review(run, engine, "--no-cache", exit_code=1)
    assert [comparable(r) for r in batched] == [comparable(r) for r in direct]


def test_nothing_to_send_writes_no_request_file(run: Run, write: Write,
                                                engine: BatchEngine) -> None:
    setup(write, [line("plain", "fine", STRONG), line("aws", "AKIAABCDEFGHIJKLMNOP", TAGGED)])
    result = run("batch", "prepare", *model_args(engine))
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and not os.path.exists("requests.jsonl")
    assert [r["verdict"] for r in collect(run, exit_code=1)] == ["approve", "refuse"]


def test_no_cache_sends_everything_and_collect_caches_nothing(
        run: Run, write: Write, engine: BatchEngine, clean_env: Path) -> None:
    setup(write, CLEAN)
    play_engine(prepare(run, engine, "--no-cache"), "results.jsonl", engine.origin)
    collect(run, "results.jsonl", exit_code=1)
    assert not (clean_env.parent / "cache").exists()


# -- the engine's failures are errors, never approvals --------------------------------------------


def output_line(custom_id: str, body: Any, status: int = 200,
                error: Any = None) -> str:
    response = None if body is None else {"status_code": status, "request_id": "r",
                                          "body": body}
    return json.dumps({"id": "batch_req", "custom_id": custom_id, "response": response,
                       "error": error})


def approve() -> dict[str, Any]:
    return completion(json.dumps({"verdict": "approve", "text": "",
                                  "matched_preferences": []}))


def test_every_failure_in_the_output_is_an_error_record(
        run: Run, write: Write, engine: BatchEngine, clean_env: Path) -> None:
    setup(write, [line(f"d{i}", f"Draft {i}.", TAGGED) for i in range(9)])
    prepare(run, engine)
    ids = [r["custom_id"] for r in read_jsonl("requests.jsonl")]
    write("results.jsonl", "\n".join([
        output_line(ids[0], approve()),
        output_line(ids[1], None, error={"code": "server_error", "message": "boom"}),
        output_line(ids[2], {"error": {"message": "upstream down"}}, status=500),
        f'{{"id": "x", "custom_id": "{ids[3]}", "response": {{"status_code": 200, ',
        output_line(ids[4], approve()),
        output_line(ids[4], approve()),
        # ids[5]: no line at all
        output_line(ids[6], completion('{"verdict": "approve"}', finish_reason="length")),
        output_line(ids[7], "not an object"),
        output_line(ids[8], {"error": {"message": "bad response_format"}}, status=400),
        "complete garbage",
        output_line("critic-99-0000000000000000", approve()),
    ]) + "\n")
    result = run("batch", "collect", "results.jsonl", "--state", "requests.jsonl.state.jsonl",
                 "--format", "jsonl")
    assert result.exit_code == 3, result.output
    got = records(result.stdout)
    assert [r["verdict"] for r in got] == ["approve"] + ["error"] * 8
    assert [r["error"] for r in got[1:]] == [
        "the batch engine failed the request: server_error: boom",
        "model call failed: HTTP 500 from the batch engine: upstream down",
        f"results.jsonl: malformed output line for {ids[3]} (not JSON)",
        f"the batch engine returned 2 results for {ids[4]}; none was used",
        "no result from the batch engine",
        "reply was cut off (finish_reason length)",
        "model call failed: HTTP 200 from the batch engine: reply is not a JSON object",
        "model call failed: HTTP 400 from the batch engine: bad response_format",
    ]
    assert all(r["reflection"]["ran"] and r["reflection"]["error"] == r["error"]
               for r in got[1:])
    assert result.stderr == (
        "critic: warning: 1 output lines name no custom_id and were skipped "
        "(results.jsonl:10)\n"
        "critic: warning: 1 results name a custom_id this state does not wait for "
        "(output of another prepare?)\n")
    cached = list((clean_env.parent / "cache").rglob("*.json"))
    assert len(cached) == 1  # only the one valid reply


def test_error_files_are_read_with_the_output(run: Run, write: Write,
                                              engine: BatchEngine) -> None:
    setup(write, CLEAN)
    engine.judge.script(Reply(status=429, json={"error": {"message": "slow down"}}))
    play_engine(prepare(run, engine), "out.jsonl", engine.origin, errors="err.jsonl")
    assert len(read_jsonl("err.jsonl")) == 1
    got = collect(run, "out.jsonl", "err.jsonl")
    errors = [r for r in got if r["verdict"] == "error"]
    assert [r["error"] for r in errors] == [
        "model call failed: HTTP 429 from the batch engine: slow down"]
    assert got[1]["verdict"] == "error"  # the first request sent


def test_missing_output_file_lines_are_no_result_errors(run: Run, write: Write,
                                                        engine: BatchEngine) -> None:
    setup(write, CLEAN)
    prepare(run, engine)
    write("empty.jsonl", "")
    got = collect(run, "empty.jsonl")
    assert {r["error"] for r in got if r["reflection"]["ran"]} == {
        "no result from the batch engine"}
    assert "approve" in {r["verdict"] for r in got if not r["reflection"]["ran"]}


def test_collect_needs_result_files_when_drafts_are_pending(run: Run, write: Write,
                                                            engine: BatchEngine) -> None:
    setup(write, CLEAN)
    prepare(run, engine)
    result = run("batch", "collect", "--state", "requests.jsonl.state.jsonl")
    assert result.exit_code == 2
    assert result.stderr == ("critic: error: requests.jsonl.state.jsonl: 8 drafts wait for "
                             "results: name the engine's output (and error) files\n")


def test_a_truncated_state_file_is_refused(run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, CLEAN)
    play_engine(prepare(run, engine), "results.jsonl", engine.origin)
    lines = Path("requests.jsonl.state.jsonl").read_text(encoding="utf-8").splitlines()
    write("cut.jsonl", "\n".join(lines[:-3]) + "\n")
    result = run("batch", "collect", "results.jsonl", "--state", "cut.jsonl")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ("critic: error: cut.jsonl: the state file is incomplete (no end "
                             "line); run `critic batch prepare` again\n")
    result = run("batch", "collect", "results.jsonl", "--state", "requests.jsonl")
    assert result.exit_code == 2
    assert "not a critic batch state file" in result.stderr


def test_fail_on_applies_to_collect(run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, CLEAN)
    play_engine(prepare(run, engine, "--fail-on", "refuse"), "results.jsonl", engine.origin)
    collect(run, "results.jsonl", exit_code=1)
    result = run("batch", "collect", "results.jsonl", "--state", "requests.jsonl.state.jsonl",
                 "--fail-on", "never", "-o", "report.sarif", "--format", "sarif")
    assert result.exit_code == 0, result.output
    assert json.loads(Path("report.sarif").read_text(encoding="utf-8"))["version"] == "2.1.0"


# -- splitting -----------------------------------------------------------------------------------


def test_max_lines_splits_requests_into_several_files(run: Run, write: Write,
                                                      engine: BatchEngine) -> None:
    setup(write, [line(f"d{i}", f"Draft {i}.", TAGGED) for i in range(7)])
    files = prepare(run, engine, "--max-lines", "3")
    assert files == ["requests.jsonl", "requests.001.jsonl", "requests.002.jsonl"]
    assert [len(read_jsonl(f)) for f in files] == [3, 3, 1]
    ids = [r["custom_id"] for f in files for r in read_jsonl(f)]
    state = read_jsonl("requests.jsonl.state.jsonl")
    assert ids == [entry["custom_id"] for entry in state[1:-1]]
    assert len(set(ids)) == 7
    play_engine(files, "results.jsonl", engine.origin)
    assert [r["verdict"] for r in collect(run, "results.jsonl", exit_code=0)] == ["approve"] * 7


def test_max_bytes_splits_and_an_oversized_request_is_an_error(
        run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, [line(f"d{i}", f"Draft {i}.", TAGGED) for i in range(5)]
          + [line("big", "x" * 20_000, TAGGED)])
    prepare(run, engine, "--no-cache", "--max-lines", "100")
    size = len(Path("requests.jsonl").read_bytes().splitlines(keepends=True)[0])
    files = prepare(run, engine, "--max-bytes", str(2 * size + 10), "-o", "part.jsonl")
    assert files == ["part.jsonl", "part.001.jsonl", "part.002.jsonl"]
    assert all(os.path.getsize(f) <= 2 * size + 10 for f in files)
    got = collect(run, *files, state="part.jsonl.state.jsonl")
    assert got[-1]["verdict"] == "error"
    assert got[-1]["error"].startswith("the request is ")
    assert "more than --max-bytes" in got[-1]["error"]


def test_part_names() -> None:
    assert part_name("requests.jsonl", 0) == "requests.jsonl"
    assert part_name("out/requests.jsonl", 12) == "out/requests.012.jsonl"
    assert part_name("batch", 1000) == "batch.1000"


def test_files_left_by_an_earlier_prepare_are_named(run: Run, write: Write,
                                                    engine: BatchEngine) -> None:
    setup(write, [line(f"d{i}", f"Draft {i}.", TAGGED) for i in range(4)])
    prepare(run, engine, "--max-lines", "1")
    result = run("batch", "prepare", *model_args(engine), "--max-lines", "2", "--quiet")
    assert result.exit_code == 0
    assert result.stdout == "requests.jsonl\nrequests.001.jsonl\n"
    assert result.stderr == (
        "critic: warning: requests.002.jsonl is left from an earlier prepare; it is not part "
        "of this batch\n"
        "critic: warning: requests.003.jsonl is left from an earlier prepare; it is not part "
        "of this batch\n")


def test_prepare_needs_a_model(run: Run, write: Write) -> None:
    setup(write, CLEAN)
    result = run("batch", "prepare", "--jsonl", "drafts.jsonl", "--no-config")
    assert result.exit_code == 2
    assert result.stderr == ("critic: error: batch prepare writes model requests: name a "
                             "--model (and drop --no-reflect)\n")
    assert not os.path.exists("requests.jsonl.state.jsonl")


def test_prepare_reads_paths_and_directories(run: Run, write: Write,
                                             engine: BatchEngine) -> None:
    write("drafts/a.txt", "one")
    write("drafts/b.txt", b"\xff bad")
    write("drafts/c.md", "three")
    result = run("batch", "prepare", "drafts", "--model", "judge", "--base-url",
                 engine.base_url, "--no-config")
    assert result.exit_code == 0, result.output
    assert len(read_jsonl("requests.jsonl")) == 2  # cold start: 0.5 < 0.6, the gate fires
    play_engine(["requests.jsonl"], "results.jsonl", engine.origin)
    got = collect(run, "results.jsonl")
    direct = run("review", "drafts", "--model", "judge", "--base-url", engine.base_url,
                 "--no-config", "--no-cache", "--format", "jsonl")
    assert [comparable(r) for r in got] == [comparable(r) for r in records(direct.stdout)]


# -- the OpenAI Batch API: submit, status, fetch ----------------------------------------------


def api_args(engine: BatchEngine) -> list[str]:
    return ["--base-url", engine.base_url, "--no-config"]


def test_submit_status_fetch_collect_through_the_batch_api(
        run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, MIXED)
    files = prepare(run, engine, "--max-lines", "6")
    assert len(files) == 2
    submitted = run("batch", "submit", *files, *api_args(engine))
    assert submitted.exit_code == 0, submitted.output
    ids = submitted.stdout.split()
    assert ids == ["batch_1", "batch_2"]
    assert submitted.stderr == (
        "critic: requests.jsonl: 6 requests → batch batch_1 (file file-1)\n"
        "critic: requests.001.jsonl: 4 requests → batch batch_2 (file file-2)\n")
    batch = engine.batches["batch_1"]
    assert (batch.endpoint, batch.completion_window) == ("/v1/chat/completions", "24h")
    assert engine.files["file-1"].data == Path("requests.jsonl").read_bytes()
    assert engine.files["file-1"].purpose == "batch"

    early = run("batch", "status", *ids, *api_args(engine))
    assert early.exit_code == 0
    assert early.stdout == ("batch_1 in_progress 0/6 done, 0 failed\n"
                            "batch_2 in_progress 0/4 done, 0 failed\n")
    waited = run("batch", "status", *ids, "--wait", "--interval", "0.01", *api_args(engine))
    assert waited.exit_code == 0, waited.output
    assert waited.stdout == ("batch_1 completed 6/6 done, 0 failed output=file-3\n"
                             "batch_2 completed 4/4 done, 0 failed output=file-4\n")
    as_json = run("batch", "status", "batch_1", "--json", *api_args(engine))
    assert json.loads(as_json.stdout)["status"] == "completed"

    fetched = run("batch", "fetch", *ids, "-o", "results", *api_args(engine))
    assert fetched.exit_code == 0, fetched.output
    paths = fetched.stdout.split()
    assert paths == [os.path.join("results", "batch_1.output.jsonl"),
                     os.path.join("results", "batch_2.output.jsonl")]
    batched = collect(run, *paths)
    direct = review(run, engine, "--no-cache")
    assert [comparable(r) for r in batched] == [comparable(r) for r in direct]


def test_status_wait_shows_progress_and_a_failed_batch_exits_3(
        run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, CLEAN)
    files = prepare(run, engine)
    engine.fail_batches = True
    (batch_id,) = run("batch", "submit", *files, *api_args(engine), "-q").stdout.split()
    result = run("batch", "status", batch_id, "--wait", "--interval", "0.01", *api_args(engine))
    assert result.exit_code == 3
    assert result.stdout == "batch_1 failed 0/8 done, 0 failed\n"
    assert result.stderr == "critic: batch_1 in_progress 0/8 done, 0 failed\n"
    fetched = run("batch", "fetch", batch_id, "-o", "results", *api_args(engine))
    assert fetched.exit_code == 3
    assert fetched.stderr == ("critic: error: batch batch_1 is failed and has no output or "
                              "error file\n")


def test_fetch_before_the_batch_is_done_is_a_usage_error(
        run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, CLEAN)
    files = prepare(run, engine)
    (batch_id,) = run("batch", "submit", *files, *api_args(engine), "-q").stdout.split()
    result = run("batch", "fetch", batch_id, "-o", "results", *api_args(engine))
    assert result.exit_code == 2
    assert result.stderr == ("critic: error: batch batch_1 is in_progress: no results yet "
                             "(wait with `critic batch status --wait`)\n")


def test_submit_refuses_a_state_file_and_names_an_unreachable_server(
        run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, CLEAN)
    prepare(run, engine)
    result = run("batch", "submit", "requests.jsonl.state.jsonl", *api_args(engine))
    assert result.exit_code == 2
    assert result.stderr == ("critic: error: requests.jsonl.state.jsonl: is a critic state "
                             "file, not a request file\n")
    result = run("batch", "submit", "requests.jsonl", "--base-url", "http://127.0.0.1:9/v1",
                 "--max-retries", "0", "--no-config")
    assert result.exit_code == 3
    assert result.stderr == ("critic: error: uploading requests.jsonl failed: could not "
                             "connect to http://127.0.0.1:9/v1\n")


def test_api_errors_are_one_line(run: Run, write: Write, engine: BatchEngine) -> None:
    result = run("batch", "status", "batch_missing", *api_args(engine))
    assert result.exit_code == 3
    assert result.stderr == ("critic: error: reading batch batch_missing failed: HTTP 404 from "
                             f"{engine.base_url}: no /v1/batches/batch_missing\n")


def test_the_api_key_never_appears_in_files_or_output(
        run: Run, write: Write, engine: BatchEngine, clean_env: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRITIC_API_KEY", KEY)
    setup(write, MIXED)
    outputs = []
    prepared = run("batch", "prepare", *model_args(engine))
    submitted = run("batch", "submit", "requests.jsonl", *api_args(engine))
    waited = run("batch", "status", *submitted.stdout.split(), "--wait", "--interval", "0.01",
                 "--json", *api_args(engine))
    fetched = run("batch", "fetch", *submitted.stdout.split(), "-o", "results",
                  *api_args(engine))
    collected = run("batch", "collect", *fetched.stdout.split(), "--state",
                    "requests.jsonl.state.jsonl", "-v")
    failed = run("batch", "status", "nope", *api_args(engine))
    outputs = [prepared, submitted, waited, fetched, collected, failed]
    assert [r.exit_code for r in outputs] == [0, 0, 0, 0, 3, 3]
    for result in outputs:
        assert KEY not in result.stdout and KEY not in result.stderr
    for path in clean_env.parent.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert {headers.get("authorization") for _, _, headers in engine.calls} == {
        f"Bearer {KEY}"}


def test_batch_help_lists_every_command(run: Run) -> None:
    result = run("batch", "--help")
    assert result.exit_code == 0
    for command in ("prepare", "collect", "submit", "status", "fetch"):
        assert command in result.stdout
        assert run("batch", command, "--help").exit_code == 0


def test_a_result_file_named_twice_is_refused(run: Run, write: Write,
                                              engine: BatchEngine) -> None:
    setup(write, CLEAN)
    play_engine(prepare(run, engine), "results.jsonl", engine.origin)
    result = run("batch", "collect", "results.jsonl", "./results.jsonl", "--state",
                 "requests.jsonl.state.jsonl")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ("critic: error: ./results.jsonl: named twice (also as "
                             "results.jsonl)\n")


def test_a_long_end_line_is_still_found(run: Run, write: Write, engine: BatchEngine) -> None:
    setup(write, [line(f"d{i}", f"Draft {i}.", TAGGED) for i in range(3)])
    play_engine(prepare(run, engine), "results.jsonl", engine.origin)
    *lines, end = Path("requests.jsonl.state.jsonl").read_text(encoding="utf-8").splitlines()
    trailer = json.loads(end)
    trailer["files"] = ["requests.jsonl"] * 20_000  # as after --max-lines 1 on many drafts
    write("requests.jsonl.state.jsonl", "\n".join([*lines, json.dumps(trailer)]) + "\n")
    assert [r["verdict"] for r in collect(run, "results.jsonl", exit_code=0)] == ["approve"] * 3


def test_the_openai_endpoint_needs_a_key(run: Run) -> None:
    result = run("batch", "status", "batch_1", "--no-config")
    assert result.exit_code == 2
    assert result.stderr.startswith("critic: error: the OpenAI Batch API needs a key")


def test_an_unwritable_request_file_is_one_line_and_leaves_nothing(
        run: Run, write: Write, engine: BatchEngine, clean_env: Path) -> None:
    setup(write, CLEAN)
    result = run("batch", "prepare", *model_args(engine), "-o", "x" * 300 + ".jsonl",
                 "--state", "state.jsonl")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (f"critic: error: {'x' * 300}.jsonl: cannot write: File name too "
                             "long\n")
    assert sorted(os.listdir(clean_env)) == ["drafts.jsonl", "pack.yaml"]


def test_vllm_error_lines_are_error_records(run: Run, write: Write,
                                            engine: BatchEngine) -> None:
    setup(write, [line(f"d{i}", f"Draft {i}.", TAGGED) for i in range(3)])
    prepare(run, engine)
    ids = [r["custom_id"] for r in read_jsonl("requests.jsonl")]

    def vllm(custom_id: str, status: int, error: Any) -> str:
        return json.dumps({"id": "vllm-1", "custom_id": custom_id, "response": {
            "status_code": status, "request_id": "vllm-batch-1", "body": None}, "error": error})

    write("results.jsonl", "\n".join([
        vllm(ids[0], 400, "The model does not support Chat Completions API"),
        vllm(ids[1], 400, {"error": {"message": "schema not supported", "type": "BadRequest",
                                     "param": None, "code": 400}}),
        output_line(ids[2], approve()),
    ]) + "\n")
    got = collect(run, "results.jsonl")
    assert [r["error"] for r in got] == [
        "the batch engine failed the request: The model does not support Chat Completions API",
        "the batch engine failed the request: 400: schema not supported",
        None,
    ]
