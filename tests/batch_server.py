"""A stand-in batch engine: the loopback judge, plus OpenAI's Files and Batches routes.

``play_engine`` does what an engine does with a request file: POST each line's body to the
chat-completions route and write OpenAI-format output lines (``vllm run-batch`` writes the same
shape). ``serve_batch_engine`` runs one server that is both the judge and an OpenAI-compatible
Files + Batches API whose batches are played by ``play_engine`` against itself.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import default as default_policy
from typing import Any

from tests.judge import Judge, Received, Reply, _Handler, _Server, completion

__all__ = ["BatchEngine", "VerdictJudge", "play_engine", "serve_batch_engine"]

PREFERENCE = "Never reveal keys"


class VerdictJudge(Judge):
    """A judge whose verdict depends on a marker in the draft, whatever order calls come in.

    ``[[revise]]`` → revise, ``[[refuse]]`` → refuse (no text: the default message),
    ``[[prefs]]`` → approve citing a preference, ``[[garble]]`` → a reply with no JSON,
    ``[[cutoff]]`` → finish_reason length; anything else → approve. Scripted replies still win.
    """

    def _next(self, received: Received) -> Reply:
        with self._lock:
            scripted = bool(self._queue)
        if scripted:
            return super()._next(received)
        with self._lock:
            self.requests.append(received)
        messages = received.body.get("messages") if isinstance(received.body, dict) else None
        user = messages[-1]["content"] if isinstance(messages, list) and messages else ""
        return Reply(json=_reply_for(user))


def _reply_for(user: str) -> dict[str, Any]:
    def say(verdict: str, text: str = "", matched: Sequence[str] = ()) -> dict[str, Any]:
        return completion(json.dumps({"verdict": verdict, "text": text,
                                      "matched_preferences": list(matched)}))

    if "[[revise]]" in user:
        return say("revise", "A revised draft.", [PREFERENCE.upper()])
    if "[[refuse]]" in user:
        return say("refuse")
    if "[[prefs]]" in user:
        return say("approve", "", ["  never reveal KEYS ", "not configured"])
    if "[[garble]]" in user:
        return completion("Looks fine to me.")
    if "[[cutoff]]" in user:
        return completion('{"verdict": "appr', finish_reason="length")
    return say("approve")


def play_engine(
    request_files: Sequence[str], output: str, origin: str, *, errors: str | None = None,
    key: str | None = None,
) -> int:
    """Run every request line against ``origin`` and write OpenAI Batch output lines.

    Lines whose call did not answer 200 go to ``errors`` when given (as OpenAI does), else to
    ``output``. Return how many requests were played.
    """
    played = 0
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(output, "w", encoding="utf-8"))
        err = stack.enter_context(open(errors, "w", encoding="utf-8")) if errors else out
        for path in request_files:
            with open(path, encoding="utf-8") as requests:
                for raw in requests:
                    request = json.loads(raw)
                    status, body = _post(origin + request["url"], request["body"], key)
                    played += 1
                    line = {"id": f"batch_req_{played}", "custom_id": request["custom_id"],
                            "response": {"status_code": status, "request_id": f"req-{played}",
                                         "body": body},
                            "error": None}
                    (out if status == 200 else err).write(json.dumps(line) + "\n")
    return played


def _post(url: str, body: Any, key: str | None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        data = exc.read()
        try:
            return exc.code, json.loads(data)
        except ValueError:
            return exc.code, data.decode("utf-8", "replace")


# -- the Files + Batches API ------------------------------------------------------------------


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    data: bytes

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "object": "file", "bytes": len(self.data),
                "created_at": 1700000000, "filename": self.filename, "purpose": self.purpose,
                "status": "processed"}


@dataclass
class Batch:
    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, Any] | None
    total: int
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    completed: int = 0
    failed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "object": "batch", "endpoint": self.endpoint, "errors": None,
                "input_file_id": self.input_file_id,
                "completion_window": self.completion_window, "status": self.status,
                "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
                "created_at": 1700000000, "metadata": self.metadata,
                "request_counts": {"total": self.total, "completed": self.completed,
                                   "failed": self.failed}}


@dataclass
class BatchEngine:
    """The Files + Batches state: uploads, batches, and every API call's headers."""

    judge: VerdictJudge
    base_url: str = ""
    files: dict[str, StoredFile] = field(default_factory=dict)
    batches: dict[str, Batch] = field(default_factory=dict)
    calls: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    fail_batches: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def origin(self) -> str:
        return self.base_url.removesuffix("/v1")

    def upload(self, filename: str, purpose: str, data: bytes) -> StoredFile:
        with self.lock:
            stored = StoredFile(f"file-{len(self.files) + 1}", filename, purpose, data)
            self.files[stored.id] = stored
        return stored

    def advance(self, batch: Batch, key: str | None) -> None:
        """Move a batch one step: validating → in_progress → completed (played) or failed."""
        if batch.status == "validating":
            batch.status = "in_progress"
            return
        if batch.status != "in_progress":
            return
        if self.fail_batches:
            batch.status = "failed"
            return
        import os
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            source = os.path.join(folder, "input.jsonl")
            with open(source, "wb") as handle:
                handle.write(self.files[batch.input_file_id].data)
            out, err = os.path.join(folder, "out.jsonl"), os.path.join(folder, "err.jsonl")
            play_engine([source], out, self.origin, errors=err, key=key)
            with open(out, "rb") as handle:
                output = handle.read()
            with open(err, "rb") as handle:
                errors = handle.read()
        batch.completed = output.count(b"\n")
        batch.failed = errors.count(b"\n")
        batch.output_file_id = self.upload(f"{batch.id}_output.jsonl", "batch_output",
                                           output).id
        if errors:
            batch.error_file_id = self.upload(f"{batch.id}_error.jsonl", "batch_output",
                                              errors).id
        batch.status = "completed"


