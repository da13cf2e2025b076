"""Per-call overhead of reflection: critic's own time beyond the server's, per draft.

Against the loopback judge (answering at once), it times N drafts through critic's whole
model path -- gate, checks, retrieval, prompt, cache key, the openai client, parsing, the
record -- and N bare HTTP POSTs of the same request body with http.client. The difference per
call is critic's overhead. The one-off `import openai` is excluded (it is paid once a run).

    python bench/bench_reflection.py [--calls 300]      target: < 15 ms per call
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import statistics
import sys
import time
from urllib.parse import urlsplit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from critic_cli.config import Settings  # noqa: E402
from critic_cli.inputs import Draft  # noqa: E402
from critic_cli.review import Assessment, Reflector, finish, plan, triage  # noqa: E402
from tests.judge import serve_judge  # noqa: E402

TARGET_MS = 15.0


def bare_posts(url: str, body: dict[str, object], calls: int) -> list[float]:
    """Time plain HTTP POSTs of ``body``: the server's own share of each call."""
    parts = urlsplit(url)
    data = json.dumps(body).encode()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        connection = http.client.HTTPConnection(parts.hostname, parts.port)
        connection.request("POST", parts.path + "/chat/completions", data,
                           {"Content-Type": "application/json"})
        json.loads(connection.getresponse().read())
        connection.close()
        times.append(time.perf_counter() - start)
    return times


async def critic_calls(the_plan, calls: int) -> list[float]:
    """Time critic's model path for ``calls`` distinct drafts, one at a time."""
    reflector = Reflector(the_plan)
    times = []
    try:
        for i in range(calls):
            start = time.perf_counter()
            draft = Draft(f"d{i}", f"Draft {i}: revenue grew {i % 40}% according to the plan.")
            assessment = triage(the_plan, draft)
            assert isinstance(assessment, Assessment)
            finish(the_plan, assessment, await reflector.ask(assessment))
            times.append(time.perf_counter() - start)
    finally:
        await reflector.aclose()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    import openai  # noqa: F401  (the one-off import, outside the timing)

    with serve_judge() as judge:
        settings = Settings(model="judge", base_url=judge.base_url, cache=False,
                            rules=(os.path.join(ROOT, "rules", "default.yaml"),))
        the_plan = plan(settings)
        asyncio.run(critic_calls(the_plan, 5))  # warm up: client, connection pool
        critic = asyncio.run(critic_calls(the_plan, args.calls))
        body = judge.bodies[-1]
        bare = bare_posts(judge.base_url, body, args.calls)
    critic_ms = statistics.median(critic) * 1000
    bare_ms = statistics.median(bare) * 1000
    overhead = critic_ms - bare_ms
    print(f"critic per call: {critic_ms:.2f} ms median of {args.calls}")
    print(f"bare POST:       {bare_ms:.2f} ms median of {args.calls}")
    print(f"overhead:        {overhead:.2f} ms per call (target < {TARGET_MS:.0f} ms) "
          f"{'PASS' if overhead < TARGET_MS else 'FAIL'}")
    return 0 if overhead < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
