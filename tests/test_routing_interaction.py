"""The learned message-agent model: its fit on an intent set, its weights file, and how the router reads it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memroute.embed import CachedEmbedder, E5SmallEmbedder, LanguageAwareEmbedder
from memroute.errors import InputError
from memroute.eval.route_interaction_fit import fit, load_intent_set, top1, training_rows, write_weights
from memroute.retrieval.interaction import InteractionModel
from memroute.routing import AgentRouter
from memroute.routing.interaction import agent_centroids, message_interaction
from memroute.routing.strategies import BM25Strategy, EmbeddingStrategy, MentionStrategy
from memroute.types import Agent

# A small intent set written for this test (no evaluation data): two domains, three intents each.
INTENTS = {
    "play_music": ("home", ["play some jazz", "put on my workout playlist", "I want to hear that new song",
                            "start the music again", "play something relaxing"]),
    "set_alarm": ("home", ["wake me up at six", "set an alarm for 7 am", "alarm for tomorrow morning please",
                           "I need an alarm in 20 minutes", "remind me with an alarm at noon"]),
    "shopping_list": ("home", ["add milk to my list", "put eggs on the shopping list", "what is on my grocery list",
                               "remove bread from the list", "I need to buy apples, add them"]),
    "book_flight": ("travel", ["get me a flight to Boston", "I need a plane ticket to Paris on Friday",
                               "book the cheapest flight to Seoul", "fly me to Tokyo next week",
                               "find flights leaving tomorrow"]),
    "translate": ("travel", ["how do you say hello in Spanish", "translate thank you into Japanese",
                             "what is cat in German", "say good night in Korean", "translate this into French"]),
    "weather": ("travel", ["will it rain tomorrow", "how hot is it in Rome", "is it sunny this weekend",
                           "what is the forecast for Osaka", "do I need an umbrella today"]),
}


@pytest.fixture(scope="module")
def intent_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("intents")
    with open(folder / "labels.jsonl", "w", encoding="utf-8") as f:
        for label, (domain, _) in INTENTS.items():
            f.write(json.dumps({"label": label, "domain": domain}) + "\n")
        f.write(json.dumps({"label": "oos", "domain": "oos"}) + "\n")
    with open(folder / "train.jsonl", "w", encoding="utf-8") as f:
        for label, (domain, texts) in INTENTS.items():
            for k, text in enumerate(texts):
                f.write(json.dumps({"id": f"{label}-{k}", "text": text, "label": label, "domain": domain}) + "\n")
        f.write(json.dumps({"id": "oos-0", "text": "what is the meaning of life", "label": "oos"}) + "\n")
    return folder


def test_fit_writes_a_model_that_reads_back_and_fits_its_training_side(intent_folder: Path, tmp_path: Path) -> None:
    data = load_intent_set(intent_folder)
    assert len(data.gold) == 30 and data.intents.shape == (6, 512)  # oos left out
    x, y = training_rows(data)
    assert x.shape[1] == 1 + 2 * 512 and y.sum() == 30
    model = fit(x, y, l2=1.0, fitted_on="test")
    assert top1(data, lambda _: True, model, 1.0) >= top1(data, lambda _: True, None, 0.0)
    out = tmp_path / "weights.json"
    write_weights(model, "use-m3/test", out)
    back = InteractionModel.from_dict(json.loads(out.read_text("utf-8"))["encoders"]["use-m3/test"])
    assert back.dimension == 512 and np.allclose(back.product, model.product, atol=1e-5)
    assert [p.name for p in tmp_path.iterdir()] == ["weights.json"]  # no temporary file left behind
    held = training_rows(data, lambda d: d == "home")[1]
    assert held.sum() == 15  # only the kept domain's messages, negatives from the kept intents


def test_an_intent_set_without_utterances_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "labels.jsonl").write_text('{"label": "a"}\n{"label": "b"}\n', encoding="utf-8")
    (tmp_path / "train.jsonl").write_text('{"id": "1", "text": "hi", "label": "c"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="no utterance"):
        load_intent_set(tmp_path)


def test_the_router_adds_the_centred_logit_to_japanese_and_korean_messages_only(
        embedder: CachedEmbedder, intent_folder: Path) -> None:
    data = load_intent_set(intent_folder)
    model = fit(*training_rows(data), l2=1.0)
    e5 = E5SmallEmbedder()
    aware = LanguageAwareEmbedder(embedder, lambda: e5, e5.model_id, e5.dimension)
    agents = (Agent("music", "music", "음악을 재생합니다"), Agent("weather", "weather", "날씨 예보를 알려 줍니다"),
              Agent("translate", "translate", "문장을 번역합니다"))

    def router(learned: float) -> AgentRouter:
        return AgentRouter([MentionStrategy(), EmbeddingStrategy(learned=learned), BM25Strategy()], embedder=aware)

    on, off = router(0.05), router(0.0)
    for r in (on, off):
        index = r.index(agents)
        index.interaction = model
        index.centroid_matrix = agent_centroids(index.piece_matrix, index.piece_owner, index.n, 512)
    added = on.score("노래 좀 틀어 줘", on.index(agents)).parts["embedding"] \
        - off.score("노래 좀 틀어 줘", off.index(agents)).parts["embedding"]
    assert np.abs(added).max() > 0 and float(added.min()) < 0  # centred over the catalogue
    english = "Play some relaxing songs"
    assert np.array_equal(on.score(english, on.index(agents)).total, off.score(english, off.index(agents)).total)


def test_the_packaged_model_is_found_for_the_default_encoder(embedder: CachedEmbedder) -> None:
    model = message_interaction(embedder.model_id)
    assert model is not None and model.dimension == embedder.dimension and "clinc150" in model.fitted_on
