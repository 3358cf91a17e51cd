"""``memroute bench route``'s per-language rows: the latency of a routed conversation turn in English, Japanese
and Korean, in the default configuration (:class:`ConversationRouter` over a SQLite store, the default
encoder), as a user waits for it. The assistant's reply is logged with ``ConversationRouter.add_reply``,
which encodes it while the user reads it; that cost is reported beside the turn's (``reply_ms``).

The catalogue and the conversations are written for this benchmark (no evaluation data): six agents described
in each language, and dialogues that visit three of them, two user turns each, with an assistant reply after
every user turn. Every message is made distinct by its details (a number, a place), so that no embedding
comes from the cache: each turn pays for its own encoding, as live traffic does.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from memroute.embed.models import E5_ENGINE, E5_THREADS

# agent id -> (description, user turns, assistant reply); {p} is a place, {n} a number.
_EN = {
    "weather": ("Weather forecasts, temperature and rain for any city.",
                ["Will it rain in {p} on day {n}?", "And how cold will it get in the evening there?"],
                "In {p} expect light rain and about {n} degrees."),
    "restaurant": ("Finds restaurants and books tables.",
                   ["Find me a quiet restaurant near {p} for {n} people.", "Can you book it for 7 pm?"],
                   "I found a bistro near {p} with a table for {n}."),
    "calendar": ("Adds, moves and lists events in your calendar.",
                 ["Put a meeting with the {p} team on the {n}th in my calendar.", "Move it one hour later."],
                 "The meeting on the {n}th is in your calendar."),
    "translate": ("Translates text between languages.",
                  ["Translate 'see you at gate {n} in {p}' into Japanese.", "Now make it more polite."],
                  "Here is the translation for gate {n}."),
    "travel": ("Searches and books flights, trains and hotels.",
               ["I need a flight to {p} leaving on the {n}th.", "Is there a cheaper one in the morning?"],
               "There are {n} flights to {p} that day."),
    "shopping": ("Finds products and compares prices in online shops.",
                 ["I want to buy running shoes in size {n}, like the ones sold in {p}.", "Any cheaper ones?"],
                 "I found {n} pairs of running shoes."),
}
_JA = {
    "weather": ("天気予報、気温、降水確率を地域ごとにお知らせします。",
                ["{n}日の{p}は雨が降りますか？", "夜はどのくらい冷えますか？"],
                "{p}は小雨で、気温は{n}度くらいです。"),
    "restaurant": ("飲食店を探して、席を予約します。",
                   ["{p}の近くで{n}人で入れる静かなお店を探して", "19時で予約できますか？"],
                   "{p}の近くに{n}名で入れる店があります。"),
    "calendar": ("カレンダーの予定を登録、変更、確認します。",
                 ["{n}日に{p}チームとの打ち合わせを入れて", "1時間後ろにずらして"],
                 "{n}日の打ち合わせを登録しました。"),
    "translate": ("文章を別の言語に翻訳します。",
                  ["「{p}の{n}番ゲートで会いましょう」を英語にして", "もう少し丁寧にして"],
                  "{n}番ゲートの訳はこちらです。"),
    "travel": ("航空券、列車、ホテルを検索して予約します。",
               ["{n}日に{p}へ行く飛行機を探して", "朝の便でもっと安いのはある？"],
               "{p}行きの便が{n}件あります。"),
    "shopping": ("通販サイトで商品を探して価格を比べます。",
                 ["{p}で売っているような{n}センチのランニングシューズが欲しい", "もっと安いのはある？"],
                 "{n}足見つかりました。"),
}
_KO = {
    "weather": ("지역별 날씨 예보와 기온, 강수 확률을 알려 줍니다.",
                ["{n}일에 {p}에 비 와?", "저녁에는 얼마나 추워?"],
                "{p}는 약한 비에 기온은 {n}도 정도예요."),
    "restaurant": ("식당을 찾고 자리를 예약합니다.",
                   ["{p} 근처에 {n}명 갈 만한 조용한 식당 찾아 줘", "저녁 7시로 예약돼?"],
                   "{p} 근처에 {n}명 자리가 있는 식당이 있어요."),
    "calendar": ("캘린더 일정을 등록하고 변경하고 조회합니다.",
                 ["{n}일에 {p}팀 회의 일정 넣어 줘", "한 시간 뒤로 미뤄 줘"],
                 "{n}일 회의를 등록했어요."),
    "translate": ("문장을 다른 언어로 번역합니다.",
                  ["'{p} {n}번 게이트에서 만나요'를 영어로 번역해 줘", "좀 더 공손하게 바꿔 줘"],
                  "{n}번 게이트 번역입니다."),
    "travel": ("항공권과 기차표, 호텔을 검색하고 예약합니다.",
               ["{n}일에 {p} 가는 비행기 찾아 줘", "아침 비행기 중에 더 싼 거 있어?"],
               "{p}행 항공편이 {n}개 있어요."),
    "shopping": ("온라인 쇼핑몰에서 상품을 찾고 가격을 비교합니다.",
                 ["{p}에서 파는 것 같은 {n}사이즈 러닝화 사고 싶어", "더 싼 건 없어?"],
                 "러닝화 {n}켤레를 찾았어요."),
}
_PLACES = {"en": ["Paris", "Osaka", "Busan", "Lisbon", "Denver", "Hanoi", "Oslo", "Lima"],
           "ja": ["札幌", "大阪", "福岡", "名古屋", "金沢", "那覇", "仙台", "京都"],
           "ko": ["부산", "대구", "광주", "제주", "강릉", "전주", "인천", "속초"]}
LANGUAGES = {"en": _EN, "ja": _JA, "ko": _KO}


def _dialogues(language: str, turns: int) -> list[list[tuple[str, str, str]]]:
    """Dialogues of (agent, user text, assistant reply) until ``turns`` user turns, every text distinct."""
    spec = LANGUAGES[language]
    ids = list(spec)
    places = _PLACES[language]
    out: list[list[tuple[str, str, str]]] = []
    count = 0
    while count < turns:
        k = len(out)
        dialogue = []
        for step in range(3):
            agent = ids[(k + 2 * step) % len(ids)]
            _, users, reply = spec[agent]
            values = {"p": places[(k + step) % len(places)], "n": str(2 + (k * 3 + step) % 27)}
            for i, user in enumerate(users):
                tail = "" if i == 0 else f" ({k}-{step})"  # the second turns would repeat otherwise
                dialogue.append((agent, user.format(**values) + tail, reply.format(**values) + f" ({k}-{step}-{i})"))
        out.append(dialogue)
        count += len(dialogue)
    return out


def bench_language(language: str, turns: int) -> dict[str, Any]:
    """Route ``turns`` user turns of ``language`` conversations; latency per routed turn and accuracy."""
    from memroute.memory import Memory
    from memroute.routing import AgentRouter, ConversationRouter
    from memroute.types import Agent

    agents = [Agent(id=a, name=a, description=d) for a, (d, _, _) in LANGUAGES[language].items()]
    router = AgentRouter()
    start = time.perf_counter()
    router.index(agents)
    build = time.perf_counter() - start
    memory = Memory.open("sqlite://:memory:", owner="bench", embedder=router.embedder)
    try:
        conv = ConversationRouter(memory, agents, router=router, use_memories=False)
        conv.route({"en": "warm up", "ja": "準備", "ko": "준비"}[language], "warm-up")
        lat, cpu, reply_lat, reply_cpu, hits = [], [], [], [], 0
        for n, dialogue in enumerate(_dialogues(language, turns)):
            session = f"{language}-{n}"
            for agent, user, reply in dialogue:
                before = time.process_time()
                decision = conv.route(user, session)
                cpu.append((time.process_time() - before) * 1000.0)
                lat.append(decision.latency_ms)
                hits += int(decision.agent is not None and decision.agent.id == agent)
                start, before = time.perf_counter(), time.process_time()
                conv.add_reply(session, reply)  # logged and encoded while the user reads it
                reply_cpu.append((time.process_time() - before) * 1000.0)
                reply_lat.append((time.perf_counter() - start) * 1000.0)
    finally:
        memory.close()
    return {"language": language, "turns": len(lat), "agents": len(agents),
            "encoder": getattr(router.embedder, "model_id", None), "e5_threads": E5_THREADS, "e5_engine": E5_ENGINE,
            "latency_ms": _percentiles(lat),
            # CPU time of the process (the routing thread and the worker that encodes the message): what the
            # turn costs in cores, whatever the load (wall-clock latency on a shared, busy machine is mostly
            # waiting for a core; on an idle one it can be below the CPU time, the encoder running beside
            # the rest of the turn).
            "cpu_ms": _percentiles(cpu),
            # Logging the assistant's reply (ConversationRouter.add_reply encodes it there): work moved off
            # the routed turn, reported so that it is seen, not hidden.
            "reply_ms": _percentiles(reply_lat), "reply_cpu_ms": _percentiles(reply_cpu),
            "accuracy": round(hits / max(1, len(lat)), 4), "build_s": round(build, 2)}


def _percentiles(values: list[float]) -> dict[str, float]:
    arr = np.array(values) if values else np.zeros(1)
    return {"p50": round(float(np.percentile(arr, 50)), 3), "p95": round(float(np.percentile(arr, 95)), 3)}


def run_language_bench(turns: int, languages: tuple[str, ...] = ("en", "ja", "ko")) -> list[dict[str, Any]]:
    return [bench_language(lang, turns) for lang in languages]
