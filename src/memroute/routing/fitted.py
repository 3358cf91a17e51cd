"""A router fitted on a team's own labelled conversations (``memroute fit --dialogues``), as one JSON file.

The file holds what :mod:`memroute.routing.training` learned: example utterances per agent (they feed the
example classifier of :mod:`memroute.routing.examples`), the stay / switch rule's weights
(:class:`PolicyParams`) and the confidence calibration, together with the catalogue it was fitted for (agent
ids and a content hash), the encoder, and how it was fitted. Nothing fitted means zero-shot routing.

A fit is applied by agent id: an agent of the catalogue that the fit has examples for gets them added to its
own. A catalogue with an agent that would have no examples at all (one added after the fit) is routed
zero-shot, with a warning: that agent would lose to every example-scored one (:meth:`FittedRouting.usable`).
A different encoder than the fit's is refused (the rule's margins are in units of the encoder's scores).
A request bank other than the one it was fitted beside (the ``routing_bank`` setting) is used with a warning:
the rule was tuned on that bank's scores for Japanese and Korean messages.
The file sits next to the catalogue (``agents.toml`` -> ``agents.fit.json``, see :func:`fit_path_for`) or
anywhere the ``routing_fit`` setting names.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from memroute.errors import InputError
from memroute.routing.agents import agent_version
from memroute.routing.bank import bank_fingerprint
from memroute.routing.calibration import Calibration
from memroute.routing.policy import PolicyParams
from memroute.types import Agent

_log = logging.getLogger(__name__)

FORMAT = "memroute.routing-fit"
VERSION = 1


def catalogue_hash(agents: Sequence[Agent]) -> str:
    """A hash of the catalogue's agents (ids and content), order-independent."""
    parts = sorted(f"{a.id}\t{agent_version(a)}" for a in agents)
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16]


def router_bank(router: Any) -> str:
    """:func:`~memroute.routing.bank.bank_fingerprint` of the request bank ``router`` reads (``off`` for none)."""
    vectors = getattr(getattr(router, "cache", None), "bank", None)
    return bank_fingerprint(getattr(vectors, "bank", None))


def encoder_name(embedder: Any) -> str:
    return str(getattr(embedder, "model_id", None) or ("none" if embedder is None else type(embedder).__name__))


