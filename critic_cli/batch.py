"""Batch inference engines: write request files, collect their results, drive the Batch API.

    prepare   inputs → gate → checks locally; every draft that needs the model becomes one
              OpenAI Batch API request line; everything else is decided now. A state file
              keeps, for each input in order, its record or what ``collect`` needs to finish it.
    (engine)  OpenAI's Batch API (``submit``, ``status``, ``fetch``), ``vllm run-batch``, or any
              engine that writes OpenAI-format output lines.
    collect   the engine's output and error files + the state → records in input order, every
              reply read by the same fail-closed parser as ``critic review``; valid replies fill
              the cache under the key ``critic review`` uses, so a later review replays them.

Both ends stream: memory stays flat with the number of drafts. ``collect`` indexes the output
files by ``custom_id`` in a temporary SQLite file (id → file, offset, length) and reads each
reply back when the state reaches its draft.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, Final, NamedTuple

from critic_cli import __version__, inputs
from critic_cli import config as config_module
from critic_cli.errors import CriticError, InputError, ReflectionError, UsageError
from critic_cli.record import Gate, Record, Reflection, Summary

if TYPE_CHECKING:
    import sqlite3
    from concurrent.futures import Future

    from openai import OpenAI  # noqa: TID251 - for types only

    from critic_cli.cache import Cache
    from critic_cli.review import Assessment, Plan
    from critic_cli.rules import Preference

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_LINES",
    "ENDPOINT",
    "STATE_FORMAT",
    "CollectRequest",
    "PrepareRequest",
    "Prepared",
    "collect",
    "fetch",
    "part_name",
    "prepare",
    "record_from_dict",
    "status",
    "submit",
]

STATE_FORMAT = "critic-batch-state-v1"
ENDPOINT: Final = "/v1/chat/completions"
COMPLETION_WINDOW: Final = "24h"
DEFAULT_MAX_LINES = 50_000  # OpenAI: at most 50,000 requests per batch
DEFAULT_MAX_FILE_BYTES = 200_000_000  # OpenAI: input files up to 200 MB
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
NO_RESULT = "no result from the batch engine"
NO_KEY = "not-needed"
_SNIPPET = 120
_CUSTOM_ID = re.compile(rb'"custom_id"\s*:\s*"((?:[^"\\]|\\.)*)"')
_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _line(value: Any) -> bytes:
    return (_DUMPS(value) + "\n").encode("utf-8", "surrogatepass")


def _diagnose(message: str) -> None:
    sys.stderr.write(f"critic: {message}\n")


# -- prepare ----------------------------------------------------------------------------------


class PrepareRequest(NamedTuple):
    """What to prepare and where to write it (the options that are not review settings)."""

    paths: list[str] = []  # read-only
    activation: str | None = None
    jsonl: str | None = None
    output: str = "requests.jsonl"
    state: str | None = None
    max_lines: int = DEFAULT_MAX_LINES
    max_bytes: int = DEFAULT_MAX_FILE_BYTES
    config: str | None = None
    use_config: bool = True


class Prepared(NamedTuple):
    """What ``prepare`` wrote: request files, the state file and the counts."""

    files: list[str]
    state: str
    inputs: int
    decided: int
    cached: int
    pending: int
    stale: list[str]


def part_name(path: str, part: int) -> str:
    """Return the name of request file ``part``: ``requests.jsonl``, ``requests.001.jsonl``..."""
    if part == 0:
        return path
    stem, ext = os.path.splitext(path)
    return f"{stem}.{part:03d}{ext}"


class _AtomicFile:
    """A binary file written under a temporary name and renamed into place on commit."""

    def __init__(self, path: str) -> None:
        from critic_cli.output import temporary_beside

        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise UsageError(f"{path}: no such directory {folder}")
        if os.path.isdir(path):
            raise UsageError(f"{path}: is a directory")
        self.path = path
        self.lines = 0
        self.size = 0
        with self._failing("create"):
            self.stream: IO[bytes]
            self.stream, self.temporary = temporary_beside(path, binary=True)

    @contextlib.contextmanager
    def _failing(self, what: str) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            raise UsageError(f"{self.path}: cannot {what}: {exc.strerror or exc}") from None

    def write(self, data: bytes) -> None:
        with self._failing("write"):
            self.stream.write(data)
        self.lines += 1
        self.size += len(data)

    def commit(self) -> None:
        with self._failing("write"):
            self.stream.close()
            os.replace(self.temporary, self.path)

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.stream.close()
        with contextlib.suppress(OSError):
            os.unlink(self.temporary)


class _Parts:
    """Request lines split into files under the engine's limits of lines and bytes per file."""

    def __init__(self, path: str, max_lines: int, max_bytes: int) -> None:
        self.path = path
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.done: list[_AtomicFile] = []
        self.current: _AtomicFile | None = None

    def fits(self, data: bytes) -> bool:
        """Return True when a line of this size fits in a file at all."""
        return len(data) <= self.max_bytes

    def add(self, data: bytes) -> None:
        current = self.current
        if current is not None and (current.lines >= self.max_lines
                                    or current.size + len(data) > self.max_bytes):
            self.done.append(current)
            current = None
        if current is None:
            current = self.current = _AtomicFile(part_name(self.path, len(self.done)))
        current.write(data)

    def files(self) -> list[_AtomicFile]:
        return self.done + ([self.current] if self.current is not None else [])


