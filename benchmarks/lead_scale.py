"""How far a catalogue's right agent leads its nearest rival: label-free measures against switch-turn leads.

The eighteenth pass (docs/benchmarks.md, routing) found that a gold switch's lead over the current agent, in
``catalogue_scale`` units, depends on the catalogue (10-11 on the ja/ko train catalogue, 7-8 on dev's): the unit
says how widely a catalogue's scores spread, not how separable its agents are. This measures, per catalogue and
without labels:

* ``bank``: each agent's best-matched request-bank capability (:mod:`memroute.routing.bank`, match weight at least
  ``--min-weight``), its example requests in the set's language routed as first messages against the catalogue
  (the router's full scores, bank and names included); the agent's lead over the best other agent, in the
  conversation router's unit (``floor``), median over requests;
* ``pieces``: each agent's own pieces (``name: description``, intents, ...) scored against the others: the owner's
  best other piece minus the best other agent's piece, median, in ``catalogue_scale`` units;

and, from recordings with labels (train splits; with ``--dev`` dev's too, which reads dev's labels: a diagnostic,
never a choice; the cache of :mod:`benchmarks.fit_ja_ko_rule`), the leads of gold switches (the gold new agent over
the previous turn's agent, its own scores), the right agent's lead over its best rival on every labelled turn, and
the teacher-forced decisions' leads on switches and stays with their AUC.

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.lead_scale [--cache DIR] [--dev]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.tune_ja_ko_rule import ROOT, SETS

DATA = Path(os.environ.get("MEMROUTE_DATA_DIR", ROOT.parent / "shared" / "data"))
JM = DATA / "jmultiwoz_tc_routing"
CATALOGUES = {  # name: (catalogue, language, recording of its labelled train split in the cache)
    "ko_train": (SETS / "ko" / "train_services.jsonl", "ko", "ko_train_all.pkl"),
    "ja_train": (SETS / "ja" / "train_services.jsonl", "ja", "ja_train_all.pkl"),
    "jmultiwoz_tc": (JM / "tools.jsonl", "ja", "jmultiwoz_tc_train_250.pkl"),
}
SGD = {"sgd": (DATA / "sgd_routing" / "services.jsonl", "en", "sgd_train_250.pkl")}  # English: ``--sgd``
DEV = {"ko_dev": (SETS / "ko" / "services.jsonl", "ko", "ko_dev_all.pkl"),
       "ja_dev": (SETS / "ja" / "services.jsonl", "ja", "ja_dev_all.pkl")}


def router(by_bank: float = 0.25) -> Any:
    from memroute.routing.composite import AgentRouter
    from memroute.routing.strategies import EmbeddingStrategy

    r = AgentRouter()
    for strategy in r.strategies:
        if isinstance(strategy, EmbeddingStrategy):
            strategy.by_bank = by_bank
    return r


def bank_requests(index: Any, lang: str, min_weight: float) -> list[tuple[int, str]]:
    """(agent, request) pairs: each agent's best-matched capability's requests in ``lang``."""
    from memroute.routing.bank import builtin_bank
    from memroute.text import detect_language

    match = index.bank_match()
    if match is None:
        return []
    caps = {c.id: c for c in builtin_bank().capabilities}
    out = []
    for a in range(match.weights.shape[0]):
        c = int(np.argmax(match.weights[a]))
        if match.weights[a, c] < min_weight:
            continue
        out += [(a, t) for t in caps[match.capabilities[c]].requests if str(detect_language(t)) == lang]
    return out


def bank_measure(catalogue: Path, lang: str, min_weight: float, by_bank: float = 0.25) -> dict[str, float]:
    from memroute.eval.datasets import load_candidates
    from memroute.routing import training

    agents = load_candidates(catalogue, "train")
    r = router(by_bank)
    index = r.index(agents)
    pairs = bank_requests(index, lang, min_weight)
    dialogues = [training._Dialogue(f"b{i}", (training._Turn(t, None, frozenset({agents[a].id}), False),))
                 for i, (a, t) in enumerate(pairs)]
    obs, floor = training._record(r, agents, dialogues, lambda items: items)
    leads = []
    for (a, _), d in zip(pairs, obs, strict=True):
        s = d[0].scores
        assert s is not None  # a request is always routed
        leads.append(float(s[a] - np.delete(s, a).max()) / floor)
    return {"bank": float(np.median(leads)), "bank_q25": float(np.quantile(leads, 0.25)), "requests": len(leads),
            "agents": len({a for a, _ in pairs}), "of": len(agents), "floor": floor,
            "pieces": pieces_measure(index)}


def pieces_measure(index: Any) -> float:
    from memroute.routing.policy import catalogue_scale

    m, owner, starts = index.piece_matrix, index.piece_owner, index.piece_starts
    sims = m @ m.T
    np.fill_diagonal(sims, -np.inf)
    per_agent = np.maximum.reduceat(sims, starts, axis=1)  # (pieces, agents)
    block_agent = owner[starts]
    leads = []
    for r, o in enumerate(owner):
        own = per_agent[r][block_agent == o]
        if not np.isfinite(own).all():
            continue  # an agent with one piece: no other piece of its own
        leads.append(float(own.max() - per_agent[r][block_agent != o].max()))
    return float(np.median(leads)) / catalogue_scale(m, owner, starts) if leads else float("nan")


def switch_leads(rec: dict[str, Any], ja_ko: bool = True) -> dict[str, float]:
    """Gold switches on ja/ko turns (English ones with ``ja_ko`` false): the new agent's lead over the previous
    turn's, and the right agent's lead over its best rival on every labelled turn (floor units)."""
    index, floor = rec["index"], rec["floor"]
    sw, right = [], []
    for dialogue in rec["obs"]:
        prev = None
        for o in dialogue:
            if o.scores is not None and o.gold and o.features.ja_ko == ja_ko:
                g = [index[x] for x in sorted(o.gold)]
                rival = np.delete(o.scores, g).max() if len(g) < len(o.scores) else None
                if rival is not None:
                    right.append(float(max(o.scores[i] for i in g) - rival) / floor)
                if prev and not (prev & o.gold):
                    c = index[sorted(prev)[0]]
                    sw.append(float(max(o.scores[i] for i in g) - o.scores[c]) / floor)
            if o.gold:
                prev = o.gold
    return {"switch_median": float(np.median(sw)), "switches": len(sw), "right_median": float(np.median(right)),
            **(decisions(rec) if ja_ko else {})}


def decisions(rec: dict[str, Any]) -> dict[str, float]:
    """The teacher-forced decisions of :func:`benchmarks.fit_ja_ko_rule.rows` (the best other agent against the
    previous turn's): the lead's median on switches and on stays, and how well the lead alone and today's whole
    rule rank switches above stays (AUC)."""
    from benchmarks.fit_ja_ko_rule import FEATURES, rows
    from memroute.routing.policy import PolicyParams

    p = PolicyParams()
    x, y = rows(rec["obs"], rec["index"], rec["floor"], p)
    w = np.array([getattr(p, name) for name in FEATURES[:-1]] + [p.bias + p.ja_ko_bias])  # today's margin

    def auc(v: np.ndarray) -> float:
        pos, neg = v[y == 1][:, None], v[y == 0][None, :]
        return float(((pos > neg) + 0.5 * (pos == neg)).mean())

    lead = x[:, 0]
    return {"tf_switch_lead": float(np.median(lead[y == 1])), "tf_stay_lead": float(np.median(lead[y == 0])),
            "tf_rows": len(y), "auc_lead": auc(lead), "auc_rule": auc(x @ w)}


def main(argv: list[str] | None = None) -> int:
    import pickle

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/fit_ja_ko_rule"))
    parser.add_argument("--min-weight", type=float, default=0.5)
    parser.add_argument("--by-bank", type=float, default=0.25, help="the bank's weight when scoring the requests")
    parser.add_argument("--sgd", action="store_true", help="also SGD's catalogue, English (records 250 SGD train "
                        "dialogues into the cache the first time, about 3 minutes)")
    parser.add_argument("--dev", action="store_true", help="also dev's catalogue (its switch leads read dev labels)")
    args = parser.parse_args(argv)
    cats = {**CATALOGUES, **(SGD if args.sgd else {}), **(DEV if args.dev else {})}
    for name, (catalogue, lang, rec) in cats.items():
        m = bank_measure(catalogue, lang, args.min_weight, args.by_bank)
        path = args.cache / rec
        if name == "sgd" and not path.exists():
            from benchmarks.tune_ja_ko_rule import record

            path.write_bytes(pickle.dumps(record(DATA / "sgd_routing" / "train.jsonl", catalogue, 0.25, 250)))
        s = switch_leads(pickle.loads(path.read_bytes()), lang != "en") if path.exists() else {}
        print(name, " ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in {**m, **s}.items()),
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
