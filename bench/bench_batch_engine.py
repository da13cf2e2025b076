"""Batch engines at scale: `critic batch prepare` and `collect` over 1,000,000 drafts.

    python bench/bench_batch_engine.py [--drafts 1000000] [--fire 0.3] [--no-cache]

target: each step under 300 MiB peak RSS (bounded memory, whatever the number of drafts).

The input is generated JSONL where about ``--fire`` of the drafts carry a sensitive tag (the gate
fires, a request is written) and the rest have strong activation logs (approved locally). The
engine is simulated: one output line per request with a canned verdict (every tenth a revise),
written straight to the output file. Each step runs as a child process; its peak RSS is the
child's own ``ru_maxrss`` (``os.wait4``, the child's ``resource`` usage).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACK = os.path.join(ROOT, "rules", "default.yaml")
LIMIT_MIB = 300
WORDS = ("the order shipped on time and the invoice lists every figure with its source "
         "customers asked about refunds delivery dates pricing plans regional rollout").split()


def make_jsonl(path: str, count: int, fire: float) -> None:
    """Write ``count`` drafts; about ``fire`` of them carry the credentials tag."""
    rng = random.Random(7)
    strong = {"activated_nodes": [{"id": "n0", "name": "orders", "score": 1.0, "tags": ["ops"]}],
              "inference_paths": [["n0"]] * 3, "traversed_edges": [{"weight": 5.0}]}
    tagged = {"activated_nodes": [{"id": "n0", "name": "keys", "score": 0.9,
                                   "tags": ["credentials"]}],
              "inference_paths": [["n0"]] * 3, "traversed_edges": [{"weight": 4.0}]}
    with open(path, "w", encoding="utf-8") as out:
        for i in range(count):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
            activation = tagged if rng.random() < fire else strong
            out.write(json.dumps({"id": f"draft-{i}", "draft": f"{words} ({i})",
                                  "activation": activation}) + "\n")


def measure(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Run a command; return wall seconds, the child's own peak RSS in MiB, and its exit code."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, proc.returncode


def simulate_engine(request_files: list[str], output: str) -> int:
    """Answer every request line with a canned verdict, as an OpenAI Batch output file."""
    approve = json.dumps({"verdict": "approve", "text": "", "matched_preferences": []})
    revise = json.dumps({"verdict": "revise", "text": "A safer draft.",
                         "matched_preferences": ["Keep a courteous, professional tone."]})
    count = 0
    with open(output, "w", encoding="utf-8") as out:
        for path in request_files:
            with open(path, encoding="utf-8") as requests:
                for raw in requests:
                    custom_id = json.loads(raw)["custom_id"]
                    count += 1
                    body = {"id": f"chatcmpl-{count}", "object": "chat.completion",
                            "created": 1700000000, "model": "bench",
                            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                "role": "assistant",
                                "content": revise if count % 10 == 0 else approve}}],
                            "usage": {"prompt_tokens": 900, "completion_tokens": 20,
                                      "total_tokens": 920}}
                    out.write(json.dumps({
                        "id": f"batch_req_{count}", "custom_id": custom_id,
                        "response": {"status_code": 200, "request_id": f"req-{count}",
                                     "body": body},
                        "error": None}) + "\n")
    return count


def mib(path: str) -> float:
    return os.path.getsize(path) / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drafts", type=int, default=1_000_000)
    parser.add_argument("--fire", type=float, default=0.3, help="share that fires the gate")
    parser.add_argument("--no-cache", action="store_true",
                        help="collect fills no reply cache (by default it does)")
    args = parser.parse_args()
    critic = [sys.executable, "-m", "critic_cli", "batch"]
    ok = True
    with tempfile.TemporaryDirectory(prefix="critic-bench-") as folder:
        env = {**os.environ, "CRITIC_CACHE_DIR": os.path.join(folder, "cache")}
        drafts = os.path.join(folder, "drafts.jsonl")
        start = time.perf_counter()
        make_jsonl(drafts, args.drafts, args.fire)
        print(f"input: {args.drafts:,} drafts, {mib(drafts):,.0f} MiB of JSONL "
              f"(generated in {time.perf_counter() - start:.1f} s)")

        requests = os.path.join(folder, "requests.jsonl")
        listing = os.path.join(folder, "files.txt")
        with open(listing, "w", encoding="utf-8") as files_out:
            start = time.perf_counter()
            proc = subprocess.Popen(
                [*critic, "prepare", "--jsonl", drafts, "-r", PACK, "--model", "bench",
                 "--base-url", "http://127.0.0.1:9/v1", "--no-config", "-o", requests,
                 "--quiet"], cwd=ROOT, env=env, stdout=files_out)
            _, status, usage = os.wait4(proc.pid, 0)
            seconds, peak = time.perf_counter() - start, usage.ru_maxrss / 1024
        code = os.waitstatus_to_exitcode(status)
        with open(listing, encoding="utf-8") as handle:
            files = handle.read().split()
        lines = sum(1 for path in files for _ in open(path, "rb"))  # noqa: SIM115
        size = sum(mib(path) for path in files)
        state = requests + ".state.jsonl"
        passed = code == 0 and peak < LIMIT_MIB
        ok &= passed
        print(f"prepare: {seconds:.1f} s ({args.drafts / seconds:,.0f} drafts/s), peak RSS "
              f"{peak:.0f} MiB; {lines:,} requests in {len(files)} files ({size:,.0f} MiB), "
              f"state {mib(state):,.0f} MiB (target < {LIMIT_MIB} MiB) "
              f"{'PASS' if passed else 'FAIL'}")

        output = os.path.join(folder, "output.jsonl")
        start = time.perf_counter()
        played = simulate_engine(files, output)
        print(f"engine (simulated): {played:,} output lines, {mib(output):,.0f} MiB "
              f"in {time.perf_counter() - start:.1f} s")

        report = os.path.join(folder, "records.jsonl")
        seconds, peak, code = measure(
            [*critic, "collect", output, "--state", state, "--format", "jsonl", "-o", report,
             "--quiet", *(["--no-cache"] if args.no_cache else [])], env)
        verdicts: Counter[str] = Counter()
        with open(report, "rb") as handle:
            for raw in handle:
                verdicts[json.loads(raw)["verdict"]] += 1
        cached = "no cache" if args.no_cache else f"{played:,} replies cached"
        passed = code in (0, 1) and peak < LIMIT_MIB and sum(verdicts.values()) == args.drafts
        ok &= passed
        print(f"collect: {seconds:.1f} s ({args.drafts / seconds:,.0f} records/s), peak RSS "
              f"{peak:.0f} MiB; {sum(verdicts.values()):,} records "
              f"({', '.join(f'{v} {n:,}' for v, n in sorted(verdicts.items()))}), {cached} "
              f"(target < {LIMIT_MIB} MiB) {'PASS' if passed else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
