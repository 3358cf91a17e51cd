"""Constraints for requests: a message that asks for a recommendation, a plan or a booking also searches
the owner's constraints and preferences (allergies, diets, dislikes, fixed schedules, stated preferences).

"Can we get paella for Leo's birthday dinner?" shares few words with "my son Leo is allergic to
shellfish", and 「월요일 9시에 치과 예약해도 돼?」 none with 「매주 월요일 오전엔 주간 회의가 있다」; yet those are
the memories such a message needs. The rules read the message's normalised tokens (English stems,
Japanese and Korean dictionary forms), so every inflection counts:

- **a request**: asking for a suggestion, a plan, a booking or a decision ("recommend", "should we",
  "can we", "book"; おすすめ, 予約, どうする, 〜しよう; 추천, 예약, 어때, 〜할까, 〜해도 돼);
- **its domain**: food, schedule, travel, gift or activity, from its words (a named day or time makes it
  a schedule); a request in no domain is "a plan";
- **a request by its form alone** (an English imperative such as "Find us a brunch spot" or "Plan a
  kayaking day", 〜教えて / 〜考えて / 〜がいいでしょうか, 〜해 줘 / 〜줄래 / 〜될까) counts only with a domain:
  "Write a haiku" and 「이 문장 맞춤법 검사해 줘」 ask for a task that no constraint bears on.

The constraint search is one more keyword search in the recall's gather (no extra vector pass): the
words that state constraints in the three languages (allergic, アレルギー, 알레르기; can't, 苦手, 못;
every / 毎週 / 매주; prefer / 好き / 좋아하다 ...) with the domain's own words. Its hits are candidates like any
other; the judge sees which ones it found (:mod:`memroute.retrieval.judge`), the best two are judged even
when the reranker ranks them lower, and the trace says why each was searched ("a constraint for a
request about food").
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache

from memroute.analysis import QueryAnalysis
from memroute.text import tokenize
from memroute.text.tokenizers import analyze_tokens

PROMOTED = 2
"""Constraint hits judged even when ranked below the returned memories."""

_REQUEST_NORMS = frozenset({
    # en (light stems)
    "recommend", "suggest", "suggestion", "idea", "plan", "book", "reserv", "schedul", "arrang",
    # ja (lemmas)
    "おすすめ", "お勧め", "勧める", "薦める", "提案", "予約", "計画", "手配", "企画",
    # ko (stems)
    "추천", "예약", "계획", "일정",
})
_ASKING = ("should we", "should i", "can we", "can i", "could we", "shall we", "let's", "lets ", "what should",
           "any idea", "how about", "is it ok", "is it okay", "would it be ok", "what to ",
           "どうする", "どうしよう", "しよう", "ようか", "ましょう", "てもいい", "ても大丈夫", "いいかな", "どこがいい",
           "何がいい", "어때", "할까", "갈까", "먹을까", "볼까", "해도 돼", "해도 될", "도 돼", "괜찮을까", "뭐가 좋")
_ASKING_IN_DOMAIN = ("教えて", "考えて", "立てて", "選んで", "探して", "頼もう", "ようかな", "うかな", "大丈夫かな",
                     "いいでしょうか", "がいいかな", "入れてもいい", "줘", "줄래", "주세요", "될까", "되나", "괜찮아")
"""Request forms that are also a task's (translate this, check that): a request only with a domain."""
_IMPERATIVES = frozenset({"plan", "find", "book", "order", "arrang", "pick", "choos", "organis", "organiz", "get",
                          "make", "recommend", "suggest", "schedul", "reserv", "help"})
