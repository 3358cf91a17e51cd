"""The bank of example requests (memroute.routing.bank): the file, the setting, and what it adds to routing."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from memroute.config import Settings
from memroute.embed import LanguageAwareEmbedder
from memroute.errors import ConfigError, InputError
from memroute.routing import AgentRouter
from memroute.routing.bank import (
    LANGUAGES,
    BankVectors,
    RequestBank,
    ShippedVectors,
    bank_from_setting,
    builtin_bank,
    capability_key,
    load_bank,
    match_bank,
    parse_bank,
    shipped_vectors,
)
from memroute.routing.strategies import BM25Strategy, EmbeddingStrategy, MentionStrategy
from memroute.types import Agent
from tests.recording import Recording

# Catalogues and messages written for these tests (none is in the bank or in an evaluation set).
KO_AGENTS = (
    Agent("music", "music", "음악 재생과 플레이리스트 관리"),
    Agent("calendar", "calendar", "일정 등록과 회의 조율"),
    Agent("taxi", "taxi", "택시 호출 서비스"),
    Agent("translate", "translate", "다국어 번역"),
)
JA_AGENTS = (
    Agent("gourmet", "gourmet", "飲食店の検索と予約"),
    Agent("weather", "weather", "天気予報の案内"),
    Agent("translate", "translate", "多言語翻訳サービス"),
    Agent("smart_home", "smart home", "家電の遠隔操作"),
)
UNKNOWN = (
    Agent("k8s", "kubernetes cluster admin", "Kubernetesクラスタのポッド、デプロイ、ノードを管理します"),
    Agent("legal", "legal contract review", "契約書の条項を確認し、法的なリスクを指摘します"),
    Agent("k8s_en", "kubernetes", "Administer Kubernetes clusters: pods, deployments, nodes"),
)


def _router(aware: LanguageAwareEmbedder, by_bank: float | None = None, bank: str = "builtin") -> AgentRouter:
    strategy = EmbeddingStrategy() if by_bank is None else EmbeddingStrategy(by_bank=by_bank)
    return AgentRouter([MentionStrategy(), strategy, BM25Strategy()], embedder=aware, bank=bank)


def test_the_builtin_bank_is_well_formed() -> None:
    bank = builtin_bank()
    assert len(bank) >= 30
    assert len({c.id for c in bank.capabilities}) == len(bank)
    raw = json.loads(resources.files("memroute.routing").joinpath("request_bank.json").read_text(encoding="utf-8"))
    assert "by hand" in raw["about"]
    for cap in raw["capabilities"]:
        assert set(cap["description"]) == set(LANGUAGES) == set(cap["requests"]), cap["id"]
        for lang in LANGUAGES:
            assert len(cap["requests"][lang]) >= 5, (cap["id"], lang)
            assert len(set(cap["requests"][lang])) == len(cap["requests"][lang]), (cap["id"], lang)
    ja = [t for cap in raw["capabilities"] for t in cap["requests"]["ja"]]
    ko = [t for cap in raw["capabilities"] for t in cap["requests"]["ko"]]
    assert all(any("\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff" for ch in t) for t in ja)
    assert all(any("\uac00" <= ch <= "\ud7a3" for ch in t) for t in ko)


def test_a_malformed_bank_is_a_clear_error(tmp_path: Path) -> None:
    good = {"id": "x", "description": {lang: "d" for lang in LANGUAGES},
            "requests": {lang: ["r"] for lang in LANGUAGES}}
    with pytest.raises(InputError, match=r"requests\.ko"):
        parse_bank({"capabilities": [{**good, "requests": {"en": ["r"], "ja": ["r"]}}]})
    with pytest.raises(InputError, match="id used twice"):
        parse_bank({"capabilities": [good, good]})
    with pytest.raises(InputError, match="capabilities"):
        parse_bank([good])
    broken = tmp_path / "bank.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        load_bank(broken)
    with pytest.raises(InputError, match="cannot read"):
        load_bank(tmp_path / "missing.json")


def test_the_setting_turns_the_bank_off_extends_or_replaces_it(tmp_path: Path) -> None:
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"capabilities": [{
        "id": "cluster_admin", "description": {"en": "Kubernetes cluster administration",
                                               "ja": "Kubernetesクラスタの管理", "ko": "쿠버네티스 클러스터 관리"},
        "requests": {"en": ["Restart the failing pod"], "ja": ["落ちてるポッドを再起動して"],
                     "ko": ["죽은 파드 다시 띄워 줘"]}}]}), encoding="utf-8")
    assert bank_from_setting("off") is None and bank_from_setting("") is None
    assert bank_from_setting("builtin") == builtin_bank()
    extended = bank_from_setting(f"builtin, {mine}")
    assert extended is not None and len(extended) == len(builtin_bank()) + 1
    replaced = bank_from_setting(str(mine))
    assert replaced is not None and [c.id for c in replaced.capabilities] == ["cluster_admin"]
    with pytest.raises(ConfigError, match="cannot be combined"):
        bank_from_setting("off,builtin")
    with pytest.raises(ConfigError, match="more than one source"):
        bank_from_setting(f"{mine},{mine}")
    assert Settings.load(env={}).routing_bank == "builtin"
    assert Settings.load(env={"MEMROUTE_ROUTING_BANK": "off"}).routing_bank == "off"


@pytest.mark.parametrize(("agents", "text", "expected"), [
    (KO_AGENTS, "신나는 거 하나 틀어 봐", "music"),
    (KO_AGENTS, "목요일 오후에 치과 가는 거 넣어 놔", "calendar"),
    (KO_AGENTS, "집까지 차 좀 잡아 줄래?", "taxi"),
    (JA_AGENTS, "焼き鳥が食べたい気分なんだけど", "gourmet"),
    (JA_AGENTS, "明日って傘持ってったほうがいい？", "weather"),
    (JA_AGENTS, "寝る前にリビングの明かりを落としておいて", "smart_home"),
])
def test_the_bank_points_a_request_to_its_agent_without_shared_words(
        aware: LanguageAwareEmbedder, agents: tuple[Agent, ...], text: str, expected: str) -> None:
    """What the bank adds to a Japanese or Korean message's scores points to the right agent, although the
    message shares no word with that agent's description; it is centred over the matched agents."""
    with_bank, without = _router(aware), _router(aware, by_bank=0.0)
    assert EmbeddingStrategy().by_bank > 0  # on by default
    added = (with_bank.score(text, with_bank.index(agents)).parts["embedding"]
             - without.score(text, without.index(agents)).parts["embedding"])
    assert agents[int(np.argmax(added))].id == expected, (text, added)
    assert float(added.max()) > 0.01 and float(added.min()) <= 0  # (a score below 0 is clipped to 0)


