"""The hand-written Japanese and Korean routing sets shipped in ``memroute/eval/data/routing``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from benchmarks import build_routing_sets

import memroute
from memroute.eval.datasets import Dialogue, load_candidates, load_dialogues
from memroute.text import detect_language
from memroute.types import Agent

ROOT = Path(memroute.__file__).parent / "eval" / "data" / "routing"
LANGUAGES = ("ko", "ja")
SPLITS = ("dev", "test")
ALL_SPLITS = (*SPLITS, "train")  # train: its own catalogue, train_services.jsonl


def records(lang: str, split: str) -> list[dict[str, Any]]:
    text = (ROOT / lang / f"{split}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def by_dialogue(recs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for rec in recs:
        out.setdefault(rec["dialogue_id"], []).append(rec)
    return out


def test_shipped_files_are_built_from_the_sources() -> None:
    assert build_routing_sets.main(["--check"]) == 0


def catalogue(lang: str, name: str) -> list[Agent]:
    """A set's agents: unique ids, the same ones in both languages, described in the set's language."""
    agents = load_candidates(ROOT / lang / name)
    ids = {a.id for a in agents}
    assert len(ids) == len(agents)
    assert ids == {a.id for a in load_candidates(ROOT / "ko" / name)}  # same agents in both languages
    for agent in agents:
        assert detect_language(agent.description) == lang, agent.id
    return agents


def dialogues_of(path: Path, ids: set[str], user_turns: range) -> list[Dialogue]:
    """A split's dialogues: at least 60, ``user_turns`` user turns each, one gold agent a turn from ``ids``, and
    every agent the gold agent of some turn."""
    dialogues = load_dialogues(path)
    assert len(dialogues) >= 60
    for dialogue in dialogues:
        assert len(dialogue.turns) in user_turns, dialogue.dialogue_id
        for turn in dialogue.turns:
            assert len(turn.gold) == 1 and turn.gold[0] in ids, (dialogue.dialogue_id, turn.gold)
    assert {t.gold[0] for d in dialogues for t in d.turns} == ids
    return dialogues


@pytest.mark.parametrize("lang", LANGUAGES)
def test_candidates_and_gold_labels(lang: str) -> None:
    agents = catalogue(lang, "services.jsonl")
    ids = {a.id for a in agents}
    assert len(ids) >= 8
    for agent in agents:
        assert agent.tools and agent.metadata["capabilities"]
    for split in SPLITS:
        for dialogue in dialogues_of(ROOT / lang / f"{split}.jsonl", ids, range(3, 9)):
            assert dialogue.turns[0].system_before is None
            assert all(t.system_before for t in dialogue.turns[1:]), dialogue.dialogue_id


@pytest.mark.parametrize("lang", LANGUAGES)
def test_train_set_on_its_own_catalogue(lang: str) -> None:
    """The train set routes among ten agents of its own, at most four of them sharing a capability (an id)
    with the dev / test catalogue, the same agents in both languages; 4-9 user turns a dialogue."""
    ids = {a.id for a in catalogue(lang, "train_services.jsonl")}
    assert len(ids) == 10
    assert len(ids & {a.id for a in load_candidates(ROOT / lang / "services.jsonl")}) <= 4
    dialogues = dialogues_of(ROOT / lang / "train.jsonl", ids, range(4, 10))
    assert all(d.dialogue_id.startswith(f"{lang}-train-") for d in dialogues)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_splits_are_disjoint_and_follow_the_md5_rule(lang: str) -> None:
    dev = by_dialogue(records(lang, "dev"))
    test = by_dialogue(records(lang, "test"))
    assert not set(dev) & set(test)
    assert all(build_routing_sets.is_dev(d) for d in dev)
    assert not any(build_routing_sets.is_dev(d) for d in test)
    assert all(d.startswith(f"{lang}-") for d in [*dev, *test])
    other = "ja" if lang == "ko" else "ko"  # a scenario written in both languages is in the same split of both
    other_test = {d.partition("-")[2] for d in by_dialogue(records(other, "test"))}
    assert not {d.partition("-")[2] for d in dev} & other_test


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("split", ALL_SPLITS)
def test_histories_carry_every_earlier_turn(lang: str, split: str) -> None:
    for did, recs in by_dialogue(records(lang, split)).items():
        assert [r["user_turn_idx"] for r in recs] == list(range(len(recs))), did
        assert [r["turn_idx"] for r in recs] == [2 * i for i in range(len(recs))], did
        history: list[dict[str, str]] = []
        for prev, rec in zip([None, *recs], recs, strict=False):
            if prev is not None:
                assert rec["history"][: len(history)] == history, did
                assert rec["history"][len(history)] == {"speaker": "USER", "utterance": prev["utterance"]}, did
                assert rec["history"][len(history) + 1]["speaker"] == "SYSTEM", did
                history = rec["history"]
            assert len(rec["history"]) == 2 * rec["user_turn_idx"], did
            assert rec["utterance"].strip(), did


@pytest.mark.parametrize("lang", LANGUAGES)
def test_text_is_in_the_language_of_the_set(lang: str) -> None:
    """Every dialogue and nearly every turn is in the set's language; a few code-switching turns (a quoted
    Japanese sentence in a Korean request, an English identifier) may be detected as another language."""
    turns = 0
    off: list[str] = []
    for split in ALL_SPLITS:
        for did, recs in by_dialogue(records(lang, split)).items():
            texts = [r["utterance"] for r in recs] + [h["utterance"] for h in recs[-1]["history"]]
            assert detect_language(" ".join(texts)) == lang, did
            for rec in recs:
                turns += 1
                if detect_language(rec["utterance"]) != lang:
                    off.append(rec["utterance"])
    assert len(off) <= 0.03 * turns, off


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("split", ALL_SPLITS)
def test_switch_share(lang: str, split: str) -> None:
    """Between a quarter and two fifths of user turns hand over to another agent; every dialogue but a few
    has at least one such switch, and some switch more than once or come back to an earlier agent."""
    turns = switches = returns = 0
    without = 0
    for recs in by_dialogue(records(lang, split)).values():
        labels = [r["gold_services"][0] for r in recs]
        turns += len(labels)
        changed = [i for i in range(1, len(labels)) if labels[i] != labels[i - 1]]
        switches += len(changed)
        without += not changed
        returns += sum(labels[i] in labels[: i - 1] for i in changed)
    assert 0.25 <= switches / turns <= 0.40, switches / turns
    assert without <= 0.25 * len(by_dialogue(records(lang, split)))
    assert returns >= 10