"""Light stems of English verbs that open an imperative request ("Find us a good brunch spot")."""
_INTERJECTIONS = frozenset({"yeah", "yes", "ok", "okay", "so", "pleas", "please", "hey", "well", "oh", "right"})
_DOMAINS: dict[str, frozenset[str]] = {
    "food": frozenset({
        "eat", "dinner", "lunch", "breakfast", "brunch", "meal", "food", "restaurant", "cook", "recip", "dish",
        "menu", "snack", "cake", "dessert", "takeaway", "takeout", "bbq", "barbecu", "picnic", "drink", "cafe",
        "食べる", "飲む", "夕食", "夕飯", "晩ご飯", "ご飯", "昼ご飯", "朝ご飯", "ランチ", "ディナー", "料理",
        "レストラン", "食事", "メニュー", "おやつ", "ケーキ", "弁当", "辛さ", "辛い", "味", "外食", "店",
        "먹", "저녁", "점심", "아침", "식사", "식당", "요리", "음식", "메뉴", "간식", "케이크", "외식", "맛", "배달",
        "마시",
    }),
    "travel": frozenset({
        "trip", "travel", "flight", "fly", "hotel", "holiday", "vacation", "drive", "train", "stay",
        "旅行", "出張", "飛行機", "ホテル", "旅館", "休暇", "泊まる", "新幹線",
        "여행", "출장", "비행기", "호텔", "숙소", "휴가", "기차",
    }),
    "gift": frozenset({"gift", "present", "birthday", "anniversary", "プレゼント", "贈り物", "誕生日", "記念日",
                       "선물", "생일", "기념일"}),
    "activity": frozenset({"hike", "movie", "film", "concert", "game", "play", "run", "swim", "gym", "walk", "outing",
                           "sightse", "映画", "ライブ", "散歩", "ジム", "遊ぶ", "観光", "花見", "영화", "공연", "산책",
                           "헬스", "놀", "나들이", "구경", "관광"}),
    "schedule": frozenset({
        "meet", "meeting", "appointment", "call", "monday", "tuesday", "wednesday", "thursday", "friday",
        "saturday", "sunday", "morning", "afternoon", "evening", "am", "pm", "o'clock", "week", "weekend",
        "dentist", "doctor",
        "会議", "打ち合わせ", "約束", "予約", "月曜", "火曜", "水曜", "木曜", "金曜", "土曜", "日曜", "午前", "午後",
        "朝", "夜", "時", "週末", "歯医者", "病院",
        "회의", "약속", "월요일", "화요일", "수요일", "목요일", "금요일", "토요일", "일요일", "오전", "오후", "시",
        "주말", "치과", "병원",
    }),
}
_CONSTRAINT_WORDS = {
    "any": ("allergic allergy intolerant can't cannot never avoid hate dislike don't prefer favourite favorite "
            "always every usually must rule "
            "アレルギー 苦手 嫌い 駄目 無理 避ける 好き 好む いつも 毎週 毎日 必ず 控える "
            "알레르기 못 싫어하 싫 피하 좋아하 항상 매주 매일 늘 꼭 안"),
    "food": ("vegetarian vegan halal kosher gluten dairy lactose nut shellfish spicy diet eat sugar "
             "ベジタリアン 菜食 食べられない 辛い 甘い 食事制限 糖質 乳製品 小麦 "
             "채식 비건 글루텐 유제품 견과 매운 식단 다이어트 먹"),
    "schedule": ("weekly meeting class practice shift pickup busy "
                 "会議 塾 習い事 練習 シフト 送迎 予定 "
                 "회의 학원 수업 연습 근무 픽업 일정"),
    "travel": ("seat aisle window motion sick fly afraid budget "
               "通路 窓側 酔う 予算 "
               "통로 창가 멀미 예산"),
    "gift": "like love collect wants wish 好き 集める 欲しい 좋아하 모으 갖고",
    "activity": "knee back injury afraid like 膝 腰 怪我 好き 무릎 허리 부상 좋아하",
}
_DOMAIN_NAMES = {
    "en": {"food": "food", "schedule": "a schedule", "travel": "travel", "gift": "a gift", "activity": "an outing",
           "plan": "a plan"},
    "ja": {"food": "食事", "schedule": "予定", "travel": "旅行", "gift": "贈り物", "activity": "お出かけ",
           "plan": "計画"},
    "ko": {"food": "음식", "schedule": "일정", "travel": "여행", "gift": "선물", "activity": "외출", "plan": "계획"},
}
_REASON = {"en": "a constraint for a request about {domain}", "ja": "{domain}についての依頼に関わる制約",
           "ko": "{domain}에 관한 요청의 제약"}


@dataclass(frozen=True, slots=True)
class Need:
    """A request found in a message: its domain and the words that said so."""

    domain: str
    cue: str

    def reason(self, language: str) -> str:
        names = _DOMAIN_NAMES.get(language, _DOMAIN_NAMES["en"])
        return _REASON.get(language, _REASON["en"]).format(domain=names[self.domain])


def request_need(analysis: QueryAnalysis) -> Need | None:
    """The request the message makes, or None when it asks for no recommendation, plan or booking."""
    text = analysis.text.casefold()
    if not text.strip():
        return None
    norms = [t.norm for t in analyze_tokens(analysis.text)]
    asking = next((a.strip() for a in _ASKING if a in text), None)
    requested = next((n for n in norms if n in _REQUEST_NORMS), None)
    form = next((a for a in _ASKING_IN_DOMAIN if a in text), None)
    opening = [n for n in norms[:3] if n not in _INTERJECTIONS and n.isalpha()][:1]
    if form is None and opening and opening[0] in _IMPERATIVES:
        form = opening[0]
    if asking is None and requested is None and form is None:
        return None
    if asking is None and form is None and not text.rstrip().endswith(("?", "？")) \
            and analysis.query_type.value == "factual":
        return None  # "I booked the flight." states, it does not ask
    found = set(norms)
    cue = asking or requested or form or ""
    for domain, words in _DOMAINS.items():
        if found & words:
            return Need(domain, cue)
    if asking is None and requested is None:
        return None  # a request by its form alone needs a domain (see the module docstring)
    if analysis.time_range is not None:
        return Need("schedule", cue)
    return Need("plan", cue)


@lru_cache(maxsize=16)
def constraint_tokens(domain: str) -> tuple[str, ...]:
    """The keyword query of the constraint search for ``domain`` (normalised like the index)."""
    words = _CONSTRAINT_WORDS["any"] + " " + _CONSTRAINT_WORDS.get(domain, "")
    return tuple(dict.fromkeys(tokenize(words)))


def promote(order: Sequence[int], found: Collection[int], limit: int) -> list[int]:
    """``order`` with the constraint search's hits (``found``) among its first ``limit``: those ranked
    lower take the last places of the first ``limit``, in their order."""
    missing = [j for j in order[limit:] if j in found]
    if not missing:
        return list(order)
    rest = [j for j in order if j not in missing]
    keep = max(limit - len(missing), 0)
    return rest[:keep] + missing + rest[keep:]
