"""Gate-only reviews on several processes, records still in input order.

The gate and the checks are CPU work, so a large gate-only run splits its drafts into chunks
that worker processes decide (reading and parsing each draft there too). Small runs never pay
for starting processes: the first drafts are decided here while the rest are counted in.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from critic_cli.config import Settings
from critic_cli.inputs import Item
from critic_cli.record import Record

if TYPE_CHECKING:
    from multiprocessing.pool import AsyncResult

    from critic_cli.review import Plan

SERIAL_FIRST = 2000
CHUNK = 500

_plan: Plan | None = None


def workers_for(settings: Settings) -> int:
    """Return how many processes a gate-only run may use: ``--jobs``, at most the cores."""
    return max(1, min(settings.jobs, os.cpu_count() or 1))


def _start(settings: Settings) -> None:
    global _plan
    import signal

    from critic_cli.review import plan

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle, quietly

    _plan = plan(settings)  # each worker loads the packs itself: compiled RE2 does not pickle


Render = Callable[[Record], str]


def _decide_chunk(items: list[Item], render: Render | None) -> list[Any]:
    from critic_cli.review import decide

    assert _plan is not None
    if render is None:
        return [decide(_plan, item) for item in items]
    # Rendered here, the records need not travel back: only their verdict and their text.
    return [(record.verdict, render(record)) for record in (decide(_plan, i) for i in items)]


def _chunks(items: Iterator[Item], size: int) -> Iterator[list[Item]]:
    while chunk := list(islice(items, size)):
        yield chunk


def records(plan: Plan, items: Iterable[Item], workers: int) -> Iterator[Record]:
    """Yield the record of every item in order, deciding large runs on ``workers`` processes."""
    return _map(plan, items, workers, None)


def rendered(plan: Plan, items: Iterable[Item], workers: int, render: Render
             ) -> Iterator[tuple[str, str]]:
    """Yield (verdict, ``render(record)``) for every item in order; ``render`` must pickle."""
    return _map(plan, items, workers, render)


def _map(plan: Plan, items: Iterable[Item], workers: int, render: Render | None
         ) -> Iterator[Any]:
    from critic_cli.review import decide

    def here(item: Item) -> Any:
        record = decide(plan, item)
        return record if render is None else (record.verdict, render(record))

    iterator = iter(items)
    for item in islice(iterator, SERIAL_FIRST):
        yield here(item)
    rest = next(iterator, None)
    if rest is None:
        return
    if workers <= 1:
        for item in chain([rest], iterator):
            yield here(item)
        return
    # fork: the workers start at once and re-import nothing (critic runs no threads of its
    # own here: the progress bar refreshes by hand); spawn where there is no fork.
    import multiprocessing  # only now: a small run never pays for it

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with context.Pool(workers, initializer=_start, initargs=(plan.settings,)) as pool:
        pending: deque[AsyncResult[list[Any]]] = deque()
        for chunk in _chunks(chain([rest], iterator), CHUNK):
            pending.append(pool.apply_async(_decide_chunk, (chunk, render)))
            if len(pending) >= 3 * workers:  # a bounded window: memory stays flat
                yield from pending.popleft().get()
        while pending:
            yield from pending.popleft().get()
