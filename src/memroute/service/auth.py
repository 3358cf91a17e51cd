"""API keys and owner scoping, without any web framework (the HTTP API and the MCP server share it).

A key is a random token (``mr_`` + 43 URL-safe characters: 256 bits); the service stores only its
SHA-256, with the owners the key may act for. A plain hash suffices because keys are random, not
chosen by people: there is nothing to guess from a dictionary. The presented key's hash is compared with
every stored hash in constant time, so timing says nothing about which hash came close.

Entries (setting ``api_keys``, or one per line in the file named by ``api_keys_file``)::

    sha256:5f1d...e2=alice              a key for alice
    sha256:77aa...01=alice,bob          a key for alice and bob (requests name one with ?owner=)
    sha256:c0ff...ee=*                  a key for any owner (administration, tests)

Without any key the service runs in development mode: every request acts for any owner, and only
clients on a loopback address are served (:func:`is_loopback`); binding another address is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memroute.config import Settings
from memroute.errors import AuthError, ConfigError, InputError

ANY_OWNER = "*"
MAX_OWNER_CHARS = 256
_ENTRY = re.compile(r"^sha256:(?P<digest>[0-9a-fA-F]{64})=(?P<owners>.+)$")


def new_key() -> str:
    """A fresh random API key (give it to the client; store only :func:`key_hash` of it)."""
    return "mr_" + secrets.token_urlsafe(32)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_entry(key: str, owners: Iterable[str]) -> str:
    """The configuration line for ``key``: ``sha256:<hex>=owner,...``."""
    names = [check_owner(o) if o != ANY_OWNER else o for o in owners]
    if not names:
        raise InputError("a key needs at least one owner (or * for any owner)")
    return f"sha256:{key_hash(key)}={','.join(names)}"


_NOT_OWNER = r",;=\r\n\x00"
_SPACE_OR_STAR = r"[\t\x0b\x0c\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000*]"
OWNER_PATTERN = (rf"^(?:[^{_NOT_OWNER}]*[^{_NOT_OWNER}\t\x0b\x0c\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029"
                 rf"\u202f\u205f\u3000*][^{_NOT_OWNER}]*|{_SPACE_OR_STAR}*(?:{_SPACE_OR_STAR}\*|\*{_SPACE_OR_STAR})"
                 rf"{_SPACE_OR_STAR}*)$")
""":func:`check_owner`'s rule as a regular expression, for the OpenAPI schema (it reads the same in Python,
Rust and ECMAScript): no , ; = line break or NUL, not only white space (``str.isspace``), not ``*``. So
either some character is neither white space nor ``*``, or there are only white space and stars, with a
star and at least two characters. A test checks that the two agree."""


def check_owner(owner: str) -> str:
    """An owner id as given, or an ``InputError`` saying why it cannot be one."""
    if not owner or not owner.strip():
        raise InputError("owner is empty: name an owner (a user or tenant id)")
    if len(owner) > MAX_OWNER_CHARS or owner == ANY_OWNER or any(c in owner for c in ",;=\n\r\x00"):
        raise InputError(f"owner {owner[:40]!r} is not a valid owner id: at most {MAX_OWNER_CHARS} characters, "
                         "without , ; = or line breaks, and not *")
    return owner


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts as: ``key_id`` (a short, non-secret name for logs and rate limits) and the
    owners it may act for (``*``: any)."""

    key_id: str
    owners: frozenset[str]
    default_owner: str

    def owner_for(self, requested: str | None) -> str:
        """The owner a request acts for: the one it names, if this key may act for it; else the key's only
        owner. Raises ``AuthError`` (403) for an owner the key may not use."""
        if requested is None:
            if ANY_OWNER in self.owners:
                return check_owner(self.default_owner)
            if len(self.owners) == 1:
                return next(iter(self.owners))
            raise InputError(f"this API key may act for several owners ({', '.join(sorted(self.owners))}): "
                             "name one with ?owner=")
        check_owner(requested)
        if ANY_OWNER in self.owners or requested in self.owners:
            return requested
        raise AuthError(f"this API key may not act for owner {requested!r}", status=403)


@dataclass(frozen=True, slots=True)
class _Entry:
    digest: bytes
    owners: frozenset[str]


class KeyRing:
    """The configured keys. ``authenticate`` turns a presented key into a :class:`Principal`."""

    def __init__(self, entries: Iterable[_Entry], default_owner: str) -> None:
        self._entries = tuple(entries)
        self.default_owner = default_owner

    @property
    def open(self) -> bool:
        """No keys are configured: development mode."""
        return not self._entries

    @classmethod
    def parse(cls, text: str, source: str, default_owner: str) -> KeyRing:
        """Entries separated by ``;`` or new lines; ``#`` starts a comment. Errors name the entry."""
        entries = []
        for number, line in enumerate(text.splitlines(), 1):
            for part in line.split("#", 1)[0].split(";"):
                part = part.strip()
                if not part:
                    continue
                match = _ENTRY.match(part)
                if match is None:
                    raise ConfigError(f"{source}, line {number}: {part[:20]!r}... is not a key entry; write "
                                      "sha256:<64 hex digits>=owner[,owner...] (memroute new-key OWNER prints one)")
                owners = frozenset(o.strip() for o in match["owners"].split(",") if o.strip())
                try:
                    for owner in owners - {ANY_OWNER}:
                        check_owner(owner)
                except InputError as exc:
                    raise ConfigError(f"{source}, line {number}: {exc}") from None
                entries.append(_Entry(bytes.fromhex(match["digest"]), owners))
        return cls(entries, default_owner)

    @classmethod
    def from_settings(cls, settings: Settings) -> KeyRing:
        ring = cls.parse(settings.api_keys, "setting api_keys (MEMROUTE_API_KEYS)", settings.owner)
        if settings.api_keys_file:
            path = Path(settings.api_keys_file)
            try:
                file_text = path.read_text("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot read the API keys file {path} (api_keys_file): {exc}") from None
            ring = cls([*ring._entries, *cls.parse(file_text, str(path), settings.owner)._entries], settings.owner)
        return ring

    def authenticate(self, presented: str | None, client_host: str | None) -> Principal:
        """The principal of a presented key; raises ``AuthError`` (401) for a missing or wrong one.

        In development mode (no keys) every loopback client acts for any owner, and any other client is
        refused: a development server that ends up reachable from the network serves nobody.
        """
        if self.open:
            if client_host is None or not is_loopback(client_host):
                raise AuthError("this service runs without API keys and serves loopback clients only", status=401)
            return Principal(f"dev:{client_host}", frozenset({ANY_OWNER}), self.default_owner)
        if not presented:
            raise AuthError("an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
                            status=401)
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        found: _Entry | None = None
        for entry in self._entries:  # every entry is compared: the time does not depend on which matched
            if hmac.compare_digest(digest, entry.digest):
                found = entry
        if found is None:
            raise AuthError("the API key is not valid", status=401)
        return Principal(found.digest.hex()[:12], found.owners, self.default_owner)
