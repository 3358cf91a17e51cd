"""Stop words: function words that carry no topic. Kept short on purpose: BM25's IDF does the rest."""

from __future__ import annotations

ENGLISH_STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here
    here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
    let's me more most mustn't my myself no nor not of off on once only or other ought our ours ourselves
    out over own same shan't she she'd she'll she's should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this those through
    to too under until up very was wasn't we we'd we'll we're we've were weren't what what's when when's
    where where's which while who who's whom why why's with won't would wouldn't you you'd you'll you're
    you've your yours yourself yourselves also just now s t will""".split()
)

# UniDic lemmas (dictionary forms) of Japanese function-like content words.
JAPANESE_STOP_LEMMAS = frozenset(
    """する 為る 居る いる ある 有る なる 成る できる 出来る 言う いう 思う 事 こと もの 物 ところ 所 よう 様
    ため 為 の ん さん これ 此れ それ 其れ あれ 彼れ どれ 何れ""".split()
)

# mecab-ko stems of Korean function-like verbs and nouns.
KOREAN_STOP_STEMS = frozenset("하 되 있 없 않 이 그 저 것 수 등 때 거".split())
