"""Mutated native input for the adapters' property tests, and a cap on memory.

The fuzz tests decode recorded or captured native lines and frames, change a few of them
at random (seeded) and check what the adapters make of them: only typed errors escape,
and every event reads back. A native value that sizes an allocation (an index, a count)
must not take the machine's memory, so they run under :func:`capped_address_space`.
"""

from __future__ import annotations

import random
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

WEIRD: list[Any] = [None, 0, -1, 10**12, 1.5, True, "", "x", [], {}, [1], {"a": 1}, ["x"]]
"""Values of every JSON type, edge numbers and empties: what a key's value becomes."""


def mutate(value: Any, rng: random.Random) -> Any:
    """One random change deep in a decoded value: a key dropped, a value of another type."""
    if isinstance(value, dict) and value:
        value = dict(value)
        key = rng.choice(list(value))
        roll = rng.random()
        if roll < 0.25:
            del value[key]
        elif roll < 0.6:
            value[key] = rng.choice(WEIRD)
        else:
            value[key] = mutate(value[key], rng)
        return value
    if isinstance(value, list) and value:
        value = list(value)
        at = rng.randrange(len(value))
        value[at] = mutate(value[at], rng)
        return value
    return rng.choice(WEIRD)


@contextmanager
def capped_address_space(extra: int) -> Iterator[bool]:
    """At most ``extra`` more bytes of address space (yields whether the cap is on): an
    allocation a native value sizes fails with MemoryError instead of taking the
    machine's memory. Off where ``/proc`` or the hard limit does not allow it."""
    statm = Path("/proc/self/statm")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if not statm.exists():
        yield False
        return
    cap = int(statm.read_text().split()[0]) * resource.getpagesize() + extra
    if hard != resource.RLIM_INFINITY and cap > hard:
        yield False
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield True
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
