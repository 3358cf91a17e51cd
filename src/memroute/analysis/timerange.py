"""Time expressions in English, Japanese and Korean, resolved to concrete ranges against a reference time.

A range is half-open: ``start`` is inclusive and ``end`` exclusive ("yesterday" is yesterday 00:00 to today
00:00). Weeks start on Monday; "last week" is the previous calendar week, "the past 7 days" the seven days
that end with today. A month or date without a year is the most recent one that is not in the future
("in January" said in March 2025 is January 2025; said in December 2024 it is January 2024).
Vague expressions ("the other day", 「この前」, "지난번", "recently") give the last 30 days with
``fuzzy=True``; "just now", 「さっき」, "아까" give the last 24 hours, also fuzzy.

Digits inside identifiers are not dates: ``build-2025-01-15``, ``log_2025.txt`` and ``v2025`` are skipped,
and a bare month name that is also a word or a name ("May", "March", "August") is a month only with a
preposition, a determiner, a day or a year ("in May", "May 3", "May 2025"), never in "May I ask".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from memroute.analysis import _calendar as cal
from memroute.analysis._numbers import EN_NUMBER_RE, JA_NUMBER_RE, KO_NATIVE_DAYS, KO_NUMBER_RE, parse_number

FUZZY_RECENT_DAYS = 30
"""How far back a vague "the other day" / 「この前」 / "지난번" reaches."""
FUZZY_SHORT = timedelta(hours=24)
"""How far back "just now" / 「さっき」 / "아까" reaches."""


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A resolved time range ``[start, end)`` and the words that produced it."""

    start: datetime
    end: datetime
    expression: str
    fuzzy: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "expression": self.expression,
                "fuzzy": self.fuzzy}


@dataclass(frozen=True, slots=True)
class TimeMatch:
    """One time expression found in a text: its span and its range."""

    start: int
    end: int
    surface: str
    range_start: datetime
    range_end: datetime
    fuzzy: bool
    vague: bool
    """A vague back-reference to an earlier conversation ("the other day", 「この前」): also a reference."""


Resolver = Callable[[re.Match[str], datetime], cal.Range | None]


@dataclass(frozen=True, slots=True)
class _Pattern:
    regex: re.Pattern[str]
    resolve: Resolver
    fuzzy: bool = False
    vague: bool = False


def _g(m: re.Match[str], name: str) -> str:
    """A named group's text, or "" when the pattern has no such group or it did not take part."""
    value = m.groupdict().get(name)
    return value if isinstance(value, str) else ""


def _fuzzy_recent(_m: re.Match[str], now: datetime) -> cal.Range:
    return cal.last_days(now, FUZZY_RECENT_DAYS)


def _fuzzy_short(_m: re.Match[str], now: datetime) -> cal.Range:
    return now - FUZZY_SHORT, now


def _fuzzy_few_days(_m: re.Match[str], now: datetime) -> cal.Range:
    return cal.last_days(now, 7)


def _const(kind: str, offset: int) -> Resolver:
    table: dict[str, Callable[[datetime, int], cal.Range]] = {
        "day": cal.day, "week": cal.week, "month": cal.month, "year": cal.year, "weekend": cal.weekend,
    }
    fn = table[kind]
    return lambda _m, now: fn(now, offset)


_UNIT_ALIASES = {
    "day": "day", "days": "day", "日": "day", "일": "day",
    "week": "week", "weeks": "week", "週": "week", "週間": "week", "주": "week", "주일": "week",
    "month": "month", "months": "month", "ヶ月": "month", "か月": "month", "カ月": "month", "ケ月": "month",
    "箇月": "month", "개월": "month", "달": "month",
    "year": "year", "years": "year", "年": "year", "년": "year",
    "hour": "hour", "hours": "hour", "時間": "hour", "시간": "hour",
}
_MAX_N = 1000