def test_agents_the_bank_lacks_are_routed_as_without_it(aware: LanguageAwareEmbedder) -> None:
    on, off = _router(aware), _router(aware, bank="off")
    index = on.index(UNKNOWN)
    texts = ("本番のポッドが落ちたので見てほしい", "この契約書の損害賠償の条項、問題ない？",
             "노드 하나가 응답이 없어요")
    for text in texts:
        assert np.array_equal(on.score(text, index).total, off.score(text, off.index(UNKNOWN)).total), text
    assert index.bank_match() is None
    # In a catalogue where some agents match, those that match nothing get nothing from the bank.
    mixed = (*JA_AGENTS, *UNKNOWN)
    zero = _router(aware, by_bank=0.0)
    for text in ("明日って傘持ってったほうがいい？", "この契約書の損害賠償の条項、問題ない？"):
        added = (on.score(text, on.index(mixed)).parts["embedding"]
                 - zero.score(text, zero.index(mixed)).parts["embedding"])
        assert np.all(added[len(JA_AGENTS):] == 0), added
        assert np.any(added[:len(JA_AGENTS)] != 0)


def test_english_messages_and_the_off_switches_leave_scores_unchanged(aware: LanguageAwareEmbedder) -> None:
    on, strategy_off, router_off = _router(aware), _router(aware, by_bank=0.0), _router(aware, bank="off")
    for text in ("Play some relaxing songs", "Will it rain tomorrow?", "Book a taxi to the station"):
        base = router_off.score(text, router_off.index(KO_AGENTS)).total
        assert np.array_equal(on.score(text, on.index(KO_AGENTS)).total, base)
        assert np.array_equal(strategy_off.score(text, strategy_off.index(KO_AGENTS)).total, base)
    text = "신나는 거 하나 틀어 봐"
    base = router_off.score(text, router_off.index(KO_AGENTS)).total
    assert np.array_equal(strategy_off.score(text, strategy_off.index(KO_AGENTS)).total, base)
    assert not np.array_equal(on.score(text, on.index(KO_AGENTS)).total, base)


def _own_bank() -> RequestBank:
    """The built-in bank's texts under other capability ids: a user's bank, which no shipped vector covers."""
    raw = json.loads(resources.files("memroute.routing").joinpath("request_bank.json").read_text(encoding="utf-8"))
    for cap in raw["capabilities"]:
        cap["id"] = "own-" + cap["id"]
    return parse_bank(raw, "own bank")