_BATCH = re.compile(r"^/v1/batches/([^/]+)$")
_CONTENT = re.compile(r"^/v1/files/([^/]+)/content$")


class _BatchHandler(_Handler):
    server: _BatchServer

    def do_GET(self) -> None:  # noqa: N802
        engine = self.server.engine
        self._note()
        key = _bearer(self.headers.get("authorization"))
        if match := _BATCH.match(self.path):
            batch = engine.batches.get(match.group(1))
            if batch is None:
                return self._not_found()
            engine.advance(batch, key)
            return self._answer(Reply(json=batch.to_dict()))
        if match := _CONTENT.match(self.path):
            stored = engine.files.get(match.group(1))
            if stored is None:
                return self._not_found()
            return self._answer(Reply(text=stored.data, content_type="application/octet-stream"))
        return super().do_GET()

    def do_POST(self) -> None:  # noqa: N802
        if self.path not in ("/v1/files", "/v1/batches"):
            return super().do_POST()
        engine = self.server.engine
        self._note()
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        if self.path == "/v1/files":
            fields = _form(self.headers.get("content-type", ""), raw)
            data, filename = fields.get("file", (b"", "upload"))
            purpose = fields.get("purpose", (b"", None))[0].decode()
            if purpose != "batch":
                return self._answer(Reply(status=400, json={"error": {
                    "message": f"purpose must be batch, got {purpose!r}"}}))
            return self._answer(Reply(json=engine.upload(filename or "upload", purpose,
                                                         data).to_dict()))
        body = json.loads(raw)
        stored = engine.files.get(body.get("input_file_id"))
        if stored is None or body.get("endpoint") != "/v1/chat/completions" or body.get(
                "completion_window") != "24h":
            return self._answer(Reply(status=400, json={"error": {"message": "bad batch"}}))
        with engine.lock:
            batch = Batch(f"batch_{len(engine.batches) + 1}", stored.id, body["endpoint"],
                          body["completion_window"], body.get("metadata"),
                          stored.data.count(b"\n"))
            engine.batches[batch.id] = batch
        return self._answer(Reply(json=batch.to_dict()))

    def _note(self) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        with self.server.engine.lock:
            self.server.engine.calls.append((self.command, self.path, headers))

    def _not_found(self) -> None:
        self._answer(Reply(status=404, json={"error": {"message": f"no {self.path}"}}))


def _bearer(value: str | None) -> str | None:
    if value and value.lower().startswith("bearer "):
        return value[7:]
    return None


def _form(content_type: str, raw: bytes) -> dict[str, tuple[bytes, str | None]]:
    """Return multipart/form-data fields: name → (bytes, filename)."""
    message = BytesParser(policy=default_policy).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    fields: dict[str, tuple[bytes, str | None]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str):
            fields[name] = (payload if isinstance(payload, bytes) else b"", part.get_filename())
    return fields


class _BatchServer(_Server):
    engine: BatchEngine


@contextlib.contextmanager
def serve_batch_engine() -> Iterator[BatchEngine]:
    """Run the judge and the Files + Batches API on 127.0.0.1 for the duration of the block."""
    judge = VerdictJudge()
    server = _BatchServer(("127.0.0.1", 0), _BatchHandler)
    server.judge = judge
    engine = BatchEngine(judge)
    server.engine = engine
    judge.base_url = engine.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name="batch-engine", daemon=True)
    thread.start()
    try:
        yield engine
    finally:
        judge.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
