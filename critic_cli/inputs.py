"""Inputs: drafts from files, stdin and JSONL, and activation logs, read and validated.

Every problem names its source and, for JSON, the path inside it (``$.activated_nodes[2].score``).
"""

import json
import math
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any, NamedTuple

from critic_cli.errors import InputError
from critic_cli.signals import ACTIVATION_KEY, activation_from_resolved

DEFAULT_MAX_BYTES = 1024 * 1024
DEFAULT_GLOBS = ("*.txt", "*.md")
STDIN = "-"
LOG_LISTS = ("activated_nodes", "inference_paths", "traversed_edges")
SIDECAR_SUFFIX = ".activation.json"


class Draft(NamedTuple):
    """One draft to review: where it came from, its text and its activation log."""

    source: str
    text: str
    activation: dict[str, Any] = {}  # read-only; never mutated


class BadInput(NamedTuple):
    """An input in a batch that could not be read; it still gets a record."""

    source: str
    reason: str


class DraftFile(NamedTuple):
    """A draft file not read yet: it is read where it is reviewed (maybe another process)."""

    path: str
    activation: dict[str, Any] | None
    max_bytes: int

    def read(self) -> Draft | BadInput:
        """Return the draft with its activation, or why it cannot be read."""
        try:
            text = read_draft(self.path, max_bytes=self.max_bytes)
            return Draft(self.path, text, activation_for(self.path, self.activation))
        except InputError as exc:
            return BadInput(self.path, exc.message)


class JSONLine(NamedTuple):
    """A JSONL line not parsed yet: it is parsed where it is reviewed (maybe another process)."""

    where: str
    raw: bytes
    max_bytes: int

    def read(self) -> Draft | BadInput:
        """Return the line's draft, or why it cannot be read."""
        try:
            return _jsonl_draft(self.raw, self.where, self.max_bytes)
        except InputError as exc:
            return BadInput(self.where, exc.message)


Item = Draft | BadInput | DraftFile | JSONLine


def resolve_item(item: Item) -> Draft | BadInput:
    """Return the draft an item stands for, reading it first when it is lazy."""
    if isinstance(item, (DraftFile, JSONLine)):
        return item.read()
    return item


