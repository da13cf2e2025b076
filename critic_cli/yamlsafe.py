"""Read YAML safely: a size cap, no anchors or aliases, bounded depth, and line numbers.

PyYAML's safe loader still expands alias chains (a "billion laughs" document, or a chain of
``<<`` merge keys) in exponential time. Here the event stream is read once and the document is
built by hand, so an anchor or an alias is refused the moment the parser meets it, before any
expansion. Every mapping key and sequence item keeps the line it came from, so validation errors
can say ``file:line: path.to.key: reason``.
"""

from __future__ import annotations

from typing import Any

import yaml

from critic_cli.errors import located

DEFAULT_MAX_BYTES = 1024 * 1024
MAX_DEPTH = 32

_Parser: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CONSTRUCTOR = yaml.constructor.SafeConstructor()


class YAMLInputError(ValueError):
    """A YAML document that is unsafe or malformed, with its 1-based line."""

    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


class Lines:
    """Where each value of a loaded document came from: key path → 1-based line."""

    def __init__(self) -> None:
        self.by_path: dict[tuple[str | int, ...], int] = {}

    def of(self, path: tuple[str | int, ...]) -> int | None:
        """Return the line of the value at ``path``, or of its nearest located parent."""
        while path not in self.by_path and path:
            path = path[:-1]
        return self.by_path.get(path)


def _line(mark: Any) -> int | None:
    return mark.line + 1 if mark is not None else None


def _scalar(event: yaml.ScalarEvent, resolver: yaml.resolver.Resolver) -> Any:
    tag = event.tag
    if tag is None or tag == "!":
        tag = resolver.resolve(  # type: ignore[no-untyped-call]
            yaml.ScalarNode, event.value, event.implicit)
    if tag == "tag:yaml.org,2002:merge":
        raise YAMLInputError(_line(event.start_mark), "merge keys (<<) are not allowed")
    node = yaml.ScalarNode(tag, event.value, style=event.style)
    try:
        return _CONSTRUCTOR.construct_object(node)
    except yaml.YAMLError as exc:
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YAMLInputError(_line(event.start_mark), f"cannot read value: {reason}") from None
    except (ValueError, KeyError, IndexError, OverflowError):
        # PyYAML's constructors raise these for `!!int nope`, `!!bool maybe`, `2024-13-45`.
        kind = str(tag).rsplit(":", 1)[-1]
        shown = event.value if len(event.value) <= 40 else event.value[:40] + "..."
        raise YAMLInputError(_line(event.start_mark),
                             f"cannot read value: {shown!r} is not a valid {kind}") from None


def _key_text(key: Any) -> str:
    return key if isinstance(key, str) else repr(key)


def loads(text: str) -> tuple[Any, Lines]:
    """Parse one YAML document into plain values and the lines they came from."""
    lines = Lines()
    resolver = yaml.resolver.Resolver()
    # Each frame: [container, path, pending_key] — pending_key only used by mappings.
    stack: list[list[Any]] = []
    root: Any = None
    documents = 0

    def attach(value: Any, line: int) -> tuple[str | int, ...] | None:
        nonlocal root
        if not stack:
            root = value
            lines.by_path[()] = line
            return ()
        frame = stack[-1]
        container, path = frame[0], frame[1]
        if isinstance(container, list):
            child: tuple[str | int, ...] = (*path, len(container))
            container.append(value)
            lines.by_path[child] = line
            return child
        if frame[2] is _NO_KEY:
            if isinstance(value, (dict, list)):
                raise YAMLInputError(line, "a mapping key must be a scalar")
            if value == "<<":
                raise YAMLInputError(line, "merge keys (<<) are not allowed")
            if value in container:
                raise YAMLInputError(line, f"duplicate key {_key_text(value)!r}")
            frame[2] = value
            return None
        key = frame[2]
        frame[2] = _NO_KEY
        child = (*path, _key_text(key))
        container[key] = value
        lines.by_path[child] = line
        return child

    try:
        for event in yaml.parse(text, Loader=_Parser):
            line = event.start_mark.line + 1 if event.start_mark else None
            if isinstance(event, yaml.AliasEvent):
                raise YAMLInputError(line, "aliases (*name) are not allowed")
            if getattr(event, "anchor", None) is not None:
                raise YAMLInputError(line, "anchors (&name) are not allowed")
            tag = getattr(event, "tag", None)
            if tag is not None and tag != "!" and tag not in _PLAIN_TAGS:
                raise YAMLInputError(line, f"the tag {tag} is not allowed")
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise YAMLInputError(line, "expected one YAML document, found several")
            elif isinstance(event, yaml.ScalarEvent):
                attach(_scalar(event, resolver), line or 0)
            elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                if len(stack) >= MAX_DEPTH:
                    raise YAMLInputError(line, f"nested deeper than {MAX_DEPTH} levels")
                container: Any = [] if isinstance(event, yaml.SequenceStartEvent) else {}
                path = attach(container, line or 0)
                if path is None:
                    raise YAMLInputError(line, "a mapping key must be a scalar")
                stack.append([container, path, _NO_KEY])
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                stack.pop()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise YAMLInputError(line, f"not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise YAMLInputError(None, f"not valid YAML: {exc}") from None
    return root, lines


_NO_KEY = object()
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "seq", "map")
)


def load_file(path: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[Any, Lines]:
    """Read and parse a YAML file; raise ``YAMLInputError`` or ``OSError`` with a reason."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise YAMLInputError(None, f"larger than {max_bytes} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise YAMLInputError(None, f"not UTF-8 (byte {exc.start})") from None
    return loads(text)


def describe(source: str, exc: YAMLInputError) -> str:
    """Return the one-line located message for a YAML error in ``source``."""
    return located(source, exc.line, "", exc.reason)