def _ago(m: re.Match[str], now: datetime) -> cal.Range | None:
    """"3 days ago" is that day; "2 weeks ago" that calendar week; "a month ago" that calendar month."""
    n = _count(m.group("n"))
    unit = _UNIT_ALIASES.get(m.group("unit").lower())
    if n is None or unit is None:
        return None
    if unit == "day":
        return cal.day(now, -n)
    if unit == "week":
        return cal.week(now, -n)
    if unit == "month":
        return cal.month(now, -n)
    if unit == "year":
        return cal.year(now, -n)
    return now - timedelta(hours=n + 1), now - timedelta(hours=max(n - 1, 0))


def _past(m: re.Match[str], now: datetime) -> cal.Range | None:
    """"the past 3 days" / 「過去3日」 / "최근 3일": a rolling window that ends with today."""
    n = _count(_g(m, "n") or "1")
    unit = _UNIT_ALIASES.get(m.group("unit").lower())
    if n is None or unit is None:
        return None
    if unit == "day":
        return cal.last_days(now, n)
    if unit == "week":
        return cal.last_days(now, 7 * n)
    if unit == "month":
        return cal.last_months(now, n)
    if unit == "year":
        return cal.last_months(now, 12 * n)
    return now - timedelta(hours=n), now


def _count(word: str) -> int | None:
    n = KO_NATIVE_DAYS.get(word) or parse_number(word)
    if n is None or not 0 < n <= _MAX_N:
        return None
    return n


# ---------------------------------------------------------------------------------------------- English

_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7, "august": 8,
    "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9, "oct": 10,
    "nov": 11, "dec": 12,
}
_FULL_MONTH = r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
_ANY_MONTH = _FULL_MONTH[:-1] + r"|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?"
# Month names that are not also common words or first names: these stand alone ("the January release").
_SAFE_MONTH = r"(?:january|february|september|october|november|december)"
_WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6}
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_DAYNUM = r"(?:[12]\d|3[01]|0?[1-9])"
_YEAR = r"(?:19|20|21)\d\d"
_NOT_ID_BEFORE = r"(?<![\w./\-#@])"  # a date glued to an identifier, path or version is not a date
_NOT_ID_AFTER = r"(?![\w/\-#@]|\.\w)"


def _month_num(word: str) -> int:
    return _MONTHS[word.lower().rstrip(".")]


def _en_month(m: re.Match[str], now: datetime) -> cal.Range | None:
    word = m.group("mon")
    if word in ("may", "march") and not _g(m, "y"):
        return None  # lower-case "this may take" / "we march on" are a modal and a verb
    mon = _month_num(word)
    if _g(m, "y"):
        return cal.month_of(now, int(_g(m, "y")), mon)
    rel = _g(m, "rel").lower()
    if rel == "next":
        return cal.month_of(now, now.year if mon > now.month else now.year + 1, mon)
    if rel == "this":
        return cal.month_of(now, now.year, mon)
    if rel == "last":
        return cal.month_of(now, now.year if mon < now.month else now.year - 1, mon)
    return cal.month_of(now, cal.recent_month_year(now, mon), mon)


def _en_date(m: re.Match[str], now: datetime) -> cal.Range | None:
    mon, d = _month_num(m.group("mon")), int(m.group("d"))
    y = int(_g(m, "y")) if _g(m, "y") else cal.recent_date_year(now, mon, d)
    return cal.date_of(now, y, mon, d)


def _iso_date(m: re.Match[str], now: datetime) -> cal.Range | None:
    return cal.date_of(now, int(_g(m, "y")), int(m.group("m")), int(m.group("d")))


def _iso_month(m: re.Match[str], now: datetime) -> cal.Range | None:
    return cal.month_of(now, int(_g(m, "y")), int(m.group("m")))


def _year_only(m: re.Match[str], now: datetime) -> cal.Range | None:
    return cal.year_of(now, int(_g(m, "y")))


def _en_weekday(m: re.Match[str], now: datetime) -> cal.Range | None:
    wd = _WEEKDAYS[m.group("wd").lower()]
    rel = _g(m, "rel").lower()
    if rel == "last":
        return cal.weekday_before(now, wd)
    if rel == "this":
        return cal.weekday_in_week(now, wd, 0)
    if rel == "next":
        return cal.weekday_in_week(now, wd, 1)
    return cal.weekday_on_or_before(now, wd)


