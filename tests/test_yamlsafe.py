"""Safe YAML: plain values with lines; anchors, aliases, merge keys and custom tags refused."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from critic_cli.yamlsafe import MAX_DEPTH, YAMLInputError, describe, load_file, loads


def refused(text: str) -> YAMLInputError:
    with pytest.raises(YAMLInputError) as info:
        loads(text)
    return info.value


def test_plain_values() -> None:
    document, _ = loads(
        "name: critic\ncount: 3\nratio: 0.5\non: true\nnothing: null\nempty:\n"
        "quoted: '3'\nlist: [a, 1]\nnested: {a: {b: c}}\n"
    )
    assert document == {
        "name": "critic", "count": 3, "ratio": 0.5, True: True, "nothing": None,
        "empty": None, "quoted": "3", "list": ["a", 1], "nested": {"a": {"b": "c"}},
    }


def test_empty_document_is_none() -> None:
    assert loads("")[0] is None
    assert loads("# only a comment\n")[0] is None


def test_line_numbers_of_keys_and_items() -> None:
    text = (
        "version: 1\n"              # 1
        "rules:\n"                  # 2
        "  - id: a\n"               # 3
        "    content: first\n"      # 4
        "  - id: b\n"               # 5
        "    check:\n"              # 6
        "      pattern: x\n"        # 7
    )
    document, lines = loads(text)
    assert document["rules"][1]["check"]["pattern"] == "x"
    assert lines.of(()) == 1
    assert lines.of(("version",)) == 1
    assert lines.of(("rules",)) == 3  # a block sequence starts at its first item
    assert lines.of(("rules", 0)) == 3
    assert lines.of(("rules", 0, "content")) == 4
    assert lines.of(("rules", 1, "id")) == 5
    assert lines.of(("rules", 1, "check", "pattern")) == 7


def test_line_of_a_missing_path_is_its_nearest_parent() -> None:
    _, lines = loads("a:\n  b: 1\n")
    assert lines.of(("a", "b", "missing")) == 2
    assert lines.of(("nope",)) == 1


def test_anchor_refused_with_its_line() -> None:
    error = refused("a: 1\nb: &x {c: 1}\n")
    assert (error.line, error.reason) == (2, "anchors (&name) are not allowed")


def test_alias_refused_with_its_line() -> None:
    error = refused("a: 1\n\nb: *x\n")
    assert (error.line, error.reason) == (3, "aliases (*name) are not allowed")


def test_merge_key_refused_with_its_line() -> None:
    error = refused("base: {a: 1}\nchild:\n  <<: {a: 2}\n  b: 3\n")
    assert (error.line, error.reason) == (3, "merge keys (<<) are not allowed")


def test_alias_bomb_refused_before_any_expansion() -> None:
    lines = ['a0: &a0 "lol"'] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 12)
    ]
    start = time.monotonic()
    error = refused("\n".join(lines))
    assert time.monotonic() - start < 2.0
    assert error.line == 1


@pytest.mark.parametrize(("text", "tag"), [
    ("a: !!python/object:os.system {}\n", "tag:yaml.org,2002:python/object:os.system"),
    ("a: !!python/name:os.system ''\n", "tag:yaml.org,2002:python/name:os.system"),
    ("a: !custom 1\n", "!custom"),
    ("a: !!binary aGk=\n", "tag:yaml.org,2002:binary"),
    ("a: !!set {x: null}\n", "tag:yaml.org,2002:set"),
])
def test_custom_tags_refused_with_their_line(text: str, tag: str) -> None:
    error = refused("ok: 1\n" + text)
    assert (error.line, error.reason) == (2, f"the tag {tag} is not allowed")


def test_plain_tags_allowed() -> None:
    assert loads("a: !!str 1\nb: !!int '2'\n")[0] == {"a": "1", "b": 2}


def test_duplicate_keys_refused() -> None:
    error = refused("a: 1\nb: 2\na: 3\n")
    assert (error.line, error.reason) == (3, "duplicate key 'a'")
    error = refused("outer:\n  x: 1\n  x: 2\n")
    assert (error.line, error.reason) == (3, "duplicate key 'x'")


def test_non_scalar_keys_refused() -> None:
    error = refused("? [a, b]\n: 1\n")
    assert error.reason == "a mapping key must be a scalar"
    assert error.line == 1


def test_multiple_documents_refused() -> None:
    error = refused("a: 1\n---\nb: 2\n")
    assert (error.line, error.reason) == (2, "expected one YAML document, found several")


def test_depth_is_bounded() -> None:
    loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    error = refused("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert (error.line, error.reason) == (1, f"nested deeper than {MAX_DEPTH} levels")
    start = time.monotonic()
    refused("[" * 100_000)
    assert time.monotonic() - start < 2.0


def test_syntax_error_has_a_line() -> None:
    error = refused("a: 1\nb: [1, 2\nc: 3\n")
    assert error.line is not None and error.line >= 2
    assert error.reason.startswith("not valid YAML: ")


@pytest.mark.parametrize(("value", "reason"), [
    ("!!int nope", "'nope' is not a valid int"),
    ("!!int ''", "'' is not a valid int"),
    ("!!float x", "'x' is not a valid float"),
    ("!!bool maybe", "'maybe' is not a valid bool"),
    ("2024-13-45", "'2024-13-45' is not a valid timestamp"),
    ("1" * 5000, f"'{'1' * 40}...' is not a valid int"),
])
def test_bad_scalar_value_has_a_line(value: str, reason: str) -> None:
    error = refused(f"a: 1\nb: {value}\n")
    assert (error.line, error.reason) == (2, f"cannot read value: {reason}")


def test_load_file_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("a: 1234567890\n")
    assert load_file(str(path), max_bytes=14)[0] == {"a": 1234567890}
    with pytest.raises(YAMLInputError) as info:
        load_file(str(path), max_bytes=13)
    assert (info.value.line, info.value.reason) == (None, "larger than 13 bytes")
    assert describe("big.yaml", info.value) == "big.yaml: larger than 13 bytes"


def test_load_file_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("a: caf\xe9\n".encode("latin-1"))
    with pytest.raises(YAMLInputError) as info:
        load_file(str(path))
    assert info.value.reason == "not UTF-8 (byte 6)"


def test_load_file_drops_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert load_file(str(path))[0] == {"a": 1}


def test_load_file_missing_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_file(str(tmp_path / "missing.yaml"))


def test_describe_names_file_and_line() -> None:
    assert describe("pack.yaml", YAMLInputError(4, "duplicate key 'a'")) == (
        "pack.yaml:4: duplicate key 'a'")
