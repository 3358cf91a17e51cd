"""Every error memroute raises, in one tree.

    MemrouteError                 base: catch this to catch everything memroute raises
    ├── ConfigError               a setting is missing or has a value that cannot work
    ├── InputError                the caller passed something unusable (empty text, bad vector, ...)
    │   └── CatalogueError        an agent catalogue file cannot be read (says line and column)
    ├── NotFoundError             an id, session or owner that does not exist
    ├── DependencyError           an optional package is missing (says which `pip install` fixes it)
    ├── EmbeddingError            the embedding model failed or does not match the store
    │   └── ModelMismatchError    the store was written with another embedding model
    ├── StoreError                the store failed (the message says what to check)
    │   ├── StoreLockedError      another process holds the database lock for too long
    │   ├── StoreReadOnlyError    the database file or directory is not writable
    │   └── SchemaVersionError    the database was written by a newer memroute
    └── ServiceError              the memroute service refused or failed a request (``status``: HTTP status)
        ├── AuthError             no API key, a wrong one, or an owner the key may not act for
        └── RateLimitError        too many requests: retry after ``retry_after`` seconds

Low-level errors (``sqlite3``, ``psycopg``, ``httpx``) are translated at the edge, so callers only
ever see these. The service answers every error as ``{type, message, detail}`` with ``type`` the class
name, and :class:`memroute.Client` raises the same class again.
"""

from __future__ import annotations


class MemrouteError(Exception):
    """Base class of every memroute error."""


class ConfigError(MemrouteError):
    """A setting is missing or invalid."""


class InputError(MemrouteError, ValueError):
    """The caller passed a value memroute cannot use."""


class CatalogueError(InputError):
    """An agent catalogue file cannot be parsed or validated."""


class NotFoundError(MemrouteError, KeyError):
    """The thing asked for does not exist."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DependencyError(MemrouteError, ImportError):
    """An optional dependency is not installed."""


class EmbeddingError(MemrouteError):
    """The embedding model failed."""


class ModelMismatchError(EmbeddingError):
    """The store holds vectors of a different embedding model."""


class StoreError(MemrouteError):
    """The store failed."""


class StoreLockedError(StoreError):
    """The database is locked by another writer."""


class StoreReadOnlyError(StoreError):
    """The database cannot be written."""


class SchemaVersionError(StoreError):
    """The database schema is newer than this version of memroute."""


class ServiceError(MemrouteError):
    """The memroute service refused or failed a request.

    ``status`` is the HTTP status, ``kind`` the error's ``type`` in the service's answer (the class name
    unless a more precise one applies, e.g. ``PayloadTooLarge``), ``detail`` any structured detail, and
    ``retry_after`` how many seconds to wait before retrying, when the service said so.
    """

    def __init__(self, message: str, *, status: int = 500, kind: str | None = None, detail: object = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind or type(self).__name__
        self.detail = detail
        self.retry_after = retry_after


class AuthError(ServiceError):
    """No API key, a wrong one (401), or an owner the key may not act for (403)."""


class RateLimitError(ServiceError):
    """Too many requests for this key: retry after ``retry_after`` seconds (429)."""