def _en_relative(m: re.Match[str], now: datetime) -> cal.Range | None:
    rel, unit = m.group("rel").lower(), m.group("unit").lower()
    if rel == "past":
        return _past_unit(now, unit)
    offset = {"last": -1, "previous": -1, "this": 0, "current": 0, "next": 1, "coming": 1}[rel]
    return _const(unit, offset)(m, now)


def _past_unit(now: datetime, unit: str) -> cal.Range:
    if unit == "week":
        return cal.last_days(now, 7)
    if unit == "weekend":
        return cal.weekend(now, -1)
    if unit == "month":
        return cal.last_months(now, 1)
    if unit == "year":
        return cal.last_months(now, 12)
    return cal.day(now, -1)


_I = re.IGNORECASE
_EN: tuple[_Pattern, ...] = (
    _Pattern(re.compile(r"\b(?:the\s+)?day\s+before\s+yesterday\b", _I), _const("day", -2)),
    _Pattern(re.compile(r"\b(?:yesterday|last\s+night)(?:\s+(?:morning|afternoon|evening|night))?\b", _I),
             _const("day", -1)),
    _Pattern(re.compile(r"\b(?:earlier\s+)?today\b|\btonight\b|\bthis\s+(?:morning|afternoon|evening)\b", _I),
             _const("day", 0)),
    _Pattern(re.compile(r"\b(?:the\s+)?day\s+after\s+tomorrow\b", _I), _const("day", 2)),
    _Pattern(re.compile(r"\btomorrow(?:\s+(?:morning|afternoon|evening|night))?\b", _I), _const("day", 1)),
    _Pattern(re.compile(r"\b(?:the\s+)?(?P<rel>last|previous|this|current|next|coming|past)\s+"
                        r"(?P<unit>week|weekend|month|year)\b", _I), _en_relative),
    _Pattern(re.compile(r"\b(?:(?:in|over|during|for)\s+)?the\s+(?:past|last|previous)\s+(?P<n>" + EN_NUMBER_RE
                        + r")\s+(?P<unit>days?|weeks?|months?|years?|hours?)\b", _I), _past),
    _Pattern(re.compile(r"\b(?:past|last)\s+(?P<n>\d{1,4})\s+(?P<unit>days?|weeks?|months?|years?|hours?)\b", _I),
             _past),
    _Pattern(re.compile(r"\b(?P<n>" + EN_NUMBER_RE + r")\s+(?P<unit>days?|weeks?|months?|years?|hours?)\s+ago\b",
                        _I), _ago),
    _Pattern(re.compile(r"\b(?:a\s+few|several|some)\s+days\s+ago\b", _I), _fuzzy_few_days, fuzzy=True),
    _Pattern(re.compile(r"\b(?P<mon>" + _ANY_MONTH + r")\s+(?P<d>" + _DAYNUM + r")(?:st|nd|rd|th)?"
                        r"(?:,?\s+(?P<y>" + _YEAR + r"))?\b(?!:)", _I), _en_date),
    _Pattern(re.compile(r"\b(?:the\s+)?(?P<d>" + _DAYNUM + r")(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>" + _ANY_MONTH
                        + r")(?:,?\s+(?P<y>" + _YEAR + r"))?\b", _I), _en_date),
    _Pattern(re.compile(r"\b(?P<mon>" + _ANY_MONTH + r")(?:,)?\s+(?P<y>" + _YEAR + r")\b", _I), _en_month),
    _Pattern(re.compile(r"\b(?:(?:in|during|since|from|until|till|through|by|of|for|before|after)\s+"
                        r"(?:early\s+|late\s+|mid-?)?|(?P<rel>last|this|next)\s+)(?P<mon>" + _FULL_MONTH + r")\b", _I),
             _en_month),
    _Pattern(re.compile(r"\b(?P<mon>" + _SAFE_MONTH + r")\b", _I), _en_month),
    _Pattern(re.compile(r"\b(?:in|during|since|of|for)\s+(?:the\s+year\s+)?(?P<y>" + _YEAR + r")" + _NOT_ID_AFTER,
                        _I), _year_only),
    _Pattern(re.compile(_NOT_ID_BEFORE + r"(?P<y>" + _YEAR + r")-(?P<m>0?[1-9]|1[0-2])-(?P<d>" + _DAYNUM + r")"
                        + _NOT_ID_AFTER), _iso_date),
    _Pattern(re.compile(_NOT_ID_BEFORE + r"(?P<y>" + _YEAR + r")/(?P<m>0?[1-9]|1[0-2])/(?P<d>" + _DAYNUM + r")"
                        + _NOT_ID_AFTER), _iso_date),
    _Pattern(re.compile(_NOT_ID_BEFORE + r"(?P<y>" + _YEAR + r")-(?P<m>0[1-9]|1[0-2])" + _NOT_ID_AFTER), _iso_month),
    _Pattern(re.compile(r"(?<!every\s)\b(?:(?P<rel>last|this|next)\s+|on\s+)?(?P<wd>" + _WEEKDAY + r")(?:'s)?\b(?!\.\w)"
                        r"(?![ \t]+(?!" + _FULL_MONTH + r")[A-Z][a-z])", _I), _en_weekday),
    _Pattern(re.compile(r"\b(?:this|for\s+the|on\s+the|over\s+the|the)\s+weekend(?=\s*[?.!,]|\s*$)", _I),
             _const("weekend", 0)),
    _Pattern(re.compile(r"\b(?:the\s+other\s+day|last\s+time|a\s+while\s+(?:ago|back)|some\s+time\s+ago|"
                        r"the\s+previous\s+time|(?<!most\s)recently|lately)\b", _I),
             _fuzzy_recent, fuzzy=True, vague=True),
    _Pattern(re.compile(r"\b(?:just\s+now|a\s+(?:moment|minute|few\s+minutes)\s+ago)\b", _I), _fuzzy_short,
             fuzzy=True, vague=True),
)

