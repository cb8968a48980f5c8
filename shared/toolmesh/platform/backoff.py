"""Pauses of the automatic retries that follow a schedule (the schedule's last pause repeats: a cap)."""

from __future__ import annotations


def scheduled_delay(attempt: int, schedule: tuple[float, ...]) -> float:
    """The pause after failed attempt ``attempt`` (1-based); past the schedule's end its last pause."""
    if not schedule:
        raise ValueError("a retry schedule needs at least one pause")
    return schedule[min(max(attempt, 1) - 1, len(schedule) - 1)]
