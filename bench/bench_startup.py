"""Start-up: a gate-only `critic review --format json` against the bare CLI-stack import.

Runs both commands alternately, several times, in one process tree, and prints the medians and
their ratio. Target (SPEC §8): critic within 1.2x of `python -c "import typer, yaml, json"`.

    python bench/bench_startup.py [--runs 21]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = 1.2


def clock(command: list[str]) -> float:
    """Return the wall time of one run of ``command``, in seconds."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    bare = [sys.executable, "-c", "import typer, yaml, json"]
    critic = [sys.executable, "-m", "critic_cli", "review", "examples/approved.txt",
              "--activation", "examples/approved.activation.json", "--rules",
              "rules/default.yaml", "--format", "json", "--no-config"]
    # Compiled bytecode, as any install leaves it (PYTHONDONTWRITEBYTECODE would otherwise
    # make every run compile critic's modules again, which the installed typer never does).
    compileall.compile_dir(os.path.join(ROOT, "critic_cli"), quiet=1)
    for command in (bare, critic):  # warm the file cache
        clock(command)
    times: dict[str, list[float]] = {"bare": [], "critic": []}
    for _ in range(args.runs):
        times["bare"].append(clock(bare))
        times["critic"].append(clock(critic))
    bare_ms = statistics.median(times["bare"]) * 1000
    critic_ms = statistics.median(times["critic"]) * 1000
    ratio = critic_ms / bare_ms
    print(f"bare import (typer, yaml, json): {bare_ms:7.1f} ms median of {args.runs}")
    print(f"critic review --format json:     {critic_ms:7.1f} ms median of {args.runs}")
    print(f"ratio: {ratio:.2f}x (target <= {TARGET}x) {'PASS' if ratio <= TARGET else 'FAIL'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
