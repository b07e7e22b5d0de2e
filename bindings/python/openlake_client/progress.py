"""Progress of long transfers (docs/checkpoints.md, "Progress"): the caller's
`progress(done_bytes, total_bytes)` callback and, when run interactively, a tqdm bar.

    with progress.reporting(total, callback, progress_bar, "save") as report:
        store.transfer.put_many(bucket, puts, progress=report)

`progress_bar`: None shows a bar only when stderr is a terminal and tqdm is installed; True
shows one wherever stderr goes (a warning and no bar without tqdm); False never shows one.
tqdm is optional (Debian's python3-tqdm) and imported only when a bar is wanted.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import warnings
from typing import Callable, Iterator, Optional

Callback = Callable[[int, int], None]


def _interactive() -> bool:
    # sys.stderr is None in a process started without one (pythonw, some daemons).
    return sys.stderr is not None and sys.stderr.isatty()


def _open_bar(total: int, progress_bar: Optional[bool], desc: str):
    """A tqdm bar of `total` bytes on stderr, or None."""
    if progress_bar is False or (progress_bar is None and not _interactive()):
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # optional: no bar without it
        if progress_bar:
            warnings.warn("progress_bar=True, but tqdm is not installed (Debian: python3-tqdm); "
                          "no progress bar is shown")
        return None
    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024,
                file=sys.stderr)


class Reporter:
    """What a transfer is given as `progress=`: called with the bytes done so far in the batch
    (cumulative) and the batch's total; tells the caller's callback and moves the bar."""

    def __init__(self, total: int, callback: Optional[Callback] = None,
                 progress_bar: Optional[bool] = None, desc: str = "") -> None:
        self._callback = callback
        self._bar = _open_bar(total, progress_bar, desc)
        self._shown = 0  # bytes the bar has been told of
        # The transfer calls from its worker threads; it makes one call at a time, but the bar's
        # count must not depend on that, nor race close().
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self._callback is not None or self._bar is not None

    def __call__(self, done: int, total: int) -> None:
        with self._lock:
            if self._bar is not None and done > self._shown:
                self._bar.update(done - self._shown)
                self._shown = done
        # Outside the lock: the caller's callback may take its time, and sees exactly the
        # transfer's calls, as it did before there was a bar.
        if self._callback is not None:
            self._callback(done, total)

    def close(self) -> None:
        """Ends the bar (it stays on screen at its last count); later calls reach only the
        callback."""
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None


@contextlib.contextmanager
def reporting(total: int, callback: Optional[Callback], progress_bar: Optional[bool],
              desc: str) -> Iterator[Optional[Reporter]]:
    """A Reporter for one transfer batch of `total` bytes, closed when the block ends (also on
    an error). Yields None when there is neither a callback nor a bar, so that the transfer
    makes no calls into Python at all."""
    r = Reporter(total, callback, progress_bar, desc)
    try:
        yield r if r.active else None
    finally:
        r.close()
