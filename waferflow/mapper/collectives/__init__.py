"""Collective communication schedules on plain data.

Builders turn (kind, algorithm, group size, bytes) into step-tagged point-to-point
transfers; ``check_schedule`` proves a schedule computes its collective; and
``estimate_time`` / ``choose_algorithm`` cost schedules on placed ranks. The
``lower-collectives`` pass turns the chosen schedule into actor messages.
"""

from waferflow.mapper.collectives.builders import build_schedule, supported_algorithms
from waferflow.mapper.collectives.checker import check_schedule
from waferflow.mapper.collectives.cost import choose_algorithm, estimate_time
from waferflow.mapper.collectives.schedule import (
    Algorithm,
    CollectiveKind,
    Schedule,
    Transfer,
    chunk_sizes,
    split_even,
)

__all__ = [
    "Algorithm",
    "CollectiveKind",
    "Schedule",
    "Transfer",
    "build_schedule",
    "check_schedule",
    "choose_algorithm",
    "chunk_sizes",
    "estimate_time",
    "split_even",
    "supported_algorithms",
]