# ---------------------------------------------------------------------------------------------- Japanese

_JA_WD = {"月": 0, "火": 1, "水": 2, "木": 3, "金": 4, "土": 5, "日": 6}


def _ja_date(m: re.Match[str], now: datetime) -> cal.Range | None:
    mon, d = int(m.group("m")), int(m.group("d"))
    y = int(_g(m, "y")) if _g(m, "y") else cal.recent_date_year(now, mon, d)
    return cal.date_of(now, y, mon, d)


def _ja_month(m: re.Match[str], now: datetime) -> cal.Range | None:
    mon = int(m.group("m"))
    y = int(_g(m, "y")) if _g(m, "y") else cal.recent_month_year(now, mon)
    return cal.month_of(now, y, mon)


def _cjk_weekday(table: dict[str, int], weeks: dict[str, int]) -> Resolver:
    def resolve(m: re.Match[str], now: datetime) -> cal.Range | None:
        wd = table[m.group("wd")]
        rel = _g(m, "rel")
        if rel:
            return cal.weekday_in_week(now, wd, weeks[re.sub(r"\s+", "", rel)])
        return cal.weekday_on_or_before(now, wd)

    return resolve


_CJK_BEFORE = r"(?<![0-9A-Za-z_])"
_JA_NUM_MONTH = r"(?P<m>1[0-2]|0?[1-9])"
_JA_NUM_DAY = r"(?P<d>[12]\d|3[01]|0?[1-9])"
_JA: tuple[_Pattern, ...] = (
    _Pattern(re.compile(r"一昨日|おととい|おとつい"), _const("day", -2)),
    _Pattern(re.compile(r"昨日|きのう|昨夜|昨晩|ゆうべ"), _const("day", -1)),
    _Pattern(re.compile(r"今日|本日|きょう|今朝|今夜|今晩"), _const("day", 0)),
    _Pattern(re.compile(r"明後日|あさって"), _const("day", 2)),
    _Pattern(re.compile(r"明日|あした"), _const("day", 1)),
    _Pattern(re.compile(r"先々週"), _const("week", -2)),
    _Pattern(re.compile(r"先週末"), _const("weekend", -1)),
    _Pattern(re.compile(r"今週末"), _const("weekend", 0)),
    _Pattern(re.compile(r"先週"), _const("week", -1)),
    _Pattern(re.compile(r"今週"), _const("week", 0)),
    _Pattern(re.compile(r"来週"), _const("week", 1)),
    _Pattern(re.compile(r"先々月"), _const("month", -2)),
    _Pattern(re.compile(r"先月"), _const("month", -1)),
    _Pattern(re.compile(r"今月"), _const("month", 0)),
    _Pattern(re.compile(r"来月"), _const("month", 1)),
    _Pattern(re.compile(r"一昨年|おととし"), _const("year", -2)),
    _Pattern(re.compile(r"去年|昨年"), _const("year", -1)),
    _Pattern(re.compile(r"今年|本年"), _const("year", 0)),
    _Pattern(re.compile(r"来年"), _const("year", 1)),
    _Pattern(re.compile(r"(?:過去|直近|ここ|"
                        r"この)\s?(?P<n>" + JA_NUMBER_RE + r")\s?(?P<unit>日|週間|ヶ月|か月|カ月|ケ月|箇月|年|時間)"
                        r"(?:間|ほど|くらい|ぐらい)?"), _past),
    _Pattern(re.compile(r"(?P<n>" + JA_NUMBER_RE + r")\s?(?P<unit>日|週間|ヶ月|か月|カ月|ケ月|箇月|年|時間)前"), _ago),
    _Pattern(re.compile(r"数日前"), _fuzzy_few_days, fuzzy=True),
    _Pattern(re.compile(_CJK_BEFORE + r"(?P<y>" + _YEAR + r")\s?年\s?" + _JA_NUM_MONTH + r"\s?月\s?" + _JA_NUM_DAY
                        + r"\s?日"), _ja_date),
    _Pattern(re.compile(_CJK_BEFORE + r"(?P<y>" + _YEAR + r")\s?年\s?" + _JA_NUM_MONTH + r"\s?月"), _ja_month),
    _Pattern(re.compile(_CJK_BEFORE + r"(?P<y>" + _YEAR + r")\s?年(?![度前間])"), _year_only),
    _Pattern(re.compile(r"(?<![0-9年])" + _JA_NUM_MONTH + r"\s?月\s?" + _JA_NUM_DAY + r"\s?日"), _ja_date),
    _Pattern(re.compile(r"(?<![0-9年])" + _JA_NUM_MONTH + r"\s?月(?![0-9日])"), _ja_month),
    _Pattern(re.compile(_NOT_ID_BEFORE + r"(?P<y>" + _YEAR + r")[-/](?P<m>0?[1-9]|1[0-2])[-/](?P<d>" + _DAYNUM
                        + r")" + _NOT_ID_AFTER), _iso_date),
    _Pattern(re.compile(r"(?<!毎週)(?:(?P<rel>先週|今週|"
                        r"来週)の?)?(?P<wd>[月火水木金土日])曜(?:日)?(?![\u4e00-\u9fff])"),
             _cjk_weekday(_JA_WD, {"先週": -1, "今週": 0, "来週": 1})),
    # 「この前」 is "the other day" only when no noun follows (「この前提」「この前後」 are other words).
    _Pattern(re.compile(r"この前(?![提後者日段面述半線列方])|こないだ|このあいだ|この間(?![\u4e00-\u9fff])|先日|"
                        r"最近|近頃|このごろ|この頃|前回"), _fuzzy_recent, fuzzy=True, vague=True),
    _Pattern(re.compile(r"さっき|先ほど|先程|さきほど|ついさっき"), _fuzzy_short, fuzzy=True, vague=True),
)

