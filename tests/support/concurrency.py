"""Running a test's work on several threads at once."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_in_threads(work: Callable[[int], None], count: int) -> list[BaseException]:
    """`work(0)` … `work(count - 1)`, each on a thread of its own, all joined; returns what they raised (a thread's
    exception does not reach the test by itself, and a failed thread must fail the test)."""
    errors: list[BaseException] = []

    def guarded(n: int) -> None:
        try:
            work(n)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors
