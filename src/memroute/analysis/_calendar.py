"""Calendar arithmetic for time ranges: day, week (Monday first), month and year boundaries.

Every function takes and returns aware datetimes in the time zone of the reference time, so that
"yesterday" means the user's yesterday, not UTC's.
"""

from __future__ import annotations

from datetime import datetime, timedelta

Range = tuple[datetime, datetime]
"""A half-open interval ``[start, end)``."""


def day_start(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


def day(now: datetime, offset: int = 0) -> Range:
    start = day_start(now) + timedelta(days=offset)
    return start, start + timedelta(days=1)


def week(now: datetime, offset: int = 0) -> Range:
    """The calendar week (Monday 00:00 to the next Monday 00:00) ``offset`` weeks from now's."""
    start = day_start(now) - timedelta(days=now.weekday()) + timedelta(weeks=offset)
    return start, start + timedelta(weeks=1)


def weekend(now: datetime, offset: int = 0) -> Range:
    monday, _ = week(now, offset)
    return monday + timedelta(days=5), monday + timedelta(days=7)


def add_months(year: int, month: int, delta: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + delta
    return index // 12, index % 12 + 1


def month_of(now: datetime, year: int, month: int) -> Range:
    start = day_start(now).replace(year=year, month=month, day=1)
    ny, nm = add_months(year, month, 1)
    return start, start.replace(year=ny, month=nm)


def month(now: datetime, offset: int = 0) -> Range:
    y, m = add_months(now.year, now.month, offset)
    return month_of(now, y, m)


def year_of(now: datetime, year: int) -> Range:
    start = day_start(now).replace(year=year, month=1, day=1)
    return start, start.replace(year=year + 1)


def year(now: datetime, offset: int = 0) -> Range:
    return year_of(now, now.year + offset)


def date_of(now: datetime, y: int, m: int, d: int) -> Range:
    start = day_start(now).replace(year=y, month=m, day=d)
    return start, start + timedelta(days=1)


def recent_month_year(now: datetime, m: int) -> int:
    """The year of the most recent month ``m`` that is not in the future (this year's if it has begun)."""
    return now.year if m <= now.month else now.year - 1


def recent_date_year(now: datetime, m: int, d: int) -> int:
    """The year of the most recent ``m``/``d`` that is not in the future."""
    return now.year if (m, d) <= (now.month, now.day) else now.year - 1


def weekday_on_or_before(now: datetime, weekday: int) -> Range:
    """The most recent day with this weekday (0 = Monday), today included."""
    back = (now.weekday() - weekday) % 7
    return day(now, -back)


def weekday_before(now: datetime, weekday: int) -> Range:
    """The most recent day with this weekday strictly before today ("last Friday")."""
    back = (now.weekday() - weekday) % 7 or 7
    return day(now, -back)


def weekday_in_week(now: datetime, weekday: int, week_offset: int) -> Range:
    monday, _ = week(now, week_offset)
    start = monday + timedelta(days=weekday)
    return start, start + timedelta(days=1)


def last_days(now: datetime, n: int) -> Range:
    """The ``n`` days that end with today, today included: "the past 7 days"."""
    end = day_start(now) + timedelta(days=1)
    return end - timedelta(days=n), end


def last_months(now: datetime, n: int) -> Range:
    end = day_start(now) + timedelta(days=1)
    y, m = add_months(now.year, now.month, -n)
    d = min(now.day, 28)  # 31 March minus one month must still be a date
    return day_start(now).replace(year=y, month=m, day=d), end
