"""The Japanese and Korean additive particle as an "also" cue, read from the morphology (hand-written phrases)."""

from __future__ import annotations

import pytest

from memroute.routing.cues import additive_particle, read_cues


@pytest.mark.parametrize("text", [
    "駅の近くでレストランも探しているのですが",  # noun + も
    "ホテルにも駐車場はありますか",  # noun + case particle + も
    "날씨도 알려 줘",  # noun + 도
    "호텔에도 주차장이 있나요",  # noun + case particle + 도
])
def test_a_noun_marked_with_the_additive_particle_adds_a_task(text: str) -> None:
    assert additive_particle(text)
    assert read_cues(text, None).also


@pytest.mark.parametrize("text", [
    "何もいりません",  # "nothing": after a pronoun
    "行ってもいいですか",  # concession: after a verb
    "いつもありがとう",  # part of "always"
    "아무도 없어",  # "nobody"
    "온도가 몇 도야",  # 도 as a noun (degrees), not a particle
    "커피라도 마실까",  # another particle ending in 도
    "I need a hotel too much",  # not Japanese or Korean: the English rules decide
])
def test_the_same_characters_elsewhere_are_no_cue(text: str) -> None:
    assert not additive_particle(text)
