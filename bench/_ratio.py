"""Shared helpers for the bench scripts: alternate rounds, take the best, print RATIO lines."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(rounds: int, *functions: Callable[[], object]) -> list[float]:
    """Run the functions alternately ``rounds`` times; the best wall time of each."""
    best = [float("inf")] * len(functions)
    for _ in range(rounds):
        for index, function in enumerate(functions):
            start = time.perf_counter()
            function()
            best[index] = min(best[index], time.perf_counter() - start)
    return best


def ratio_line(
    name: str, project: float, baseline: float, unit: str, op: str, target: float
) -> str:
    """One ``RATIO`` line; ``ratio`` is baseline/project for times (higher = faster)."""
    ratio = baseline / project if project else float("inf")
    ok = ratio >= target if op == ">=" else ratio <= target
    return (
        f"RATIO {name} project={project:.4g}{unit} baseline={baseline:.4g}{unit} "
        f"ratio={ratio:.2f} target={op}{target} ok={'yes' if ok else 'no'}"
    )