def decode_draft(data: bytes, source: str, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Return the draft's text: UTF-8, BOM dropped, no NUL, at most ``max_bytes``."""
    if len(data) > max_bytes:
        raise InputError(f"{source}: draft is larger than --max-bytes ({max_bytes} bytes)")
    if b"\x00" in data:
        raise InputError(f"{source}: draft contains a NUL byte at offset {data.index(0)}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: draft is not UTF-8 (invalid byte at offset {exc.start})"
                         ) from None


def _read_bytes(path: str, limit: int, what: str, stdin: IO[bytes] | None = None) -> bytes:
    if path == STDIN:
        stream = stdin if stdin is not None else sys.stdin.buffer
        return stream.read(limit + 1)
    if os.path.isdir(path):
        article = "an" if what[0] in "aeiou" else "a"
        raise InputError(f"{path}: is a directory, expected {article} {what} file")
    try:
        with open(path, "rb") as handle:
            return handle.read(limit + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None


def read_draft(
    path: str, *, max_bytes: int = DEFAULT_MAX_BYTES, stdin: IO[bytes] | None = None
) -> str:
    """Read the draft at ``path`` (``-`` for stdin)."""
    source = "<stdin>" if path == STDIN else path
    return decode_draft(_read_bytes(path, max_bytes, "draft", stdin), source, max_bytes)


# -- activation logs ------------------------------------------------------------------------


def _fail(source: str, where: str, reason: str) -> InputError:
    return InputError(f"{source}: {where}: {reason}")


def _json_kind(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "an array", dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _bad_number(value: Any) -> bool:
    """Return True unless ``value`` is null or a finite JSON number (booleans are not)."""
    if value is None:
        return False
    kind = type(value)
    if kind is float:
        return not math.isfinite(value)
    if kind is int:
        return not -1e300 < value < 1e300
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True
    return not math.isfinite(value)


def validate_log(log: Any, source: str, root: str = "$") -> dict[str, Any]:
    """Return ``log`` when it is a well-formed raw activation log; name the bad path if not."""
    if not isinstance(log, dict):
        raise _fail(source, root, f"expected an object, got {_json_kind(log)}")
    for key in LOG_LISTS:
        value = log.get(key)
        if value is not None and not isinstance(value, list):
            raise _fail(source, f"{root}.{key}", f"expected an array, got {_json_kind(value)}")
    total = 0.0
    for i, node in enumerate(log.get("activated_nodes") or ()):
        if not isinstance(node, dict):
            raise _fail(source, f"{root}.activated_nodes[{i}]",
                        f"expected an object, got {_json_kind(node)}")
        score = node.get("score")
        if _bad_number(score):
            raise _fail(source, f"{root}.activated_nodes[{i}].score",
                        f"expected a finite number, got {_json_kind(score)} {score!r}")
        total += score or 0.0
        properties = node.get("properties")
        if properties is not None and not isinstance(properties, dict):
            raise _fail(source, f"{root}.activated_nodes[{i}].properties",
                        f"expected an object, got {_json_kind(properties)}")
        _check_tags(node.get("tags"), source, f"{root}.activated_nodes[{i}].tags")
        if properties:
            _check_tags(properties.get("tags"), source,
                        f"{root}.activated_nodes[{i}].properties.tags")
    if not math.isfinite(total):
        raise _fail(source, f"{root}.activated_nodes", "scores too large to average")
    total = 0.0
    for i, edge in enumerate(log.get("traversed_edges") or ()):
        if not isinstance(edge, dict):
            raise _fail(source, f"{root}.traversed_edges[{i}]",
                        f"expected an object, got {_json_kind(edge)}")
        weight = edge.get("weight")
        if _bad_number(weight):
            raise _fail(source, f"{root}.traversed_edges[{i}].weight",
                        f"expected a finite number, got {_json_kind(weight)} {weight!r}")
        total += weight or 0.0
    if not math.isfinite(total):
        raise _fail(source, f"{root}.traversed_edges", "weights too large to average")
    return log


def _check_tags(tags: Any, source: str, where: str) -> None:
    if tags is None:
        return
    if not isinstance(tags, list):
        raise _fail(source, where, f"expected an array of strings, got {_json_kind(tags)}")
    for j, tag in enumerate(tags):
        if not isinstance(tag, str):
            raise _fail(source, f"{where}[{j}]", f"expected a string, got {_json_kind(tag)}")


def activation_from_document(document: Any, source: str, root: str = "$") -> dict[str, Any]:
    """Return the validated raw log from a raw log or a resolved map (``{"activation": ...}``)."""
    if not isinstance(document, dict):
        raise _fail(source, root, f"expected an object, got {_json_kind(document)}")
    if ACTIVATION_KEY not in document:
        return validate_log(document, source, root)
    entry = document[ACTIVATION_KEY]
    where = f"{root}.{ACTIVATION_KEY}"
    if entry is None:
        return {}
    if isinstance(entry, dict) and "value" in entry:
        entry, where = entry["value"], f"{where}.value"
        if entry is None:
            return {}  # null counts as absent
    if not isinstance(entry, dict):
        raise _fail(source, where, f"expected an object, got {_json_kind(entry)}")
    return validate_log(activation_from_resolved(document), source, where)


class _Constant:
    """A NaN or Infinity literal, kept in place so the error can name its JSON path."""

    def __init__(self, name: str) -> None:
        self.name = name


def _find_constant(document: Any) -> tuple[str, str] | None:
    """Return the JSON path and spelling of the first NaN/Infinity literal in ``document``."""
    stack: list[tuple[str, Any]] = [("$", document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, _Constant):
            return path, value.name
        if isinstance(value, dict):
            children = [(f"{path}.{key}", item) for key, item in value.items()]
        elif isinstance(value, list):
            children = [(f"{path}[{i}]", item) for i, item in enumerate(value)]
        else:
            continue
        stack.extend(reversed(children))
    return None


_DECODER = json.JSONDecoder()
_MAY_HOLD_CONSTANT = re.compile("NaN|Infinity")


def parse_json(text: str | bytes, source: str, *, one_line: bool = False) -> Any:
    """Parse JSON text; a syntax error names the line and column, a NaN its JSON path.

    With ``one_line`` (a JSONL line, ``source`` already ``file:line``) only the column is added.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(f"{source}: not UTF-8 (byte {exc.start})") from None
    if not _MAY_HOLD_CONSTANT.search(text):
        try:  # the common case: no NaN or Infinity literal, one shared decoder
            return _no_lone_surrogates(_DECODER.decode(text), text, source)
        except (ValueError, RecursionError):
            pass  # fall through for the located message
    constants: list[_Constant] = []

    def constant(name: str) -> _Constant:
        constants.append(_Constant(name))
        return constants[-1]

    try:
        document = json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as exc:
        where = f"{exc.colno}" if one_line else f"{exc.lineno}:{exc.colno}"
        raise InputError(f"{source}:{where}: not valid JSON: {exc.msg}") from None
    except ValueError as exc:
        raise InputError(f"{source}: not valid JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{source}: JSON nested too deeply") from None
    if constants:
        found = _find_constant(document)
        where, name = found if found is not None else ("$", constants[0].name)
        raise InputError(f"{source}: {where}: expected a finite number, got {name} "
                         "(JSON has no NaN or Infinity)")
    return _no_lone_surrogates(document, text, source)


def _no_lone_surrogates(document: Any, text: str, source: str) -> Any:
    """Return ``document`` unless a \\u escape in ``text`` made a string that is not Unicode."""
    if "\\u" in text:
        try:
            json.dumps(document, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"{source}: not valid Unicode (a \\u escape makes a lone "
                             "surrogate)") from None
    return document


def read_json_file(path: str, what: str, *, max_bytes: int) -> Any:
    """Read a UTF-8 JSON file of at most ``max_bytes``; every problem is one located line."""
    data = _read_bytes(path, max_bytes, what)
    if len(data) > max_bytes:
        raise InputError(f"{path}: {what} is larger than {max_bytes} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: {what} is not UTF-8 (byte {exc.start})") from None
    return parse_json(text, path)


def read_activation(path: str, *, max_bytes: int = 16 * DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """Read an activation file, raw or resolved, and return the validated raw log."""
    return activation_from_document(read_json_file(path, "activation log", max_bytes=max_bytes),
                                    path)


# -- many drafts ----------------------------------------------------------------------------


def expand_paths(paths: Iterable[str], globs: Iterable[str] = DEFAULT_GLOBS) -> Iterator[str]:
    """Yield each path; a directory yields its matching files, recursively, sorted."""
    from fnmatch import fnmatch

    patterns = tuple(globs)
    for path in paths:
        if path != STDIN and os.path.isdir(path):
            for top, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if name.endswith(SIDECAR_SUFFIX):
                        continue  # a draft's activation log, not a draft
                    if any(fnmatch(name, pattern) for pattern in patterns):
                        yield os.path.join(top, name)
        else:
            yield path


def check_paths(paths: Iterable[str]) -> None:
    """Raise InputError for the first path on the command line that does not exist."""
    for path in paths:
        if path != STDIN and not os.path.exists(path):
            raise InputError(f"{path}: no such file or directory")


def sidecar(path: str) -> str | None:
    """Return ``notes.activation.json`` when it stands beside the draft ``notes.txt``."""
    if path == STDIN:
        return None
    candidate = os.path.splitext(path)[0] + SIDECAR_SUFFIX
    return candidate if os.path.isfile(candidate) else None


def activation_for(path: str, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return the activation for a draft: the one given, else its sidecar file, else none."""
    if given is not None:
        return dict(given)
    beside = sidecar(path)
    return read_activation(beside) if beside else {}


def drafts_from_paths(
    paths: Iterable[str], activation: Mapping[str, Any] | None, *, max_bytes: int,
    stdin: IO[bytes] | None = None,
) -> Iterator[Item]:
    """Yield each path's draft, to be read when reviewed (stdin is read at once).

    Without an ``activation`` for all, each draft takes its sidecar log, if it has one.
    """
    given = None if activation is None else dict(activation)
    for path in paths:
        if path != STDIN:
            yield DraftFile(path, given, max_bytes)
            continue
        try:
            yield Draft("<stdin>", read_draft(path, max_bytes=max_bytes, stdin=stdin),
                        given or {})
        except InputError as exc:
            yield BadInput("<stdin>", exc.message)


def count_lines(path: str) -> int:
    """Return the number of non-blank lines of a JSONL file (0 when it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return 0


def open_sources(paths: list[str], jsonl: str | None, activation: str | None
                 ) -> dict[str, Any] | None:
    """Check the named inputs before any is read; return the activation log given for all.

    stdin can be one of them only once; a path that does not exist is an error (exit 2).
    None means no log was given, so each draft takes its sidecar, if any.
    """
    readers = paths.count(STDIN) + (jsonl == STDIN) + (activation == STDIN)
    if readers > 1:
        raise InputError("stdin ('-') can be read only once")
    check_paths(paths)
    if jsonl is not None and jsonl != STDIN:
        check_paths([jsonl])
    return read_activation(activation) if activation else None


def drafts(paths: list[str], jsonl: str | None, activation: Mapping[str, Any] | None, *,
           globs: Iterable[str], max_bytes: int) -> Iterator[Item]:
    """Yield every input in order: the paths (directories walked), then the JSONL lines."""
    yield from drafts_from_paths(expand_paths(paths, globs), activation, max_bytes=max_bytes)
    if jsonl is not None:
        yield from drafts_from_jsonl(jsonl, max_bytes=max_bytes)


def drafts_from_jsonl(
    path: str, *, max_bytes: int, stdin: IO[bytes] | None = None
) -> Iterator[Item]:
    """Yield one item per line of ``{"id", "draft", "activation"?}``, parsed when reviewed."""
    name = "<stdin>" if path == STDIN else path
    if path == STDIN:
        stream: IO[bytes] = stdin if stdin is not None else sys.stdin.buffer
    else:
        if os.path.isdir(path):
            raise InputError(f"{path}: is a directory, expected a JSONL file")
        try:
            stream = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise InputError(f"{path}: cannot read JSONL: {exc.strerror or exc}") from None
    try:
        for number, raw in enumerate(stream, start=1):
            if not raw.strip():
                continue
            yield JSONLine(f"{name}:{number}", raw, max_bytes)
    finally:
        if path != STDIN:
            stream.close()


def _jsonl_draft(raw: bytes, where: str, max_bytes: int) -> Draft:
    try:
        line = raw.decode("utf-8-sig" if raw.startswith(b"\xef\xbb\xbf") else "utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: line is not UTF-8 (byte {exc.start})") from None
    document = parse_json(line, where, one_line=True)
    if not isinstance(document, dict):
        raise InputError(f"{where}: expected an object, got {_json_kind(document)}")
    unknown = sorted(set(document) - {"id", "draft", "activation"})
    if unknown:
        raise InputError(f"{where}: $.{unknown[0]}: unknown key (expected id, draft, activation)")
    draft = document.get("draft")
    if not isinstance(draft, str):
        raise InputError(f"{where}: $.draft: expected a string, got {_json_kind(draft)}")
    # The decoded text is never longer in UTF-8 than its JSON spelling, so most lines need no
    # encoding to check their size; a \\u escape may hide a lone surrogate, so those do.
    size = len(raw)
    if size > max_bytes or b"\\u" in raw:
        try:
            size = len(draft.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InputError(f"{where}: $.draft: not valid Unicode (lone surrogate at "
                             f"{exc.start})") from None
    if size > max_bytes:
        raise InputError(f"{where}: draft is larger than --max-bytes ({max_bytes} bytes)")
    if "\x00" in draft:
        raise InputError(f"{where}: draft contains a NUL character")
    ident = document.get("id")
    if ident is None:
        ident = where
    elif not isinstance(ident, (str, int)) or isinstance(ident, bool):
        raise InputError(f"{where}: $.id: expected a string or number, got {_json_kind(ident)}")
    activation = document.get("activation")
    log = {} if activation is None else activation_from_document(activation, where,
                                                                 "$.activation")
    return Draft(str(ident), draft, log)