def _items(request: PrepareRequest, max_bytes: int, globs: Sequence[str]
           ) -> Iterator[inputs.Item]:
    """Yield the inputs in order: paths (directories walked), then JSONL lines."""
    paths = list(request.paths)
    if not paths and request.jsonl is None:
        raise UsageError("no drafts given: name files or directories, '-' for stdin, "
                         "or --jsonl FILE")
    activation = inputs.open_sources(paths, request.jsonl, request.activation)
    yield from inputs.drafts(paths, request.jsonl, activation, globs=globs,
                             max_bytes=max_bytes)


def _header(the_plan: Plan, kind: str) -> dict[str, Any]:
    from critic_cli.provider import safe_url

    settings = the_plan.settings
    cache = the_plan.cache
    return {
        "format": STATE_FORMAT, "critic": __version__, "endpoint": ENDPOINT,
        "model": settings.model,
        "base_url": safe_url(settings.base_url) if settings.base_url else None,
        "response_format": settings.response_format, "response_kind": kind,
        "fail_on": settings.fail_on, "refusal_message": settings.refusal_message,
        "preferences": [[p.priority, p.statement] for p in the_plan.ruleset.preferences],
        "cache_dir": os.path.abspath(cache.directory) if cache is not None else None,
    }


def _pending_line(index: int, custom_id: str, key: str, a: Assessment) -> dict[str, Any]:
    return {
        "i": index, "custom_id": custom_id, "key": key, "source": a.draft.source,
        "confidence": a.confidence, "hit": a.hit,
        "gate": [a.gate.fired, a.gate.reason, a.gate.threshold],
        "checks": [hit.to_dict() for hit in a.hits], "text": a.text,
        "rules_used": list(a.rules_used),
    }