# ------------------------------------------------------------------------------------------------ Korean

_KO_WD = {"월": 0, "화": 1, "수": 2, "목": 3, "금": 4, "토": 5, "일": 6}
_HB = r"(?<![가-힣])"  # a Korean word starts here (particles attach on the right, so only the left is checked)
_KO: tuple[_Pattern, ...] = (
    _Pattern(re.compile(_HB + r"(?:그저께|그제)"), _const("day", -2)),
    _Pattern(re.compile(_HB + r"(?:어제|어저께|어젯밤|엊저녁)"), _const("day", -1)),
    _Pattern(re.compile(_HB + r"(?:오늘|금일)(?!날)"), _const("day", 0)),
    _Pattern(re.compile(_HB + r"내일(?=$|[^가-힣]|[은는도에의까부만이로])"), _const("day", 1)),
    _Pattern(re.compile(_HB + r"(?:모레)"), _const("day", 2)),
    _Pattern(re.compile(_HB + r"지지난\s?주"), _const("week", -2)),
    _Pattern(re.compile(_HB + r"(?:지난|저번)\s?주\s?말"), _const("weekend", -1)),
    _Pattern(re.compile(_HB + r"이번\s?주\s?말"), _const("weekend", 0)),
    _Pattern(re.compile(_HB + r"(?:지난|저번)\s?주(?![가-힣])|(?:지난|"
                        r"저번)\s?주(?=[에의는도로까엔랑만부동])"), _const("week", -1)),
    _Pattern(re.compile(_HB + r"(?:이번\s?주|금주)(?![가-힣])|"
                        r"이번\s?주(?=[에의는도로까엔랑만부동])"), _const("week", 0)),
    _Pattern(re.compile(_HB + r"(?:다음\s?주|담주)(?![가-힣])|"
                        r"다음\s?주(?=[에의는도로까엔랑만부동])"), _const("week", 1)),
    _Pattern(re.compile(_HB + r"(?:지난|저번)\s?달"), _const("month", -1)),
    _Pattern(re.compile(_HB + r"이번\s?달"), _const("month", 0)),
    _Pattern(re.compile(_HB + r"다음\s?달"), _const("month", 1)),
    _Pattern(re.compile(_HB + r"재작년"), _const("year", -2)),
    _Pattern(re.compile(_HB + r"(?:작년|지난\s?해)"), _const("year", -1)),
    _Pattern(re.compile(_HB + r"(?:올해|금년)"), _const("year", 0)),
    _Pattern(re.compile(_HB + r"내년"), _const("year", 1)),
    _Pattern(re.compile(_HB + r"(?:지난|최근|과거|"
                        r"요\s?몇)\s?(?P<n>" + KO_NUMBER_RE + r")\s?(?P<unit>일|주일|주|개월|달|년|시간)"
                        r"(?:\s?(?:동안|간))?"), _past),
    _Pattern(re.compile(r"(?<![가-힣0-9])(?P<n>" + KO_NUMBER_RE + r"|하루|이틀|사흘|나흘|닷새|엿새|이레)\s?"
                        r"(?P<unit>일|주일|주|개월|달|년|시간)?\s?전(?:(?![가-힣])|(?=에|의|쯤|까지|부터|만|도))"),
             lambda m, now: _ago_ko(m, now)),
    _Pattern(re.compile(_HB + r"며칠\s?전"), _fuzzy_few_days, fuzzy=True),
    _Pattern(re.compile(_CJK_BEFORE + r"(?P<y>" + _YEAR + r")\s?년\s?" + _JA_NUM_MONTH + r"\s?월\s?" + _JA_NUM_DAY
                        + r"\s?일"), _ja_date),
    _Pattern(re.compile(_CJK_BEFORE + r"(?P<y>" + _YEAR + r")\s?년\s?" + _JA_NUM_MONTH + r"\s?월"), _ja_month),
    _Pattern(re.compile(_CJK_BEFORE + r"(?P<y>" + _YEAR + r")\s?년(?!\s?(?:전|도|간))"), _year_only),
    _Pattern(re.compile(r"(?<![0-9년])" + _JA_NUM_MONTH + r"\s?월\s?" + _JA_NUM_DAY + r"\s?일"), _ja_date),
    _Pattern(re.compile(r"(?<![0-9년개])" + _JA_NUM_MONTH + r"\s?월(?![0-9일])"), _ja_month),
    _Pattern(re.compile(_NOT_ID_BEFORE + r"(?P<y>" + _YEAR + r")[-/.](?P<m>0?[1-9]|1[0-2])[-/.](?P<d>" + _DAYNUM
                        + r")" + _NOT_ID_AFTER), _iso_date),
    _Pattern(re.compile(r"(?:(?P<rel>지난\s?주|저번\s?주|이번\s?주|"
                        r"다음\s?주)\s?)?(?P<wd>[월화수목금토일])요일(?!\s?마다)"),
             _cjk_weekday(_KO_WD, {"지난주": -1, "저번주": -1, "이번주": 0, "다음주": 1})),
    _Pattern(re.compile(_HB + r"(?:지난번|저번에|저번|요전|얼마\s?전|최근|요즘|요새|"
                        r"일전에)"), _fuzzy_recent, fuzzy=True,
             vague=True),
    _Pattern(re.compile(_HB + r"(?:아까|방금|조금\s?전)"), _fuzzy_short, fuzzy=True, vague=True),
)


