"""critic: review LLM drafts with a deterministic gate, local checks and one model call."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