def prepare(flags: Mapping[str, Any], request: PrepareRequest) -> Prepared:
    """Decide what can be decided locally; write request files for the rest, and the state."""
    from critic_cli.provider import request_body, response_kinds
    from critic_cli.review import Assessment, Outcome, Reflector, finish, plan, triage

    if request.max_lines < 1:
        raise UsageError("--max-lines must be at least 1")
    if request.max_bytes < 1:
        raise UsageError("--max-bytes must be at least 1")
    settings = config_module.resolve(flags, config=request.config, use_config=request.use_config)
    the_plan = plan(settings)
    if the_plan.provider is None:
        raise UsageError("batch prepare writes model requests: name a --model (and drop "
                         "--no-reflect)")
    provider = the_plan.provider
    kind = response_kinds(provider.response_format)[0]
    reflector = Reflector(the_plan)
    state_path = request.state or f"{request.output}.state.jsonl"
    if os.path.abspath(state_path) == os.path.abspath(request.output):
        raise UsageError("--state must name another file than --output")
    items = _items(request, settings.max_bytes, settings.glob)
    parts = _Parts(request.output, request.max_lines, request.max_bytes)
    state = _AtomicFile(state_path)
    count = decided = cached = pending = 0
    try:
        state.write(_line(_header(the_plan, kind)))
        for index, item in enumerate(items):
            count += 1
            result = triage(the_plan, item)
            if isinstance(result, Assessment):
                key = reflector.key(result.messages)
                outcome = reflector.cached(key)
                record = finish(the_plan, result, outcome) if outcome is not None else None
                if record is None:
                    custom_id = f"critic-{index}-{key[:16]}"
                    data = _line({"custom_id": custom_id, "method": "POST", "url": ENDPOINT,
                                  "body": request_body(provider, result.messages, kind)})
                    if parts.fits(data):
                        parts.add(data)
                        state.write(_line(_pending_line(index, custom_id, key, result)))
                        pending += 1
                        continue
                    record = finish(the_plan, result, Outcome("error", error=(
                        f"the request is {len(data)} bytes, more than --max-bytes "
                        f"({request.max_bytes}) allows in one request file")))
                else:
                    cached += 1
                result = record
            state.write(_line({"i": index, "record": result.to_dict()}))
            decided += 1
        files = parts.files()
        state.write(_line({"end": True, "inputs": count, "decided": decided,
                           "pending": pending, "files": [f.path for f in files]}))
        for part in files:
            part.commit()
        state.commit()
    except BaseException:
        for part in parts.files():
            part.discard()
        state.discard()
        raise
    return Prepared([f.path for f in files], state_path, count, decided, cached, pending,
                    _stale(request.output, len(files)))


def _stale(path: str, count: int) -> list[str]:
    """Return request files left by an earlier, larger prepare beside the ones just written."""
    stale: list[str] = []
    part = count
    while os.path.exists(name := part_name(path, part)):
        stale.append(name)
        part += 1
    return stale


# -- collect ----------------------------------------------------------------------------------


class CollectRequest(NamedTuple):
    """The engine's files, the state, and how to report."""

    results: list[str]
    state: str
    output_format: str | None = None
    output: str | None = None
    fail_on: str | None = None
    cache_dir: str | None = None
    use_cache: bool = True
    quiet: bool = False
    verbose: bool = False


def record_from_dict(data: Mapping[str, Any]) -> Record:
    """Return the Record whose ``to_dict()`` is ``data`` (the draft text is not kept)."""
    gate = data["gate"]
    reflection = data["reflection"]
    return Record(
        verdict=data["verdict"], confidence_before=data["confidence_before"],
        sensitive_tag_hit=data["sensitive_tag_hit"], source=data["source"],
        gate=Gate(gate["fired"], gate["reason"], gate["threshold"]),
        revised_draft=data["revised_draft"], refusal_message=data["refusal_message"],
        matched_preferences=tuple(data["matched_preferences"]),
        reflection_latency_ms=data["reflection_latency_ms"],
        reflection=Reflection(reflection["ran"], reflection["model"], reflection["cached"],
                              reflection["error"]),
        checks=tuple(dict(check) for check in data["checks"]),
        rules_used=tuple(data["rules_used"]), error=data["error"],
    )


