"""Replay: a session's events again, in order, chunks included.

Un-paced, events come back as fast as the caller takes them. Paced, the gaps between
the original timestamps are reproduced (divided by ``speed``; ``max_gap`` caps a long
idle pause), so a UI sees the session unfold as it did.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from universal_event.events import Event

__all__ = ["replay"]


def replay(
    events: Iterable[Event],
    *,
    paced: bool = False,
    speed: float = 1.0,
    max_gap: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Event]:
    """Yield every event; when ``paced``, wait as the original timestamps did."""
    if not speed > 0:  # NaN too: it compares false, and meant no pacing at all
        raise ValueError(f"replay speed must be positive, got {speed}")
    previous_ts: float | None = None
    for event in events:
        if paced and previous_ts is not None and event.ts:
            gap = max(0.0, event.ts - previous_ts) / speed
            if max_gap is not None:
                gap = min(gap, max_gap)
            if gap > 0:
                sleep(gap)
        if event.ts:
            previous_ts = event.ts
        yield event
