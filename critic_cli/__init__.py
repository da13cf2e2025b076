"""critic: review LLM drafts with a deterministic gate, local checks and one model call.

The library's front door, loaded lazily so that ``import critic_cli`` stays cheap::

    from critic_cli import Settings, review

    record = review.review("Your key is ...", {"activated_nodes": [{"score": 0.9}]},
                           Settings(rules=("secrets",)))
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "review_all": "critic_cli.review",
    "plan": "critic_cli.review",
    "Settings": "critic_cli.config",
    "Record": "critic_cli.record",
    "Draft": "critic_cli.inputs",
    "CriticError": "critic_cli.errors",
}

__all__ = ["__version__", "review", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name == "review":  # the module: one draft, or many, to records
        import importlib

        return importlib.import_module("critic_cli.review")
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'critic_cli' has no attribute {name!r}")