def _read_state_ends(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return the state file's header and trailer; fail when either is missing."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline()
            tail = _last_line(handle)
    except FileNotFoundError:
        raise InputError(f"{path}: no such state file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read state: {exc.strerror or exc}") from None
    try:
        header = json.loads(first)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != STATE_FORMAT:
        raise InputError(f"{path}: not a critic batch state file (written by "
                         "`critic batch prepare`)")
    try:
        trailer = json.loads(tail)
    except ValueError:
        trailer = None
    if not isinstance(trailer, dict) or trailer.get("end") is not True:
        raise InputError(f"{path}: the state file is incomplete (no end line); "
                         "run `critic batch prepare` again")
    return header, trailer


def _last_line(handle: IO[bytes], chunk: int = 65536) -> bytes:
    """Return the last non-empty line of a file, reading backwards from its end."""
    end = handle.seek(0, os.SEEK_END)
    tail = b""
    while end > 0:
        start = max(0, end - chunk)
        handle.seek(start)
        tail = handle.read(end - start) + tail
        end = start
        stripped = tail.rstrip(b"\r\n")
        if b"\n" in stripped:
            return stripped.rsplit(b"\n", 1)[1]
    return tail.rstrip(b"\r\n")


class _Index:
    """custom_id → (file, offset, length, copies) over the engine's files, in temporary SQLite."""

    def __init__(self, paths: Sequence[str]) -> None:
        import sqlite3
        import tempfile

        self.paths = list(paths)
        self._folder = tempfile.TemporaryDirectory(prefix="critic-collect-")
        self.db: sqlite3.Connection = sqlite3.connect(os.path.join(self._folder.name, "index"))
        self.db.executescript(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-16000;"
            "CREATE TABLE results (id TEXT PRIMARY KEY, file INTEGER, offset INTEGER,"
            " length INTEGER, copies INTEGER) WITHOUT ROWID;")
        self.streams: list[IO[bytes]] = []
        self.unattributed: list[str] = []
        self.unattributed_count = 0

    def build(self) -> None:
        """Read every file once and index each line by its custom_id."""
        insert = ("INSERT INTO results VALUES (?, ?, ?, ?, 1) "
                  "ON CONFLICT(id) DO UPDATE SET copies = copies + 1")
        for number, path in enumerate(self.paths):
            stream = self._open(path)
            self.streams.append(stream)
            rows: list[tuple[str, int, int, int]] = []
            offset = 0
            for line_number, raw in enumerate(stream, start=1):
                if raw.strip():
                    custom_id = _custom_id(raw)
                    if custom_id is None:
                        self.unattributed_count += 1
                        if len(self.unattributed) < 3:
                            self.unattributed.append(f"{path}:{line_number}")
                    else:
                        rows.append((custom_id, number, offset, len(raw)))
                        if len(rows) >= 10_000:
                            self.db.executemany(insert, rows)
                            rows.clear()
                offset += len(raw)
            self.db.executemany(insert, rows)
        self.db.commit()

    @staticmethod
    def _open(path: str) -> IO[bytes]:
        if os.path.isdir(path):
            raise InputError(f"{path}: is a directory, expected a batch output file")
        try:
            return open(path, "rb")  # noqa: SIM115 - closed in close()
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None

    def size(self) -> int:
        """Return how many distinct custom_ids the files hold."""
        row = self.db.execute("SELECT COUNT(*) FROM results").fetchone()
        return int(row[0])

    def find(self, custom_id: str) -> tuple[str, int, bytes] | None:
        """Return (where, copies, line) for ``custom_id``, or None when no line names it."""
        row = self.db.execute("SELECT file, offset, length, copies FROM results WHERE id = ?",
                              (custom_id,)).fetchone()
        if row is None:
            return None
        number, offset, length, copies = row
        stream = self.streams[number]
        stream.seek(offset)
        return self.paths[number], copies, stream.read(length)

    def close(self) -> None:
        for stream in self.streams:
            stream.close()
        self.db.close()
        self._folder.cleanup()


def _custom_id(raw: bytes) -> str | None:
    """Return the custom_id a line names; a line that is not JSON may still name one."""
    match = _CUSTOM_ID.search(raw)
    if match is not None:
        try:
            value = json.loads(b'"' + match.group(1) + b'"')
        except ValueError:
            value = None
        if isinstance(value, str):
            return value
    try:
        line = json.loads(raw)
    except ValueError:
        return None
    value = line.get("custom_id") if isinstance(line, dict) else None
    return value if isinstance(value, str) else None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET else text[: _SNIPPET - 1] + "…"


def _error_detail(error: Any) -> str:
    """Return ``code: message`` from an engine's error object, short and on one line."""
    if isinstance(error, Mapping):
        inner = error.get("error")
        if isinstance(inner, Mapping):  # an error body: {"error": {"message": ...}}
            error = inner
        code, message = error.get("code"), error.get("message")
        parts = [str(p) for p in (code, message) if isinstance(p, (str, int)) and str(p)]
        return _short(": ".join(parts)) if parts else ""
    return _short(error) if isinstance(error, str) else ""


class _Result(NamedTuple):
    outcome: Any  # review.Outcome
    completion: dict[str, Any] | None


def _read_result(
    found: tuple[str, int, bytes] | None, custom_id: str, preferences: Sequence[Preference],
    refusal: str,
) -> _Result:
    """Read one engine result line as an outcome; anything but a clear verdict is an error."""
    from critic_cli.reflection import parse_reply
    from critic_cli.review import Outcome

    def error(reason: str) -> _Result:
        return _Result(Outcome("error", error=reason), None)

    if found is None:
        return error(NO_RESULT)
    path, copies, raw = found
    if copies > 1:
        return error(f"the batch engine returned {copies} results for {custom_id}; "
                     "none was used")
    try:
        line = json.loads(raw)
    except ValueError:
        return error(f"{path}: malformed output line for {custom_id} (not JSON)")
    if not isinstance(line, dict) or line.get("custom_id") != custom_id:
        return error(f"{path}: malformed output line for {custom_id}")
    if line.get("error") is not None:
        detail = _error_detail(line["error"])
        return error(f"the batch engine failed the request{': ' + detail if detail else ''}")
    response = line.get("response")
    if not isinstance(response, dict):
        return error(f"{path}: output line for {custom_id} has no response")
    status = response.get("status_code")
    body = response.get("body")
    if status != 200 or isinstance(status, bool):
        detail = _error_detail(body)
        return error(f"model call failed: HTTP {status} from the batch engine"
                     f"{': ' + detail if detail else ''}")
    if not isinstance(body, dict):
        return error("model call failed: HTTP 200 from the batch engine: reply is not a "
                     "JSON object")
    try:
        verdict = parse_reply(body, preferences, refusal)
    except ReflectionError as exc:
        return error(exc.message)
    return _Result(Outcome(verdict.verdict, verdict.text, tuple(verdict.matched_preferences)),
                   body)


class _CacheFiller:
    """Write valid replies to the cache on a few threads: each is a small file, so disks wait."""

    def __init__(self, cache: Cache, threads: int = 4, most_pending: int = 256) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.cache = cache
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="critic-cache")
        self.pending: deque[Future[None]] = deque()
        self.most_pending = most_pending
        self.filled = 0
        self.failed = 0
        self.reason = ""

    def put(self, key: str, completion: Mapping[str, Any]) -> None:
        """Queue one reply; wait for the oldest writes when too many are in flight."""
        self.pending.append(self.pool.submit(self.cache.put, key, completion))
        while len(self.pending) > self.most_pending:
            self._settle(self.pending.popleft())

    def _settle(self, future: Future[None]) -> None:
        try:
            future.result()
            self.filled += 1
        except OSError as exc:  # a full or read-only disk costs the cache, not the records
            self.failed += 1
            self.reason = self.reason or str(exc.strerror or exc)

    def close(self) -> None:
        """Wait for every queued write."""
        while self.pending:
            self._settle(self.pending.popleft())
        self.pool.shutdown()


