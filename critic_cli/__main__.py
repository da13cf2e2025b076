"""Run critic as ``python -m critic_cli``."""

from critic_cli.cli import main

main()
