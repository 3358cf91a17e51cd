"""The times memroute accepts, and how stores keep them exactly.

Every time that comes in (a memory's ``occurred_at`` / ``created_at`` / ``expires_at``, a message's ``at``,
a search's ``start`` / ``end``, a recall's ``now``) must lie in :data:`EARLIEST` .. :data:`LATEST`, UTC:
the years 1100 to 8899. That is more than a thousand years inside the ends of Python's calendar (years 1
and 9999), so that date arithmetic on an accepted time (a time-zone offset, a recall window, "1000 years
ago" in a query) can never leave the calendar; anything outside is an :class:`~memroute.errors.InputError`.

Stores keep a time as whole microseconds since 1970-01-01T00:00:00Z (SQLite: an INTEGER column;
PostgreSQL: ``timestamptz``, which has the same resolution), so a time is read back exactly as written. A
float of seconds, as SQLite stored before schema version 2, holds about 16 digits: at microsecond
resolution it rounds, and at the calendar's end it rounded into a year 10000 that no reader could load.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memroute.errors import InputError

EARLIEST = datetime(1100, 1, 1, tzinfo=UTC)
"""The earliest time memroute accepts."""
LATEST = datetime(8899, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
"""The latest time memroute accepts."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_FIRST = datetime.min.replace(tzinfo=UTC)
_LAST = datetime.max.replace(tzinfo=UTC)


def checked_time(value: object, what: str = "time") -> datetime | None:
    """``value`` (an aware or naive ``datetime``, naive taken as UTC, or an ISO 8601 string) as aware UTC.

    ``None`` stays ``None``. Anything else, an unreadable string, or a time outside :data:`EARLIEST` ..
    :data:`LATEST` raises :class:`~memroute.errors.InputError` naming ``what``.
    """
    return None if value is None else _checked(value, what)


def _checked(value: object, what: str) -> datetime:
    if isinstance(value, str):
        text = value
        try:
            value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"{what} is not an ISO 8601 time: {text[:80]!r} "
                             "(example: 2025-01-31T09:00:00Z)") from None
    if not isinstance(value, datetime):
        raise InputError(f"{what} must be a datetime or an ISO 8601 string, not {type(value).__name__}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError):  # e.g. 9999-12-31T23:59:59-14:00 is in the year 10000 in UTC
        utc = None
    if utc is None or not EARLIEST <= utc <= LATEST:
        raise InputError(f"{what} {value.isoformat()} is outside the times memroute accepts, "
                         f"{EARLIEST.isoformat()} to {LATEST.isoformat()}")
    return utc


def to_micros(value: datetime) -> int:
    """Whole microseconds since the epoch, exactly (a naive datetime is taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _MICRO


def from_micros(value: int) -> datetime:
    """The UTC time of :func:`to_micros`. A value past the calendar's ends (only a store written by an older
    memroute or by hand can hold one) reads as the calendar's first or last microsecond instead of failing."""
    micros = int(value)
    if micros <= _FIRST_MICROS:
        return _FIRST
    if micros >= _LAST_MICROS:
        return _LAST
    return _EPOCH + timedelta(microseconds=micros)


_FIRST_MICROS = to_micros(_FIRST)
_LAST_MICROS = to_micros(_LAST)


def checked_micros(value: datetime | None, what: str) -> int | None:
    """:func:`to_micros` of a time a store is asked to write, which must be in the accepted range."""
    return None if value is None else to_micros(_checked(value, what))


def checked_range(start: object, end: object) -> tuple[datetime | None, datetime | None]:
    """``start`` and ``end`` of a time range, each as :func:`checked_time`; a range that ends before it starts
    matches nothing by construction, so it is the caller's mistake: an :class:`~memroute.errors.InputError`."""
    first, last = checked_time(start, "start"), checked_time(end, "end")
    if first is not None and last is not None and first > last:
        raise InputError(f"start {first.isoformat()} is after end {last.isoformat()}; swap them, or leave one out")
    return first, last