class _Collector:
    """Finish the records of one state file from the indexed engine results."""

    def __init__(self, header: Mapping[str, Any], index: _Index,
                 cache: _CacheFiller | None) -> None:
        from critic_cli.config import Settings
        from critic_cli.review import Plan
        from critic_cli.rules import Preference, Ruleset

        try:
            preferences = tuple(Preference(float(priority), str(statement))
                                for priority, statement in header["preferences"])
            settings = Settings(model=header["model"], refusal_message=header["refusal_message"])
        except (KeyError, TypeError, ValueError):
            raise InputError("the state file's header is damaged") from None
        self.plan = Plan(settings, Ruleset(preferences=preferences), frozenset())
        self.index = index
        self.cache = cache
        self.matched = 0

    def record(self, line: Mapping[str, Any]) -> Record:
        """Return the record of one state line: stored, or finished from the engine's reply."""
        from critic_cli.checks import Hit
        from critic_cli.inputs import Draft
        from critic_cli.review import Assessment, finish

        if "record" in line:
            return record_from_dict(line["record"])
        custom_id = line["custom_id"]
        found = self.index.find(custom_id)
        self.matched += found is not None
        result = _read_result(found, custom_id, self.plan.ruleset.preferences,
                              self.plan.settings.refusal_message)
        if result.completion is not None and self.cache is not None:
            self.cache.put(line["key"], result.completion)
        fired, reason, threshold = line["gate"]
        hits = [Hit(c["rule"], c["action"], c["line"], c["column"], 0, 0)
                for c in line["checks"]]
        assessment = Assessment(
            Draft(line["source"], line["text"]), line["confidence"], line["hit"],
            Gate(fired, reason, threshold), hits, line["text"],
            rules_used=tuple(line["rules_used"]))
        return finish(self.plan, assessment, result.outcome)