def _ago_ko(m: re.Match[str], now: datetime) -> cal.Range | None:
    n_word, unit = m.group("n"), m.group("unit")
    if n_word in KO_NATIVE_DAYS:
        if unit not in (None, "일"):
            return None
        return cal.day(now, -KO_NATIVE_DAYS[n_word])
    if unit is None:
        return None  # "3 전" is not a time
    return _ago(m, now)


PATTERNS: dict[str, tuple[_Pattern, ...]] = {"en": _EN, "ja": _JA, "ko": _KO}
# One cheap search decides whether a language's patterns can match at all: most messages have no time.
_TRIGGERS: dict[str, re.Pattern[str]] = {
    "en": re.compile(r"\d|day|night|tomorrow|morning|afternoon|evening|week|month|year|ago|jan|feb|mar|apr|may|"
                     r"jun|jul|aug|sep|oct|nov|dec|recent|"
                     r"lately|time|while|just\s+now|moment|minute", _I),
    "ja": re.compile(r"\d|[一二三四五六七八九十日週月年前今昨明来先本去頃間曜最近]|きのう|きょう|あした|あさって|"
                     r"おととい|おととし|ゆうべ|"
                     r"さっき|さきほど|こないだ|このあいだ|このごろ"),
    "ko": re.compile(r"\d|어제|어저께|어젯밤|엊저녁|그저께|그제|오늘|금일|내일|모레|주|달|해|년|월|요일|전|최근|"
                     r"요즘|요새|지난|저번|이번|"
                     r"다음|담주|작년|올해|금년|아까|방금|하루|이틀|사흘|나흘|며칠"),
}


