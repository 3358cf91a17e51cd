"""NL→symbol consistency (seed 002): does a phrase of the request name the same thing as a code symbol?

Seed 002's ``is_related``, extended: identifiers are split into words (``LoginService`` → login,
service; ``validate_password`` → validate, password; ``auth.LoginService.authenticate()``), the phrase is
folded (NFKC, case), and the two are related when a word of one is a word of the other (or shares a long
prefix with it: authenticate ~ authentication), or when both name one concept of a small multilingual
table (ログイン ~ 로그인 ~ login ~ sign in). The table also expands searches (:func:`expansion_terms`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

CONCEPTS: dict[str, tuple[str, ...]] = {
    "login": ("login", "log in", "logon", "signin", "sign in", "ログイン", "サインイン", "로그인"),
    "logout": ("logout", "log out", "signout", "sign out", "ログアウト", "로그아웃"),
    "auth": ("auth", "authentication", "authenticate", "authorize", "認証", "인증"),
    "register": ("register", "registration", "signup", "sign up", "登録", "新規登録", "가입", "등록"),
    "user": ("user", "account", "member", "ユーザー", "ユーザ", "アカウント", "会員", "사용자", "유저", "계정", "회원"),
    "password": ("password", "passwd", "pwd", "パスワード", "暗証番号", "비밀번호", "암호"),
    "error": ("error", "exception", "fail", "failure", "エラー", "例外", "失敗", "에러", "오류", "예외", "실패"),
    "validate": ("validate", "validation", "validator", "verify", "check", "検証", "チェック", "バリデーション",
                 "검증", "확인", "유효성"),
    "empty": ("empty", "blank", "missing", "空", "未入力", "空欄", "빈", "비어", "공백"),
    "session": ("session", "セッション", "세션"),
    "token": ("token", "トークン", "토큰"),
    "search": ("search", "find", "lookup", "検索", "검색"),
    "setting": ("setting", "settings", "config", "configuration", "設定", "설정"),
    "save": ("save", "store", "persist", "保存", "저장"),
    "delete": ("delete", "remove", "削除", "삭제"),
    "update": ("update", "edit", "更新", "編集", "수정", "갱신"),
    "payment": ("payment", "pay", "billing", "charge", "決済", "支払", "결제", "지불"),
    "cart": ("cart", "basket", "カート", "장바구니"),
    "order": ("order", "注文", "주문"),
    "notification": ("notification", "notify", "alert", "通知", "알림"),
    "mail": ("mail", "email", "メール", "메일", "이메일"),
    "upload": ("upload", "アップロード", "업로드"),
    "download": ("download", "ダウンロード", "다운로드"),
    "cache": ("cache", "キャッシュ", "캐시"),
    "database": ("database", "db", "データベース", "데이터베이스"),
    "button": ("button", "ボタン", "버튼"),
    "screen": ("screen", "page", "view", "画面", "ページ", "화면", "페이지"),
    "display": ("display", "show", "render", "表示", "표시"),
    "profile": ("profile", "プロフィール", "프로필"),
    "permission": ("permission", "role", "access", "権限", "권한"),
    "date": ("date", "time", "日付", "日時", "時刻", "날짜", "시간"),
    "file": ("file", "ファイル", "파일"),
    "image": ("image", "picture", "photo", "画像", "写真", "이미지", "사진"),
    "report": ("report", "レポート", "報告", "보고서"),
    "route": ("route", "router", "routing", "ルーティング", "라우팅"),
    "memory": ("memory", "recall", "記憶", "メモリ", "기억", "메모리"),
    "translate": ("translate", "translation", "translator", "翻訳", "번역"),
    "schedule": ("schedule", "calendar", "予定", "スケジュール", "カレンダー", "일정", "캘린더"),
    "price": ("price", "cost", "amount", "価格", "料金", "金額", "가격", "금액"),
    "test": ("test", "テスト", "테스트"),
    "log": ("log", "logging", "logger"),  # not ログ / 로그: they begin ログイン / 로그인
}

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_LATIN_WORD = re.compile(r"[a-z][a-z0-9]*")
_MIN_PREFIX = 5


def fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def split_identifier(symbol: str) -> list[str]:
    """``LoginService.authenticate()`` → ``["login", "service", "authenticate"]``; HTTPServer → http, server."""
    words: list[str] = []
    for part in re.split(r"[^0-9A-Za-z]+", unicodedata.normalize("NFKC", symbol)):
        words.extend(w.lower() for w in _CAMEL.findall(part))
    return words


def _latin_words(text: str) -> list[str]:
    """Words of a phrase: its latin words (identifiers in it split too)."""
    words: list[str] = []
    for raw in re.findall(r"[0-9A-Za-z_]+", unicodedata.normalize("NFKC", text)):
        words.extend(split_identifier(raw))
    return words


def _has_term(folded: str, words: Sequence[str], term: str) -> bool:
    if not term.isascii():
        return term in folded
    if " " in term:
        return term in " ".join(words)
    return any(w == term or (len(term) >= 4 and w.startswith(term)) for w in words)


def concepts_of(text: str) -> set[str]:
    """The concepts a phrase or an identifier names (ログイン機能 → login; validate_password → validate, password)."""
    folded = fold(text)
    words = _latin_words(text)
    return {name for name, terms in CONCEPTS.items() if any(_has_term(folded, words, t) for t in terms)}


def _same_word(a: str, b: str) -> bool:
    if a == b:
        return True
    if min(len(a), len(b)) < _MIN_PREFIX:
        return False
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common >= _MIN_PREFIX


def is_related(nl_term: str, symbol: str) -> bool:
    """True when the natural-language phrase and the code symbol name the same thing (seed 002)."""
    if not nl_term or not symbol:
        return False
    nl, sym = fold(nl_term), fold(symbol)
    if (len(sym) >= 3 and sym in nl) or (len(nl) >= 3 and nl in sym):
        return True
    sym_words = [w for w in split_identifier(symbol) if len(w) >= 3]
    nl_words = [w for w in _latin_words(nl_term) if len(w) >= 3]
    if any(_same_word(a, b) for a in nl_words for b in sym_words):
        return True
    return bool(concepts_of(nl_term) & concepts_of(symbol))


def related_symbols(nl_term: str, symbols: Iterable[str]) -> list[str]:
    return [s for s in symbols if is_related(nl_term, s)]


def expansion_terms(text: str) -> list[str]:
    """English words of the concepts ``text`` names, to add to a keyword search (ログイン → login, signin...)."""
    out: list[str] = []
    for concept in sorted(concepts_of(text)):
        out.extend(t for t in CONCEPTS[concept] if t.isascii() and " " not in t)
    return out
