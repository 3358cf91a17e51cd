"""The service's JSON encoder (`memroute.service.errors.Json`): the bytes of every kind of answer."""

from __future__ import annotations

import datetime as dt
import enum

import numpy as np
import orjson

from memroute.memory import Memory
from memroute.service.errors import Json


class Colour(enum.Enum):
    RED = "red"


def test_keys_that_are_not_strings_are_written_as_strings() -> None:
    when = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC)
    # a time or an enum as a key: orjson's option for keys that are not strings (the standard library refuses them)
    assert Json({when: 1, Colour.RED: [2], "s": {3: None}}).body == \
        b'{"2026-11-26T12:00:00+00:00":1,"red":[2],"s":{"3":null}}'
    assert Json({1: "one", 2.5: "x", None: True}).body == b'{"1":"one","2.5":"x","null":true}'


def test_values_orjson_refuses_go_through_the_standard_library() -> None:
    assert Json({"n": 2**70, 7: "seven"}).body == b'{"n":1180591620717411303424,"7":"seven"}'
    assert Json({"nan": float("nan"), "np": np.float32(0.5), "t": (1, 2)}).body == b'{"nan":null,"np":0.5,"t":[1,2]}'


def test_a_recall_with_its_trace_is_encoded_as_with_the_option_for_every_key() -> None:
    with Memory.open("sqlite://:memory:", owner="u") as mem:
        mem.remember_many([{"text": f"note {i}: the violet umbrella is at desk {i}", "session": f"s{i % 3}"}
                           for i in range(40)])
        answer = mem.recall("where is the violet umbrella?").to_dict(trace=True)
    assert answer["trace"]["candidates"]
    assert Json(answer).body == orjson.dumps(
        answer, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
