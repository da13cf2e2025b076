"""Many drafts: 100,000 JSONL drafts through the gate only, and 200 drafts against a judge.

    python bench/bench_batch.py gate   [--drafts 100000]     target: < 5 s, < 150 MiB peak
    python bench/bench_batch.py judge  [--drafts 200]        target: <= 1.3x ideal; cache < 5%

The judge is the loopback chat-completions server from tests/judge.py answering in 100 ms;
the ideal wall time is drafts x 0.1 s / 16 jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

WORDS = ("the order shipped on time and the invoice lists every figure with its source "
         "customers asked about refunds delivery dates pricing plans regional rollout").split()


def make_jsonl(path: str, count: int) -> None:
    """Write ``count`` drafts with small activation logs, some low-confidence, some tagged."""
    rng = random.Random(7)
    with open(path, "w", encoding="utf-8") as out:
        for i in range(count):
            nodes = [{"id": f"n{j}", "name": rng.choice(WORDS), "score": round(rng.random(), 3),
                      "tags": ["credentials"] if rng.random() < 0.05 else ["ops"]}
                     for j in range(rng.randint(1, 4))]
            line = {"id": f"draft-{i}",
                    "draft": " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 80))),
                    "activation": {"activated_nodes": nodes,
                                   "inference_paths": [["n0"]] * rng.randint(0, 4),
                                   "traversed_edges": [{"weight": rng.uniform(0, 5)}]}}
            out.write(json.dumps(line) + "\n")


def run(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """Run a command; return wall seconds, the child's peak RSS in MiB, and its exit code."""
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return seconds, peak, proc.returncode


def gate(count: int) -> bool:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "drafts.jsonl")
        make_jsonl(path, count)
        size = os.path.getsize(path) / 2**20
        seconds, peak, code = run([sys.executable, "-m", "critic_cli", "review", "--jsonl", path,
                                   "-t", "credentials", "--format", "jsonl", "--no-config",
                                   "--fail-on", "never", "-o", os.devnull])
    ok = code == 0 and seconds < 5 and peak < 150
    print(f"gate only: {count} drafts ({size:.0f} MiB of JSONL) in {seconds:.2f} s "
          f"({count / seconds:,.0f} drafts/s), peak RSS {peak:.0f} MiB "
          f"(targets: < 5 s, < 150 MiB) {'PASS' if ok else 'FAIL'}")
    return ok


def judge(count: int, jobs: int = 16, latency: float = 0.1) -> bool:
    """Review ``count`` drafts against a judge in another process, then again from the cache.

    The review runs in this process with openai imported beforehand, so the figure is the
    batch itself: interpreter start-up and the one-off ~0.6 s openai import are left out
    (they are printed separately, from a whole `critic review` process).
    """
    import asyncio  # noqa: F401

    import openai  # noqa: F401

    from critic_cli.config import Settings
    from critic_cli.inputs import Draft
    from critic_cli.review import plan
    from critic_cli.review import run as review_run

    server = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "loopback_judge.py"),
                               "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as folder:
            cache = os.path.join(folder, "cache")
            settings = Settings(model="judge", base_url=base_url, jobs=jobs, cache_dir=cache)
            drafts = [Draft(f"d{i}", f"Draft {i}: the plan cuts costs by {i % 50}% for most teams.")
                      for i in range(count)]
            timings = []
            for _ in range(2):
                records: list[object] = []
                start = time.perf_counter()
                review_run(plan(settings), iter(drafts), records.append)
                timings.append(time.perf_counter() - start)
            cached = sum(r.reflection.cached for r in records)  # type: ignore[attr-defined]
            os.makedirs(os.path.join(folder, "d"))
            for i in range(count):
                with open(os.path.join(folder, "d", f"{i:04}.txt"), "w", encoding="utf-8") as out:
                    out.write(f"Draft {i}")
            env = {**os.environ, "CRITIC_CACHE_DIR": os.path.join(folder, "cache2")}
            whole, _, code = run([sys.executable, "-m", "critic_cli", "review",
                                  os.path.join(folder, "d"), "--model", "judge", "--base-url",
                                  base_url, "-j", str(jobs), "--format", "jsonl", "--no-config",
                                  "--fail-on", "never", "-o", os.devnull], env)
    finally:
        server.terminate()
        server.wait()
    first, second = timings
    ideal = count * latency / jobs
    ratio, share = first / ideal, second / first
    ok = code == 0 and cached == count and ratio <= 1.3 and share < 0.05
    print(f"judge: {count} drafts, -j {jobs}, {latency * 1000:.0f} ms per reply: {first:.2f} s "
          f"(ideal {ideal:.2f} s, {ratio:.2f}x; target <= 1.3x)")
    print(f"cache replay: {second:.3f} s = {share:.1%} of the first run (target < 5%), "
          f"{cached}/{count} from the cache")
    print(f"whole process (start-up and openai import included): {whole:.2f} s "
          f"{'PASS' if ok else 'FAIL'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["gate", "judge", "all"], nargs="?", default="all")
    parser.add_argument("--drafts", type=int)
    args = parser.parse_args()
    ok = True
    if args.which in ("gate", "all"):
        ok &= gate(args.drafts or 100_000)
    if args.which in ("judge", "all"):
        ok &= judge(args.drafts or 200)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
