"""Shared fixtures: a clean environment, a fresh working directory, files and the CLI runner."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from critic_cli.cli import app

try:  # the real judge server; another module, which may not exist yet
    from tests.judge import judge  # noqa: F401
except ImportError:  # pragma: no cover
    pass

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()

Write = Callable[..., str]
Run = Callable[..., Result]


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Clear OPENAI_*/CRITIC_* variables, cache into tmp_path, and work in a fresh folder."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "CRITIC_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CRITIC_CACHE_DIR", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    yield work


@pytest.fixture
def write(clean_env: Path) -> Write:
    """Return a helper that writes text or bytes to a path relative to the working folder."""

    def write_file(name: str, content: str | bytes = "") -> str:
        path = clean_env / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return name

    return write_file


@pytest.fixture
def run() -> Run:
    """Return a helper that runs ``critic ARGS...`` and returns the CliRunner result."""

    def invoke(*args: str, input: str | bytes | None = None, **kwargs: object) -> Result:
        kwargs.setdefault("prog_name", "critic")
        return runner.invoke(app, list(args), input=input, **kwargs)  # type: ignore[arg-type]

    return invoke


@pytest.fixture
def examples() -> Path:
    """Return the folder of the shipped examples."""
    return REPO / "examples"


@pytest.fixture
def default_pack() -> str:
    """Return the path of the shipped default rule pack."""
    return str(REPO / "rules" / "default.yaml")
