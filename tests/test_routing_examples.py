"""Agents with example utterances: the example classifier, its hook into the router, mention of label-like
names, and thresholds fitted for a required out-of-scope recall."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memroute.cli import main
from memroute.embed import CachedEmbedder
from memroute.errors import InputError
from memroute.routing import AgentRouter, LabelledExample, fit
from memroute.routing.calibration import ConfidenceFeatures, FitExample, fit_calibration
from memroute.routing.examples import F32, ExampleClassifier, example_grid, fit_classifier, top_mean
from memroute.routing.strategies import _top_mean
from memroute.types import Agent

EXAMPLE_AGENTS = (
    Agent("translate", "Translator", "Translates text between languages", examples=(
        "How do I say thank you in French?", "translate 'good morning' into Spanish", "この文を英語に訳して",
        "what is the German word for apple", "이 문장을 일본어로 번역해 줘", "how would an Italian say cheers")),
    Agent("weather", "Weather", "Current weather and forecasts for any city", examples=(
        "Will it rain in Osaka tomorrow?", "내일 서울 날씨 어때?", "how hot will it be this weekend",
        "明日の東京の天気は？", "do I need an umbrella today", "is it going to snow in Denver")),
    Agent("pay_bill", "pay_bill", "Pays utility and phone bills", examples=(
        "I need to settle my electricity invoice", "pay the water company", "電気代を払いたい",
        "take care of my phone payment", "휴대폰 요금 납부해 줘", "send the gas company what I owe")),
)
PLAIN = Agent("vision", "Image describer", "Describes and captions photos and pictures",
              input_types=("text", "image"))


@pytest.fixture(scope="module")
def router(embedder: CachedEmbedder) -> AgentRouter:
    return AgentRouter(embedder=embedder)


def _blobs(rng: np.random.Generator, sign: float, n: int) -> F32:
    """Unit vectors whose first coordinate carries the class (+/-0.3) and whose other 15 are large noise."""
    x = np.c_[np.full(n, 0.3 * sign), rng.normal(size=(n, 15))]
    out: F32 = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    return out


def test_classifier_learns_the_direction_that_nearest_neighbours_miss() -> None:
    rng = np.random.default_rng(7)
    a, b = _blobs(rng, 1.0, 40), _blobs(rng, -1.0, 40)
    model = fit_classifier(np.vstack([a, b]), np.repeat(np.array([0, 1], np.int32), 40))
    assert model is not None and model.agents.tolist() == [0, 1]
    test_a, test_b = _blobs(rng, 1.0, 200), _blobs(rng, -1.0, 200)
    right = sum(model.probabilities(v)[0] > 0.5 for v in test_a) + sum(model.probabilities(v)[1] > 0.5
                                                                      for v in test_b)
    train = np.vstack([a, b])
    nearest = sum(int(np.argmax(train @ v)) < 40 for v in test_a) + sum(int(np.argmax(train @ v)) >= 40
                                                                       for v in test_b)
    assert right / 400 > 0.9 and right > nearest + 60  # noise dominates cosine; the regression ignores it
    again = fit_classifier(np.vstack([a, b]), np.repeat(np.array([0, 1], np.int32), 40))
    assert again is not None and np.array_equal(again.weights, model.weights)  # deterministic


def test_classifier_is_skipped_when_it_cannot_help() -> None:
    rng = np.random.default_rng(0)
    few = _blobs(rng, 1.0, 4)
    assert fit_classifier(few, np.array([0, 0, 1, 1], np.int32)) is None  # two examples per agent
    assert fit_classifier(_blobs(rng, 1.0, 20), np.zeros(20, np.int32)) is None  # a single agent
    assert fit_classifier(np.zeros((0, 16), np.float32), np.zeros(0, np.int32)) is None


def test_scores_are_scaled_by_how_close_the_message_is_to_any_example() -> None:
    model = ExampleClassifier(np.array([0, 2], np.int32), np.eye(2, dtype=np.float32) * 10,
                              np.zeros(2, np.float32))
    similarity = np.array([0.2, 0.5, 0.1], np.float32)  # agent 1 has no examples: untouched
    out = model.scores(np.array([1.0, 0.0], np.float32), similarity)
    p = model.probabilities(np.array([1.0, 0.0], np.float32))
    assert out[1] == np.float32(0.5)
    assert out[0] == pytest.approx(0.5 * (0.2 + p[0] * 0.2)) and out[0] < 0.5


def test_router_fits_the_classifier_only_for_catalogues_with_examples(router: AgentRouter) -> None:
    assert router.index(EXAMPLE_AGENTS).example_classifier is not None
    assert router.index((PLAIN, Agent("cook", "Cook", "Recipes"))).example_classifier is None
    one_each = tuple(Agent(a.id, a.name, a.description, examples=a.examples[:1]) for a in EXAMPLE_AGENTS)
    assert router.index(one_each).example_classifier is None


def test_agents_without_examples_score_as_before(router: AgentRouter) -> None:
    plain = (PLAIN, Agent("cook", "Cook", "Recipes and cooking tips"))
    alone = router.score("describe what is in this picture", plain)
    mixed = router.score("describe what is in this picture", (*plain, *EXAMPLE_AGENTS))
    assert mixed.index.example_classifier is not None
    for name in ("embedding", "mention", "keywords", "tools", "file_type"):
        # Equal up to float32 rounding of a larger matrix product (BLAS blocks it differently).
        assert np.allclose(alone.parts[name], mixed.parts[name][:2], atol=1e-6, rtol=0), name
    out = router.route("describe what is in this picture", (*plain, *EXAMPLE_AGENTS))
    assert out.agent is not None and out.agent.id == "vision"  # a sure softmax elsewhere does not win


@pytest.mark.parametrize(("text", "expected"), [
    ("how do you say 'see you later' in Korean", "translate"),
    ("週末は雨が降りますか", "weather"),
    ("인터넷 요금 좀 내 줘", "pay_bill"),
    ("I want to pay what I owe the power company", "pay_bill"),
])
def test_routes_with_examples_in_three_languages(router: AgentRouter, text: str, expected: str) -> None:
    out = router.route(text, EXAMPLE_AGENTS, include_scores=True)
    assert out.agent is not None and out.agent.id == expected
    details = next(s.details for s in out.scores[0].strategies if s.name == "embedding")
    assert 0.0 < details["example_probability"] <= 1.0


def test_a_label_name_in_running_text_is_no_mention_for_agents_with_examples(router: AgentRouter) -> None:
    # "pay bill" appears verbatim in running text: not a mention of an agent that has examples.
    scored = router.score("translate 'pay bill' into French", EXAMPLE_AGENTS)
    pay = scored.index.position["pay_bill"]
    assert scored.parts["mention"][pay] == 0.0
    for explicit in ("@pay_bill translate this", "pay_bill"):  # @name and the whole message keep full weight
        scored = router.score(explicit, EXAMPLE_AGENTS)
        assert scored.parts["mention"][pay] == 1.0
    out = router.route("@pay_bill translate this", EXAMPLE_AGENTS)
    assert out.agent is not None and out.agent.id == "pay_bill"
    no_examples = tuple(Agent(a.id, a.name, a.description) for a in EXAMPLE_AGENTS)
    scored = router.score("translate 'pay bill' into French", no_examples)
    assert scored.parts["mention"][scored.index.position["pay_bill"]] == 1.0  # unchanged without examples


def _outcomes(in_conf: list[float], oos_conf: list[float]) -> list[FitExample]:
    out = [FitExample(ConfidenceFeatures(c, c, 0.1), "a", True, True) for c in in_conf]
    return out + [FitExample(ConfidenceFeatures(c, c, 0.1), "a", False, False) for c in oos_conf]


def test_fit_for_a_required_out_of_scope_recall() -> None:
    rng = np.random.default_rng(3)
    examples = _outcomes(list(rng.uniform(0.4, 1.0, 200)), list(rng.uniform(0.0, 0.6, 40)))
    for target in (0.5, 0.8, 1.0):
        report = fit_calibration(examples, min_oos_recall=target)
        assert report.out_of_scope_recall >= target and not report.calibration.agent_thresholds
        looser = fit_calibration(examples, min_oos_recall=max(target - 0.3, 0.0))
        assert looser.in_scope_accuracy >= report.in_scope_accuracy
    with pytest.raises(InputError, match="min_oos_recall"):
        fit_calibration(examples, min_oos_recall=1.5)


def test_fit_on_a_catalogue_with_examples_keeps_the_required_recall(router: AgentRouter) -> None:
    labelled = [LabelledExample(t, a.id) for a in EXAMPLE_AGENTS for t in a.examples]
    oos = ["who won the football match", "book me a haircut", "what is the capital of Peru", "tell me a joke",
           "play some jazz music", "order a pizza", "how tall is Everest", "recommend a novel"]
    labelled += [LabelledExample(t, None) for t in oos]
    report = fit(router, EXAMPLE_AGENTS, labelled, folds=3, min_oos_recall=0.75)
    assert report.out_of_scope_recall >= 0.75 and report.examples == len(labelled)
    with pytest.raises(InputError, match="min_oos_recall"):
        fit(router, EXAMPLE_AGENTS, labelled, min_oos_recall=-0.1)


def test_top_mean_over_the_grid_matches_the_sorting_reference() -> None:
    rng = np.random.default_rng(5)
    counts = np.array([1, 2, 3, 7, 4, 1, 5])
    owner = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]).astype(np.int32)
    grid = example_grid(starts, len(owner))
    assert grid is not None
    for k in (1, 3, 10):
        sims = rng.uniform(-1, 1, len(owner)).astype(np.float32)
        assert np.allclose(top_mean(sims, grid, k), _top_mean(sims, owner, starts, k), atol=1e-6)
    lopsided = np.r_[np.zeros(5000, np.int32), np.arange(1, 2001, dtype=np.int32)]
    starts = np.flatnonzero(np.r_[True, lopsided[1:] != lopsided[:-1]]).astype(np.int32)
    assert example_grid(starts, len(lopsided)) is None  # padding 2,001 rows to 5,000 would cost more


def test_cli_fit_and_eval_intents_take_a_required_recall(capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path) -> None:
    catalogue = tmp_path / "agents.json"
    catalogue.write_text(json.dumps({"agents": [{"id": a.id, "name": a.name, "description": a.description,
                                                 "examples": list(a.examples)} for a in EXAMPLE_AGENTS]}),
                         encoding="utf-8")
    rows = [(t, a.id) for a in EXAMPLE_AGENTS for t in a.examples]
    rows += [(t, "oos") for t in ("who won the football match", "book me a haircut", "tell me a joke",
                                  "what is the capital of Peru", "order a pizza", "recommend a novel")]
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("\n".join(json.dumps({"text": t, "label": label}) for t, label in rows), encoding="utf-8")
    out_file = tmp_path / "thresholds.json"
    assert main(["fit", "--agents", str(catalogue), "--examples", str(labelled), "--out", str(out_file),
                 "--min-oos-recall", "0.8", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["out_of_scope_recall"] >= 0.8 and report["calibration"]["agent_thresholds"] == {}
    assert main(["fit", "--agents", str(catalogue), "--examples", str(labelled), "--out", str(out_file),
                 "--min-oos-recall", "2"]) == 1
    assert "min_oos_recall" in capsys.readouterr().err
    assert main(["eval", "intents", "--train", str(labelled), "--holdout", "0.3", "--min-oos-recall", "0.5",
                 "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)) >= {"accuracy", "in_scope_accuracy", "oos_recall"}
