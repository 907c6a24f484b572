"""`python -m bench.instructions` drives real round trips: its harness must keep working, counted or not."""

from __future__ import annotations

import pytest

from bench import instructions


@pytest.mark.parametrize("era", ["legacy", "modern", "ping"])
def test_the_counting_harness_makes_checked_round_trips(era):
    """Each mode checks its first answer (a 200 with the tool's text, or the exact pong) and then runs."""
    assert instructions.drive(era, 3) >= 0.0