def _state_lines(path: str, expected: int) -> Iterator[dict[str, Any]]:
    """Yield the state's per-input lines in order, checking that none is missing."""
    with open(path, "rb") as stream:
        stream.readline()  # the header
        for number, raw in enumerate(stream, start=2):
            try:
                line = json.loads(raw)
            except ValueError:
                raise InputError(f"{path}:{number}: damaged state line (not JSON)") from None
            if not isinstance(line, dict):
                raise InputError(f"{path}:{number}: damaged state line")
            if line.get("end") is True:
                if number - 2 != expected:
                    raise InputError(f"{path}: the state holds {number - 2} inputs, its end "
                                     f"line says {expected}")
                return
            if line.get("i") != number - 2:
                raise InputError(f"{path}:{number}: damaged state line (input {number - 2} "
                                 "expected)")
            yield line
    raise InputError(f"{path}: the state file is incomplete (no end line)")


def _format(name: str | None) -> str:
    from critic_cli.report import FORMATS

    if name is None:
        return "text" if sys.stdout.isatty() else "jsonl"
    if name not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {name!r}")
    return name


def collect(request: CollectRequest) -> int:
    """Merge the engine's results with the state; write the report; return the exit code."""
    from critic_cli.cache import Cache
    from critic_cli.output import Sink, progress
    from critic_cli.record import FAIL_ON
    from critic_cli.report import Context, make

    header, trailer = _read_state_ends(request.state)
    fail_on = request.fail_on or str(header.get("fail_on") or "revise")
    if fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on must be one of {', '.join(FAIL_ON)}")
    name = _format(request.output_format)
    cache_dir = request.cache_dir or header.get("cache_dir")
    cache = Cache(str(cache_dir)) if request.use_cache and cache_dir else None
    pending = int(trailer.get("pending") or 0)
    if pending and not request.results:
        raise UsageError(f"{request.state}: {pending} drafts wait for results: name the "
                         "engine's output (and error) files")
    _check_distinct(request.results)
    index = _Index(request.results)
    filler = _CacheFiller(cache) if cache is not None else None
    try:
        index.build()
        if index.unattributed_count:
            _diagnose(f"warning: {index.unattributed_count} output lines name no custom_id "
                      f"and were skipped ({', '.join(index.unattributed)}"
                      f"{', ...' if index.unattributed_count > 3 else ''})")
        collector = _Collector(header, index, filler)
        color = name == "text" and request.output is None and sys.stdout.isatty()
        report = make(name, Context(fail_on=fail_on, several=True, color=color,
                                    verbose=request.verbose))
        show_progress = not request.quiet and sys.stderr.isatty()
        summary = Summary()
        with Sink(request.output, flush_each=False) as sink, \
                progress(show_progress, int(trailer.get("inputs") or 0) or None) as advance:
            sink.write(report.start())
            for line in _state_lines(request.state, int(trailer.get("inputs") or 0)):
                try:
                    record = collector.record(line)
                except (KeyError, TypeError, ValueError):
                    raise InputError(f"{request.state}: damaged state line for input "
                                     f"{line.get('i')}") from None
                summary.add(record)
                sink.write(report.add(record))
                advance(record.verdict)
            summary.seconds = time.perf_counter() - summary.started
            sink.write(report.finish(summary) if not request.quiet or name != "text" else "")
        unknown = index.size() - collector.matched
    finally:
        if filler is not None:
            filler.close()
        index.close()
    if filler is not None and filler.failed:
        _diagnose(f"warning: {filler.failed} replies could not be cached ({filler.reason})")
    if unknown:
        _diagnose(f"warning: {unknown} results name a custom_id this state does not wait for "
                  "(output of another prepare?)")
    if request.verbose:
        _diagnose(f"collected {summary.total} records: {collector.matched} of {pending} results "
                  f"found, {summary.verdicts['error']} errors, "
                  f"{filler.filled if filler is not None else 0} replies cached"
                  f"{' in ' + str(cache_dir) if cache is not None else ''}")
    return summary.exit_code(fail_on)


