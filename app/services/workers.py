"""Processes that end with the process that started them.

`sporal serve` starts processes: with ``--workers N`` uvicorn's serving processes, and in each
serving process the one that trains prediction models (forked by multiprocessing's forkserver,
with multiprocessing's resource tracker beside it). None of them may outlive the server, yet
none notices on its own that it is gone: each holds a copy of the pipes it would have to see
closed (the training worker both ends of its own job queue; the forkserver waits for its
children to close the pipe they inherit; the resource tracker for every process holding its
pipe to close it). After a SIGKILL of the server they stayed alive until killed by hand.

So a child watches the process that started it. multiprocessing hands each child a sentinel,
the read end of a pipe whose write end only that parent holds (whichever process forked the
child, the forkserver included): it becomes readable the moment the parent dies, SIGKILL
included. A daemon thread waits on it and ends the child. The forkserver and the resource
tracker need no watch of their own: each exits once the watched children are gone.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import wait

__all__ = ["ORPHAN_EXIT_CODE", "exit_now", "stop_gracefully", "watch_parent"]

logger = logging.getLogger("sporal")

ORPHAN_EXIT_CODE = 70
"""The exit status of a child that ended because its parent died."""


def watch_parent(on_death: Callable[[], None]) -> bool:
    """Call ``on_death`` (in a daemon thread) as soon as the process that started this one dies.

    Only for a process started by :mod:`multiprocessing` (spawn, fork or forkserver), the only
    kind that has a sentinel of its parent. Returns whether a watch was started (False in a
    process started otherwise, such as ``sporal serve`` itself or a test).
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return False
    sentinel = parent.sentinel
    threading.Thread(target=_watch, args=(sentinel, on_death), name="sporal-parent-watch",
                     daemon=True).start()
    return True


def _watch(sentinel: int, on_death: Callable[[], None]) -> None:
    wait([sentinel])  # readable once the parent's end of the pipe is closed: it died
    on_death()


def exit_now() -> None:
    """End this process at once, running nothing more (its parent, who would care, is gone)."""
    os._exit(ORPHAN_EXIT_CODE)


def stop_gracefully(grace: float) -> Callable[[], None]:
    """What a serving process does when its parent dies: SIGTERM itself, as the parent would
    have (requests in flight finish, the application shuts down), and exit after ``grace``
    seconds whatever is still running."""

    def stop() -> None:
        logger.warning("sporal: the process that started worker %d died; it stops",
                       os.getpid())
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace)
        exit_now()

    return stop