@dataclass(frozen=True, slots=True)
class FittedRouting:
    """What ``memroute fit --dialogues`` learned (see the module docstring)."""

    agents: tuple[str, ...]
    """The catalogue's agent ids when it was fitted."""
    catalogue: str
    """:func:`catalogue_hash` of that catalogue."""
    encoder: str
    examples: Mapping[str, tuple[str, ...]]
    policy: PolicyParams
    calibration: Calibration
    how: Mapping[str, Any] = field(default_factory=dict)
    """How it was fitted: dialogues and turns used, folds, what was fitted and what kept its default, seconds."""

    # ------------------------------------------------------------------------------------ applying
    def uncovered(self, agents: Sequence[Agent]) -> list[str]:
        """Agents of ``agents`` that would have no examples (neither their own nor fitted) under this fit, when
        the fit has examples: they would compete with example-scored agents on descriptions alone, which
        loses (SGD's train fit on its dev catalogue, 8 of 17 services unseen: all 0.896 zero-shot -> 0.750)."""
        if not self.examples:
            return []
        return [a.id for a in agents if not a.examples and not self.examples.get(a.id)]

    def usable(self, agents: Sequence[Agent]) -> bool:
        """Whether the fit applies to ``agents``: every agent is covered (see :meth:`uncovered`). Otherwise the
        router stays zero-shot and says why in the log; refit with dialogues that include the new agents."""
        missing = self.uncovered(agents)
        if missing:
            _log.warning("routing fit not used: %d agent(s) of the catalogue have no examples in it (%s); routing "
                         "stays zero-shot. Refit with `memroute fit --dialogues` on conversations that include "
                         "them", len(missing), ", ".join(missing[:5]))
        return not missing

    def apply(self, agents: Sequence[Agent]) -> tuple[Agent, ...]:
        """The catalogue with the fitted examples added to the agents they belong to (by id)."""
        out = []
        for agent in agents:
            extra = self.examples.get(agent.id, ())
            if extra:
                have = set(agent.examples)
                agent = replace(agent, examples=(*agent.examples, *(t for t in extra if t not in have)))
            out.append(agent)
        return tuple(out)

    def check(self, router: Any) -> None:
        """Whether ``router`` can use the fit: an :class:`InputError` under another encoder (:meth:`check_encoder`);
        a warning beside another request bank than the one it was fitted with (``how["bank"]``,
        :func:`memroute.routing.bank.bank_fingerprint`; a fit written before that was recorded is not checked): its
        rule and thresholds were tuned on that bank's scores for Japanese and Korean messages."""
        self.check_encoder(router.embedder)
        made = self.how.get("bank")
        now = router_bank(router)
        if made is not None and made != now:
            _log.warning("the routing fit was made with request bank %r but the router reads %r (the routing_bank "
                         "setting): its rule was tuned on the other bank's scores for Japanese and Korean messages; "
                         "refit with `memroute fit --dialogues` under this setting", made, now)

    def check_encoder(self, embedder: Any) -> None:
        name = encoder_name(embedder)
        if name != self.encoder:
            raise InputError(f"the routing fit was made with encoder {self.encoder!r} but the router uses {name!r}: "
                             "refit with `memroute fit --dialogues ...` under this encoder, or set the embedder "
                             "the fit was made with")

    def summary(self, agents: Sequence[Agent]) -> dict[str, Any]:
        """The fit as seen by a catalogue: which of its agents got examples, whether it is the fitted one."""
        ids = {a.id for a in agents}
        missing = self.uncovered(agents)
        return {"catalogue_matches": catalogue_hash(agents) == self.catalogue, "applied": not missing,
                "agents_without_examples": missing[:20],
                "agents_with_examples": sum(1 for a in ids if self.examples.get(a)),
                "agents": len(ids), "examples": sum(len(v) for k, v in self.examples.items() if k in ids),
                "fitted_agents_not_in_catalogue": sorted(set(self.examples) - ids)[:20],
                "policy": {f.name: getattr(self.policy, f.name) for f in dataclasses.fields(PolicyParams)},
                "how": dict(self.how)}

    # ------------------------------------------------------------------------------------ the file
    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "encoder": self.encoder,
                "catalogue": {"hash": self.catalogue, "agents": list(self.agents)},
                "examples": {k: list(v) for k, v in sorted(self.examples.items())},
                "policy": {f.name: getattr(self.policy, f.name) for f in dataclasses.fields(PolicyParams)},
                "calibration": self.calibration.as_dict(), "fitted": dict(self.how)}

    @classmethod
    def from_dict(cls, data: Any, source: str = "the routing fit") -> FittedRouting:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InputError(f"{source} is not a routing fit (no \"format\": \"{FORMAT}\"); write one with "
                             "`memroute fit --dialogues FILE --candidates FILE --out FILE`")
        if data.get("version") != VERSION:
            raise InputError(f"{source} is routing-fit version {data.get('version')!r}; this memroute reads "
                             f"version {VERSION}: refit with `memroute fit --dialogues`")
        try:
            known = {f.name for f in dataclasses.fields(PolicyParams)}
            stored = dict(data.get("policy") or {})
            stored.setdefault("ja_ko_bias", 0.0)  # a fit written before that term was fitted and tuned without it
            policy = PolicyParams(**{k: v for k, v in stored.items() if k in known})
            examples = {str(k): tuple(str(t) for t in v) for k, v in dict(data.get("examples") or {}).items()}
            cat = dict(data["catalogue"])
            return cls(tuple(str(a) for a in cat.get("agents") or ()), str(cat.get("hash", "")),
                       str(data["encoder"]), examples, policy, Calibration.from_dict(data.get("calibration") or {}),
                       dict(data.get("fitted") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{source} is damaged ({type(exc).__name__}: {exc}); refit with "
                             "`memroute fit --dialogues`") from None

    def save(self, path: str | Path) -> None:
        with atomic_writer(path) as fh:
            fh.write(json.dumps(self.as_dict(), ensure_ascii=False, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> FittedRouting:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"routing fit {path} does not exist; write one with `memroute fit --dialogues`") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"routing fit {path} is not JSON (line {exc.lineno}, column {exc.colno})") from None
        return cls.from_dict(data, f"routing fit {path}")


def fit_path_for(catalogue: str | Path) -> Path:
    """Where the fit of a catalogue file lives by default: ``agents.toml`` -> ``agents.fit.json``."""
    path = Path(catalogue)
    return path.with_name(f"{path.stem}.fit.json")


def load_fit(path: str | Path | None = None, catalogue: str | Path | None = None) -> FittedRouting | None:
    """The fit at ``path`` (it must exist), else the one next to ``catalogue`` if there is one, else ``None``."""
    if path:
        return FittedRouting.load(path)
    if catalogue:
        beside = fit_path_for(catalogue)
        if beside.is_file():
            return FittedRouting.load(beside)
    return None


@contextmanager
def atomic_writer(path: str | Path) -> Iterator[IO[str]]:
    """A text file that appears at ``path`` complete or not at all: written beside it, renamed when closed
    without an error (an interrupted write leaves the old file, if any, untouched)."""
    target = Path(path)
    if target.is_dir():
        raise InputError(f"{target} is a directory: give a file name to write")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or Path("."))
    except FileNotFoundError:
        raise InputError(f"cannot write {target}: the folder {target.parent} does not exist") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yield fh
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