def _check_distinct(paths: Sequence[str]) -> None:
    """Refuse a result file named twice: each of its lines would count as a duplicate."""
    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue  # the index names the missing file
        other = seen.get((info.st_dev, info.st_ino))
        if other is not None:
            raise UsageError(f"{path}: named twice (also as {other})")
        seen[(info.st_dev, info.st_ino)] = path


# -- the OpenAI Batch API ---------------------------------------------------------------------


class _API:
    """An OpenAI-compatible Files + Batches endpoint; failures become one scrubbed line."""

    def __init__(self, flags: Mapping[str, Any], config: str | None, use_config: bool) -> None:
        settings = config_module.resolve(flags, config=config, use_config=use_config)
        if not settings.base_url and not settings.api_key:
            raise UsageError("the OpenAI Batch API needs a key: set CRITIC_API_KEY or "
                             "OPENAI_API_KEY (or name one with --api-key-env), or give "
                             "--base-url for a server that needs none")
        self.base_url = settings.base_url
        self.key = settings.api_key
        self.timeout = settings.timeout
        self.max_retries = settings.max_retries
        self._client: OpenAI | None = None

    @property
    def where(self) -> str:
        """Return the endpoint as shown in messages, without credentials."""
        from critic_cli.provider import safe_url

        return safe_url(self.base_url or "the default OpenAI endpoint")

    def scrub(self, text: str) -> str:
        """Remove the API key, and anything that looks like a key, from ``text``."""
        from critic_cli.provider import scrub

        return scrub(text, self.key, self.base_url)

    @property
    def client(self) -> OpenAI:
        if self._client is None:
            # The Batch API lives in the client; imported here, when a command needs it.
            import openai  # noqa: TID251

            with self.errors("connecting"):
                self._client = openai.OpenAI(
                    base_url=self.base_url or None, api_key=self.key or NO_KEY,
                    timeout=self.timeout, max_retries=self.max_retries)
        return self._client

    @contextlib.contextmanager
    def errors(self, what: str) -> Iterator[None]:
        """Turn a client failure while doing ``what`` into one ReflectionError line."""
        import openai  # noqa: TID251

        try:
            yield
        except CriticError:
            raise
        except openai.APIStatusError as exc:
            detail = _error_detail(exc.body)
            raise ReflectionError(self.scrub(
                f"{what} failed: HTTP {exc.status_code} from {self.where}"
                f"{': ' + detail if detail else ''}")) from None
        except openai.APIConnectionError:
            raise ReflectionError(f"{what} failed: could not connect to {self.where}") from None
        except Exception as exc:  # an OpenAIError, a bad URL, a reply the client cannot parse
            first = (str(exc).strip().splitlines() or ["unknown error"])[0]
            raise ReflectionError(self.scrub(f"{what} failed: {_short(first)}")) from None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def _check_request_file(path: str) -> int:
    """Return the number of requests in ``path``; refuse a state file or an empty file."""
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, expected a request file")
    try:
        with open(path, "rb") as stream:
            first = stream.readline()
            lines = (1 if first.strip() else 0) + sum(1 for raw in stream if raw.strip())
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if STATE_FORMAT.encode() in first:
        raise UsageError(f"{path}: is a critic state file, not a request file")
    if not lines:
        raise UsageError(f"{path}: holds no requests")
    return lines


