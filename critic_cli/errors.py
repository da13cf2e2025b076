"""The one exception tree of critic; each error carries the exit code the CLI uses.

    CriticError                 exit 2 unless said otherwise
    ├── UsageError              a bad option or combination of options
    ├── InputError              a draft, activation log or JSONL line that cannot be read
    ├── RuleError               a rule pack or prompt template that does not validate
    ├── ConfigError             a .critic.yaml that does not validate
    └── ReflectionError         exit 3: the model call failed or its reply is not a verdict

The CLI catches ``CriticError`` in one place and prints ``critic: error: <message>``.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_REFLECTION = 3
EXIT_INTERRUPTED = 130


class CriticError(Exception):
    """Base of every error critic reports to its user."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(CriticError):
    """An option, or a combination of options, that critic cannot act on."""


class InputError(CriticError):
    """A draft, activation log or JSONL line that cannot be read or is malformed."""


class RuleError(CriticError):
    """A rule pack or prompt template that does not validate."""


class ConfigError(CriticError):
    """A configuration file that does not validate."""


class ReflectionError(CriticError):
    """The model call failed, or its reply could not be read as a verdict."""

    exit_code = EXIT_REFLECTION


def located(source: str, line: int | None, path: str, reason: str) -> str:
    """Return the one-line ``file:line: path.to.key: reason`` form of a validation error."""
    where = f"{source}:{line}" if line is not None else source
    return f"{where}: {path}: {reason}" if path else f"{where}: {reason}"
