"""Time decay: older memories weigh a little less (seed 003's ``time_decay_factor``).

The multiplier is ``exp(-factor * age_in_years)``: with seed 003's default factor 0.1 a year-old memory
keeps 90 % of its score, so decay breaks near-ties towards the recent without burying an old memory that
matches clearly. A memory without a date is not decayed; a date after ``now`` counts as age 0.
"""

from __future__ import annotations

import math
from datetime import datetime

_YEAR_S = 365.25 * 86400


def decay_multiplier(occurred_at: datetime | None, now: datetime, factor: float) -> float:
    if occurred_at is None or factor <= 0:
        return 1.0
    age_years = max((now - occurred_at).total_seconds(), 0.0) / _YEAR_S
    return math.exp(-factor * age_years)
