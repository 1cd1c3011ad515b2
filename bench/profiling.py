"""cProfile for a bench worker process (every thread), and a short printed summary.

cProfile hooks one thread; the worker runs its executions on a pool of threads. So a profiler
is started in each thread as it starts (``threading.setprofile``), and the main thread's and
all threads' profiles are merged into one ``.pstats`` file when the worker stops.

The clock is each thread's CPU time (``time.thread_time``): a thread blocked on a lock or on
the server costs nothing, so the figures say where the worker burns its core, not where its
threads wait (with the wall clock, lock waits of idle threads fill the top of the list).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def run_profiled(fn: Callable[[], Any], path: Path) -> Any:
    """Run ``fn()`` with every thread it starts profiled; write the merged stats to ``path``."""
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start_in_thread(frame: Any, event: str, arg: Any) -> None:
        profile = cProfile.Profile(time.thread_time)
        with lock:
            profiles.append(profile)
        profile.enable()  # replaces this hook for the rest of the thread

    main = cProfile.Profile(time.thread_time)
    threading.setprofile(start_in_thread)
    main.enable()
    try:
        return fn()
    finally:
        main.disable()
        threading.setprofile(None)  # type: ignore[arg-type]
        sys.setprofile(None)
        stats = pstats.Stats(main)
        with lock:
            for profile in profiles:
                try:
                    stats.add(profile)
                except TypeError:  # a thread that never made a call: nothing recorded
                    pass
        path.parent.mkdir(parents=True, exist_ok=True)
        stats.dump_stats(str(path))


def summary(paths: Iterable[Path], *, top: int = 15) -> str:
    """The merged profiles' top ``top`` functions by cumulative and by own (total) time."""
    files = [str(p) for p in paths]
    if not files:
        return "no profiles written"
    out = io.StringIO()
    stats = pstats.Stats(*files, stream=out)
    stats.strip_dirs()
    for key, label in (("cumulative", "cumulative"), ("tottime", "own (total) time")):
        out.write(f"Top {top} by {label} (thread CPU seconds), {len(files)} process(es):\n")
        stats.sort_stats(key).print_stats(top)
    return out.getvalue()
