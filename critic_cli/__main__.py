"""Run critic as ``python -m critic_cli``."""

from critic_cli.cli import main

if __name__ == "__main__":  # worker processes import this module too; they must not run it
    main()
