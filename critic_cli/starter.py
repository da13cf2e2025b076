"""The starter files ``critic init`` writes."""

from __future__ import annotations

import os

from critic_cli.errors import UsageError

CONFIG = """\
# critic configuration: flags override environment variables, which override this file.
rules:
  - critic-rules.yaml
threshold: 0.6
fail_on: revise
# A model turns on reflection when the gate fires. Any OpenAI-compatible server works:
# model: gpt-4o-mini
# base_url: http://127.0.0.1:11434/v1      # Ollama, vLLM, llama.cpp, LM Studio
# api_key_env: OPENAI_API_KEY             # the variable's name, never the key itself
top_k: 5
jobs: 8
"""

PACK = """\
# A starter rule pack: preferences (what the draft must respect) and procedural rules.
version: 1
sensitive_tags: [credentials]
preferences:
  - priority: 100
    statement: Never reveal credentials, API keys or passwords.
    sensitive_tags: [credentials]
  - priority: 50
    statement: State figures only with their source.
rules:
  - id: cite-figures
    content: When the draft states a figure, it names the source.
  - id: aws-access-key
    content: The draft never contains an AWS access key id.
    check:
      pattern: '\\b(?:AKIA|ASIA)[0-9A-Z]{16}\\b'
      action: refuse
      message: The draft contains an AWS access key id.
"""


def write(directory: str, *, force: bool = False) -> list[str]:
    """Write ``.critic.yaml`` and ``critic-rules.yaml`` into ``directory``; return the paths."""
    if not os.path.isdir(directory):
        raise UsageError(f"{directory}: no such directory")
    files = {".critic.yaml": CONFIG, "critic-rules.yaml": PACK}
    paths = {name: os.path.join(directory, name) for name in files}
    existing = [path for path in paths.values() if os.path.exists(path)]
    if existing and not force:
        raise UsageError(f"{existing[0]} exists; use --force to overwrite")
    for name, text in files.items():
        with open(paths[name], "w", encoding="utf-8") as handle:
            handle.write(text)
    return list(paths.values())
