"""A fast loopback chat-completions judge for benchmarks: asyncio, keep-alive, fixed latency.

    python bench/loopback_judge.py --latency 0.1     prints its base URL, then serves until killed

It answers every POST to /v1/chat/completions with an approve verdict after ``--latency``
seconds, however many requests are in flight, so a benchmark measures critic, not the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

VERDICT = json.dumps({"verdict": "approve", "text": "", "matched_preferences": []})
BODY = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": VERDICT}}],
}).encode()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 latency: float) -> None:
    """Answer requests on one connection until the client closes it."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length:
                await reader.readexactly(length)
            await asyncio.sleep(latency)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(latency: float) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, latency), "127.0.0.1", 0,
                                        backlog=1024)
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.1)
    asyncio.run(serve(parser.parse_args().latency))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