def find_time_expressions(text: str, now: datetime, languages: frozenset[str]) -> list[TimeMatch]:
    """Every time expression of ``text`` in the given languages, left to right, longest first on overlap."""
    found: list[TimeMatch] = []
    for lang in ("en", "ja", "ko"):
        if lang not in languages or not _TRIGGERS[lang].search(text):
            continue
        for pattern in PATTERNS[lang]:
            for m in pattern.regex.finditer(text):
                try:
                    rng = pattern.resolve(m, now)
                except (ValueError, OverflowError):  # 31 February, year 10000: not a date
                    rng = None
                if rng is None:
                    continue
                found.append(TimeMatch(m.start(), m.end(), m.group(0).strip(), rng[0], rng[1], pattern.fuzzy,
                                       pattern.vague))
    found.sort(key=lambda t: (t.start, -(t.end - t.start)))
    kept: list[TimeMatch] = []
    last_end = -1
    for t in found:
        if t.start >= last_end:
            kept.append(t)
            last_end = t.end
    return kept


def combine(matches: list[TimeMatch]) -> TimeRange | None:
    """One range covering every expression ("from January to March" covers both months)."""
    if not matches:
        return None
    start = min(t.range_start for t in matches)
    end = max(t.range_end for t in matches)
    expression = " … ".join(t.surface for t in matches)
    return TimeRange(start, end, expression, fuzzy=all(t.fuzzy for t in matches))