def submit(flags: Mapping[str, Any], files: Sequence[str], *, config: str | None = None,
           use_config: bool = True, quiet: bool = False) -> list[str]:
    """Upload each request file and start one batch per file; return the batch ids."""
    counts = [_check_request_file(path) for path in files]
    api = _API(flags, config, use_config)
    ids: list[str] = []
    try:
        for path, count in zip(files, counts, strict=True):
            with api.errors(f"uploading {path}"), open(path, "rb") as stream:
                uploaded = api.client.files.create(file=stream, purpose="batch")
            with api.errors(f"starting the batch for {path}"):
                batch = api.client.batches.create(
                    input_file_id=uploaded.id, endpoint=ENDPOINT,
                    completion_window=COMPLETION_WINDOW,
                    metadata={"created_by": "critic", "requests": os.path.basename(path)})
            ids.append(batch.id)
            if not quiet:
                _diagnose(f"{path}: {count} requests → batch {batch.id} (file {uploaded.id})")
    finally:
        api.close()
    return ids


def _describe(batch: Any) -> str:
    counts = batch.request_counts
    done = (f"{counts.completed}/{counts.total} done, {counts.failed} failed"
            if counts is not None else "no counts yet")
    files = "".join(f" {label}={value}" for label, value in (
        ("output", batch.output_file_id), ("errors", batch.error_file_id)) if value)
    return f"{batch.id} {batch.status} {done}{files}"


def status(flags: Mapping[str, Any], batch_ids: Sequence[str], *, wait: bool = False,
           interval: float = 30.0, as_json: bool = False, config: str | None = None,
           use_config: bool = True, quiet: bool = False,
           sleep: Callable[[float], None] = time.sleep) -> tuple[str, int]:
    """Return the batches' status as text or JSON lines, and the exit code.

    With ``wait``, poll every ``interval`` seconds until every batch is completed, failed,
    expired or cancelled, showing progress on stderr. Exit 0 when every batch completed (or,
    without ``wait``, none ended badly); 3 when one failed, expired or was cancelled.
    """
    if interval <= 0:
        raise UsageError("--interval must be positive")
    api = _API(flags, config, use_config)
    try:
        shown: dict[str, str] = {}
        while True:
            batches = []
            for batch_id in batch_ids:
                with api.errors(f"reading batch {batch_id}"):
                    batches.append(api.client.batches.retrieve(batch_id))
            if not wait or all(b.status in TERMINAL for b in batches):
                break
            if not quiet:
                for batch in batches:
                    line = _describe(batch)
                    if shown.get(batch.id) != line:
                        shown[batch.id] = line
                        _diagnose(line)
            sleep(interval)
    finally:
        api.close()
    bad = any(b.status in TERMINAL - {"completed"} for b in batches)
    if as_json:
        text = "".join(_DUMPS(b.model_dump(mode="json")) + "\n" for b in batches)
    else:
        text = "".join(_describe(b) + "\n" for b in batches)
    return text, 3 if bad else 0


def fetch(flags: Mapping[str, Any], batch_ids: Sequence[str], directory: str, *,
          config: str | None = None, use_config: bool = True) -> list[str]:
    """Download each batch's output and error files into ``directory``; return their paths."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UsageError(f"{directory}: is not a directory")
    api = _API(flags, config, use_config)
    written: list[str] = []
    try:
        for batch_id in batch_ids:
            with api.errors(f"reading batch {batch_id}"):
                batch = api.client.batches.retrieve(batch_id)
            wanted = [(file_id, suffix) for file_id, suffix in (
                (batch.output_file_id, "output"), (batch.error_file_id, "errors")) if file_id]
            if not wanted:
                if batch.status in TERMINAL:
                    raise ReflectionError(f"batch {batch_id} is {batch.status} and has no "
                                          "output or error file")
                raise UsageError(f"batch {batch_id} is {batch.status}: no results yet (wait "
                                 "with `critic batch status --wait`)")
            os.makedirs(directory, exist_ok=True)
            for file_id, suffix in wanted:
                path = os.path.join(directory, f"{batch_id}.{suffix}.jsonl")
                target = _AtomicFile(path)
                try:
                    with api.errors(f"downloading {file_id}"), \
                            api.client.files.with_streaming_response.content(file_id) as reply:
                        for chunk in reply.iter_bytes():
                            target.write(chunk)
                except BaseException:
                    target.discard()
                    raise
                target.commit()
                written.append(path)
    finally:
        api.close()
    return written