def test_the_bank_is_embedded_once_for_every_catalogue_of_a_router(aware: LanguageAwareEmbedder) -> None:
    """A catalogue described in Japanese or Korean is matched when it is indexed; a later version of it embeds
    nothing of the bank again."""
    seen: list[str] = []
    bank = _own_bank()
    router = AgentRouter(embedder=Recording(aware, seen.extend), bank=bank)
    router.index(KO_AGENTS)
    requests = {t for c in bank.capabilities for t in c.requests}
    first = [t for t in seen if t in requests]
    assert set(first) == requests and len(first) == len(set(first))  # every request, once
    seen.clear()
    index = router.index((*KO_AGENTS[:3], Agent("translate", "translate", "여러 언어로 번역해 드립니다")))
    assert not set(seen) & ({d for c in bank.capabilities for d in c.descriptions} | set(first))
    # explain names the capabilities an agent matched
    prepared = router.prepare("신나는 거 하나 틀어 봐")
    assert "own-music" in EmbeddingStrategy().explain(prepared, index, 0)["bank_capabilities"]


def test_the_shipped_vectors_are_those_of_the_current_encoder_and_bank(aware: LanguageAwareEmbedder) -> None:
    """Every built-in capability has shipped vectors for the packaged routing encoder, and a sample of them,
    recomputed now, matches (float16 rounding apart): an edited bank or a changed encoder fails here until
    ``python -m benchmarks.bank_vectors`` is run again."""
    shipped = shipped_vectors()
    assert shipped is not None and shipped.for_encoder(aware) is shipped
    bank = builtin_bank()
    keys = [capability_key(c) for c in bank.capabilities]
    assert set(keys) == set(shipped.descriptions) == set(shipped.requests)
    for cap in bank.capabilities[::9]:  # five capabilities, each with its texts in all three languages
        key = capability_key(cap)
        desc = aware.embed(list(cap.descriptions), side="passage")
        reqs = aware.embed(list(cap.requests), side="query")
        assert shipped.requests[key].shape == reqs.shape
        assert np.abs(shipped.descriptions[key] - desc).max() < 2e-3, cap.id
        assert np.abs(shipped.requests[key] - reqs).max() < 2e-3, cap.id
        # what routing reads from them: the cosines, to within float16 rounding
        assert np.abs(shipped.requests[key] @ reqs.T - reqs @ reqs.T).max() < 2e-3, cap.id


def test_the_builtin_bank_embeds_nothing_and_scores_as_if_embedded(aware: LanguageAwareEmbedder) -> None:
    """With the packaged encoder a catalogue is matched to the built-in bank from the shipped vectors (none of
    the bank's texts is embedded) and a message's bank scores equal those from vectors embedded at run time; a
    capability of a user's bank, or any under another encoder, is embedded."""
    seen: list[str] = []
    recording = Recording(aware, seen.extend)
    bank = builtin_bank()
    texts = {t for c in bank.capabilities for t in (*c.descriptions, *c.requests)}
    shipped_match = BankVectors(bank, recording)
    embedded_match = BankVectors(bank, recording, shipped=None)
    index = AgentRouter(embedder=aware, bank="off").index(KO_AGENTS)
    agent_vectors = index.piece_matrix[index.piece_starts]
    a = match_bank(shipped_match, agent_vectors)
    assert a is not None and not set(seen) & texts
    b = match_bank(embedded_match, agent_vectors)
    assert b is not None and set(seen) & texts
    assert a.capabilities == b.capabilities and np.allclose(a.weights, b.weights, atol=2e-2)
    for text in ("신나는 거 하나 틀어 봐", "집까지 차 좀 잡아 줄래?"):
        vector = aware.embed([text], side="query")[0]
        assert np.abs(a.scores(vector) - b.scores(vector)).max() < 2e-3, text
    # another encoder: the shipped vectors are not used
    other = ShippedVectors("another-encoder", aware.dimension, {}, {})
    assert other.for_encoder(aware) is None
    seen.clear()
    BankVectors(bank, recording, shipped=other).descriptions()
    assert set(seen) == {d for c in bank.capabilities for d in c.descriptions}


def test_a_request_for_a_capability_no_agent_has_gets_little_from_the_bank(aware: LanguageAwareEmbedder) -> None:
    """Each capability's share of a message is taken among all the bank's capabilities: a weather question put to
    a catalogue without a weather agent moves the scores much less than a request the catalogue can serve."""
    with_bank, without = _router(aware), _router(aware, by_bank=0.0)

    def added(text: str) -> np.ndarray:
        return np.asarray(with_bank.score(text, with_bank.index(KO_AGENTS)).parts["embedding"]
                          - without.score(text, without.index(KO_AGENTS)).parts["embedding"])

    served, unserved = added("신나는 거 하나 틀어 봐"), added("내일 우산 챙겨야 할까?")
    assert np.ptp(unserved) < 0.2 * np.ptp(served), (served, unserved)  # (0.43 when shares were taken among
    # the matched capabilities only, the form before the thirteenth pass; 0.01 now)
