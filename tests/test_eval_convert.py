"""`memroute eval convert`: each public source, in the shape its authors publish (tiny hand-written inputs),
converted and then read by memroute's own evaluation loaders."""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from memroute.cli import main
from memroute.errors import InputError
from memroute.eval.convert import intents, jmultiwoz, locomo, multiwoz, sgd
from memroute.eval.datasets import load_candidates, load_dialogues, load_intents, read_jsonl
from memroute.eval.locomo import load_locomo


def write(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def lines(path: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(path))


# ----------------------------------------------------------------------------------------------- LoCoMo
def locomo_sample(sid: str) -> dict[str, Any]:
    return {
        "sample_id": sid,
        "qa": [
            {"question": "Which town did Ada move to?", "answer": "Lisbon", "evidence": ["D1:2"], "category": 4},
            {"question": "What did Ada bake and when?", "answer": 2021, "evidence": ["D1:1; D2:1"], "category": 1},
            {"question": "What did Ben adopt?", "evidence": ["D:2:2", "D9:9", "D"], "category": 5,
             "adversarial_answer": "a parrot"},
            {"question": "Would Ada like a sailing trip?", "answer": "probably", "evidence": [], "category": 3},
        ],
        "conversation": {
            "speaker_a": "Ada", "speaker_b": "Ben",
            "session_1_date_time": "9:05 am on 3 March, 2022",
            "session_1": [
                {"speaker": "Ada", "dia_id": "D1:1", "text": "I baked rye bread this morning."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Nice! Did you settle in Lisbon yet?",
                 "img_url": ["http://example.invalid/x.jpg"], "blip_caption": "a photo of a loaf on a board",
                 "query": "bread"},
            ],
            "session_2_date_time": "6:40 pm on 10 March, 2022",
            "session_2": [
                {"speaker": "Ben", "dia_id": "D2:1", "text": "The rye was great."},
                {"speaker": "Ada", "dia_id": "D2:2", "text": "Ben, how is the new kitten?"},
            ],
        },
        "event_summary": {}, "observation": {}, "session_summary": {},
    }


def test_locomo_converts_and_loads(tmp_path: Path) -> None:
    src = write(tmp_path / "LoCoMo" / "data" / "locomo10.json", [locomo_sample("conv-1"), locomo_sample("conv-2")])
    stats = locomo.convert(src.parent.parent, tmp_path / "out", first=1)
    assert stats["conversations"] == 1 and stats["qa"] == 4 and stats["turns"] == 4
    qa = lines(tmp_path / "out" / "qa.jsonl")
    assert [q["evidence_resolved"] for q in qa] == [["D1:2"], ["D1:1", "D2:1"], ["D2:2"], []]
    assert qa[2]["evidence_unresolved"] == ["D9:9", "D"] and qa[2]["adversarial_answer"] == "a parrot"
    assert qa[1]["answer"] == 2021 and "adversarial_answer" not in qa[1]
    session = lines(tmp_path / "out" / "sessions.jsonl")[0]["sessions"][0]
    assert session["turns"][1]["img_caption"] == "a photo of a loaf on a board"

    [conv] = load_locomo(tmp_path / "out")
    assert conv.sample_id == "conv-1" and len(conv.turns) == 4
    assert conv.questions[0].evidence == ("conv-1:D1:2",)
    assert len(conv.questions) == 3  # the question without evidence is not scored
    assert "loaf" in conv.turns[1].text and conv.turns[2].at > conv.turns[1].at


def test_locomo_bad_input_names_the_file(tmp_path: Path) -> None:
    sample = locomo_sample("conv-1")
    del sample["conversation"]["session_2_date_time"]
    src = write(tmp_path / "locomo10.json", [sample])
    with pytest.raises(InputError, match=r"locomo10\.json: conv-1.*session_2_date_time"):
        locomo.convert(src, tmp_path / "out")
    with pytest.raises(InputError, match="expected a JSON list"):
        locomo.convert(write(tmp_path / "x.json", {"a": 1}), tmp_path / "out")
    sample = locomo_sample("conv-1")
    sample["qa"][0]["category"] = "single-hop"
    with pytest.raises(InputError, match=r"conv-1 qa\[0\]: 'category' should be a number"):
        locomo.convert(write(tmp_path / "y.json", [sample]), tmp_path / "out")


# ----------------------------------------------------------------------------------------------- SGD
def sgd_schema(*names: str) -> list[dict[str, Any]]:
    return [{"service_name": n, "description": f"{n} things",
             "slots": [{"name": "city", "description": "where", "is_categorical": False, "possible_values": []}],
             "intents": [{"name": f"Find{n}", "description": f"look for {n}", "is_transactional": False,
                          "required_slots": ["city"], "optional_slots": {}, "result_slots": ["city"]}]}
            for n in names]


def user(text: str, *services: tuple[str, str]) -> dict[str, Any]:
    return {"speaker": "USER", "utterance": text,
            "frames": [{"service": s, "slots": [], "actions": [],
                        "state": {"active_intent": i, "requested_slots": [], "slot_values": {}}} for s, i in services]}


def system(text: str, service: str) -> dict[str, Any]:
    return {"speaker": "SYSTEM", "utterance": text, "frames": [{"service": service, "slots": [], "actions": []}]}


def sgd_dialogue(did: str) -> dict[str, Any]:
    return {"dialogue_id": did, "services": ["Cafes_1", "Taxis_1"], "turns": [
        user("Any cafe open late in Oslo?", ("Cafes_1", "FindCafes_1")),
        system("Night Owl is open until two.", "Cafes_1"),
        user("Great. And a cab there?", ("Taxis_1", "FindTaxis_1"), ("Cafes_1", "NONE")),
        system("A cab can be there in five minutes.", "Taxis_1"),
    ]}


def test_sgd_converts_samples_and_loads(tmp_path: Path) -> None:
    repo = tmp_path / "sgd"
    write(repo / "train" / "schema.json", sgd_schema("Cafes_1", "Taxis_1"))
    write(repo / "train" / "dialogues_001.json", [sgd_dialogue(f"1_{i:05d}") for i in range(5)])
    write(repo / "dev" / "schema.json", sgd_schema("Taxis_1", "Boats_1"))
    write(repo / "dev" / "dialogues_002.json", [sgd_dialogue("2_00001"), sgd_dialogue("2_00000")])
    stats = sgd.convert(repo, tmp_path / "out", train_sample=3, seed=13)
    assert stats["train"]["dialogues"] == 3 and stats["dev"] == {"files": 1, "dialogues": 2, "records": 4}
    dev = lines(tmp_path / "out" / "dev.jsonl")
    assert [r["dialogue_id"] for r in dev] == ["2_00001", "2_00001", "2_00000", "2_00000"]  # file order
    assert dev[1]["gold_services"] == ["Cafes_1", "Taxis_1"] and dev[1]["turn_idx"] == 2
    assert dev[1]["gold_active_intents"] == {"Taxis_1": "FindTaxis_1", "Cafes_1": "NONE"}
    assert [h["speaker"] for h in dev[1]["history"]] == ["USER", "SYSTEM"]
    train_ids = [r["dialogue_id"] for r in lines(tmp_path / "out" / "train.jsonl")]
    assert train_ids == sorted(train_ids) and len(set(train_ids)) == 3

    services = {s["name"]: s["splits"] for s in lines(tmp_path / "out" / "services.jsonl")}
    assert services == {"Cafes_1": ["train"], "Taxis_1": ["train", "dev"], "Boats_1": ["dev"]}
    dialogues = load_dialogues(tmp_path / "out" / "dev.jsonl")
    assert dialogues[0].turns[1].gold == ("Cafes_1", "Taxis_1")
    assert dialogues[0].turns[1].system_before == "Night Owl is open until two."
    assert {a.id for a in load_candidates(tmp_path / "out" / "services.jsonl", split="dev")} == {"Taxis_1", "Boats_1"}


def test_sgd_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="has no dialogues_"):
        sgd.convert(tmp_path, tmp_path / "out", splits=("dev",))
    bad = sgd_dialogue("1_00000")
    del bad["turns"][0]["frames"]
    write(tmp_path / "dev" / "schema.json", sgd_schema("Cafes_1"))
    write(tmp_path / "dev" / "dialogues_001.json", [bad])
    with pytest.raises(InputError, match=r"dialogues_001\.json: dialogue 1_00000 turn 0: no 'frames'"):
        sgd.convert(tmp_path, tmp_path / "out", splits=("dev",))


# ----------------------------------------------------------------------------------------------- MultiWOZ
def mwoz_schema() -> list[dict[str, Any]]:
    return [{"service_name": d, "description": f"{d} help", "slots": [{"name": f"{d}-area", "description": "area",
                                                                    "is_categorical": False}],
             "intents": [{"name": f"find_{d}", "description": f"find a {d}", "is_transactional": False}]}
            for d in ("hotel", "taxi", "train")]


def belief(**domains: dict[str, str]) -> dict[str, Any]:
    return {d: {"book": {"booked": [], "people": ""}, "semi": {"area": "not mentioned", **domains.get(d, {})}}
            for d in ("hotel", "taxi", "train")}


def test_multiwoz_log_shape_converts_and_loads(tmp_path: Path) -> None:
    log = [
        {"text": "I need a hotel in the north.", "metadata": {}, "dialog_act": {"Hotel-Inform": [["Area", "north"]]}},
        {"text": "Two options there.", "metadata": belief(hotel={"area": "north"}), "dialog_act": {}},
        {"text": "Fine, thanks. Also a cab at five.", "metadata": {},
         "dialog_act": {"general-thank": [["none", "none"]]}},
        {"text": "Booked.", "metadata": belief(hotel={"area": "north"}, taxi={"area": "north"}), "dialog_act": {}},
    ]
    data = {"MUL0002.json": {"goal": {}, "log": log}, "MUL0001.json": {"goal": {}, "log": log[:2]},
            "SNG0009.json": {"goal": {}, "log": log[:2]}}
    archive = tmp_path / "val.json.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("val.json", json.dumps(data))
    (tmp_path / "valList.txt").write_text("MUL0001.json\nMUL0002.json\n", encoding="utf-8")
    schema = write(tmp_path / "MultiWOZ_2.2" / "schema.json", mwoz_schema())
    stats = multiwoz.convert(archive, tmp_path / "out", schema=tmp_path, ids=tmp_path / "valList.txt")
    assert stats["dialogues"] == 2 and stats["services"] == 3 and schema.is_file()
    recs = lines(tmp_path / "out" / "dev.jsonl")
    assert [r["dialogue_id"] for r in recs] == ["MUL0001", "MUL0002", "MUL0002"]
    assert recs[1]["gold_domains"] == ["hotel"] and recs[1]["user_acts"] == ["Hotel-Inform"]
    assert recs[2]["act_domains"] == [] and recs[2]["state_domains"] == ["taxi"] and recs[2]["gold_domains"] == ["taxi"]
    [_, d2] = load_dialogues(tmp_path / "out" / "dev.jsonl")
    assert d2.turns[1].system_before == "Two options there." and d2.turns[1].gold == ("taxi",)
    assert [a.id for a in load_candidates(tmp_path / "out" / "services.jsonl")] == ["hotel", "taxi", "train"]


def test_multiwoz_bad_input(tmp_path: Path) -> None:
    schema = write(tmp_path / "schema.json", [{"service_name": "hotel", "slots": [], "intents": []}])
    with pytest.raises(InputError, match=r"schema\.json: service 0: no 'description'"):
        multiwoz.convert(write(tmp_path / "val.json", {}), tmp_path / "out", schema=schema)
    write(tmp_path / "schema.json", mwoz_schema())
    with pytest.raises(InputError, match=r"val\.json: MUL0001: no 'log'"):
        multiwoz.convert(write(tmp_path / "val.json", {"MUL0001": {"goal": {}}}), tmp_path / "out", schema=schema)
    with pytest.raises(InputError, match="no dialogues to convert"):
        multiwoz.convert(write(tmp_path / "val.json", {}), tmp_path / "out", schema=schema)


def test_multiwoz_22_folder(tmp_path: Path) -> None:
    def frame(service: str, values: dict[str, list[str]]) -> dict[str, Any]:
        return {"service": service, "actions": [], "slots": [],
                "state": {"active_intent": "NONE", "requested_slots": [], "slot_values": values}}

    turns = [
        {"turn_id": "0", "speaker": "USER", "utterance": "A train to Ely, please.",
         "frames": [frame("train", {"train-destination": ["ely"]}), frame("hotel", {})]},
        {"turn_id": "1", "speaker": "SYSTEM", "utterance": "What day?", "frames": []},
        {"turn_id": "2", "speaker": "USER", "utterance": "Friday. Is there a hotel near the station?",
         "frames": [frame("train", {"train-destination": ["ely"], "train-day": ["friday"]}), frame("hotel", {})]},
    ]
    write(tmp_path / "dev" / "dialogues_001.json", [{"dialogue_id": "PMUL0100.json", "services": [], "turns": turns}])
    write(tmp_path / "dialog_acts.json", {"PMUL0100.json": {"0": {"dialog_act": {"Train-Inform": []}},
                                                            "2": {"dialog_act": {"Hotel-Request": []}}}})
    write(tmp_path / "schema.json", mwoz_schema())
    multiwoz.convert(tmp_path / "dev", tmp_path / "out", schema=tmp_path / "schema.json")
    recs = lines(tmp_path / "out" / "dev.jsonl")
    assert [r["gold_domains"] for r in recs] == [["train"], ["hotel", "train"]]
    assert recs[1]["act_domains"] == ["hotel"] and recs[1]["state_domains"] == ["train"]
    assert load_dialogues(tmp_path / "out" / "dev.jsonl")[0].dialogue_id == "PMUL0100"


# ----------------------------------------------------------------------------------------------- JMultiWOZ-TC
def test_jmultiwoz_converts_splits_and_loads(tmp_path: Path) -> None:
    inputs, ground = [], []
    for k in range(8):
        did = f"dialogue_{k:04d}"
        msgs: list[dict[str, Any]] = [{"role": "system", "content": "あなたは旅行の案内係です。"}]
        for n, (text, calls) in enumerate([("札幌でホテルを探しています。", [{"name": "Search_hotel",
                                                                             "arguments": {"city": "札幌"}}]),
                                            ("ありがとう。天気も教えて。", [{"name": "Search_weather",
                                                                          "arguments": {"city": "札幌"}}]),
                                            ("", [])]):  # an empty user turn stays a turn
            msgs = [*msgs, {"role": "user", "content": text}]
            inputs.append({"data_id": f"jmultiwoz_tc_{k}_turn_{n}", "dialogue_id": did, "question": msgs})
            ground.append({"data_id": f"jmultiwoz_tc_{k}_turn_{n}", "dialogue_id": did, "ground_truth": calls})
            msgs = [*msgs, {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function"}]},
                    {"role": "tool", "tool_call_id": "1", "content": "{}"},
                    {"role": "assistant", "content": f"承知しました（{n}）。"}]
    folder = tmp_path / "JMultiWOZ-TC"
    folder.mkdir()
    (folder / "jmultiwoz_tc_input.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in inputs))
    (folder / "jmultiwoz_tc_ground.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ground))
    write(folder / "tools.json", [{"type": "function", "function": {
        "name": name, "description": f"{name}の説明", "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "都市"}}, "required": ["city"]}}}
        for name in ("Search_hotel", "Booking_hotel", "Search_weather")])
    stats = jmultiwoz.convert(folder, tmp_path / "out", test_dialogues=2, dev_dialogues=2, train_sample=3)
    assert stats["dev"] == {"dialogues": 2, "records": 6} and stats["train"]["dialogues"] == 3
    dev = lines(tmp_path / "out" / "dev.jsonl")
    assert dev[1]["history"] == [{"speaker": "USER", "utterance": "札幌でホテルを探しています。"},
                                 {"speaker": "SYSTEM", "utterance": "承知しました（0）。"}]
    assert [r["gold_domains"] for r in dev[:3]] == [["hotel"], ["weather"], []] and dev[1]["turn_idx"] == 2
    assert dev[2]["utterance"] == "" and len(dev[2]["history"]) == 4
    dev_ids = {r["dialogue_id"] for r in dev}
    assert not dev_ids & {r["dialogue_id"] for r in lines(tmp_path / "out" / "train.jsonl")}
    dialogues = load_dialogues(tmp_path / "out" / "dev.jsonl")
    assert dialogues[0].turns[2].gold == () and dialogues[0].turns[1].system_before == "承知しました（0）。"
    agents = {a.id: a.tools for a in load_candidates(tmp_path / "out" / "tools.jsonl")}
    assert agents == {"hotel": ("Search_hotel", "Booking_hotel"), "weather": ("Search_weather",)}


def test_jmultiwoz_missing_ground_truth(tmp_path: Path) -> None:
    (tmp_path / "jmultiwoz_tc_input.jsonl").write_text(json.dumps(
        {"data_id": "x_turn_0", "dialogue_id": "d", "question": [{"role": "user", "content": "こんにちは"}]}) + "\n")
    (tmp_path / "jmultiwoz_tc_ground.jsonl").write_text("")
    write(tmp_path / "tools.json", [])
    with pytest.raises(InputError, match="no ground truth for x_turn_0"):
        jmultiwoz.convert(tmp_path, tmp_path / "out")


# ----------------------------------------------------------------------------------------------- intents
def test_clinc150_converts_and_loads(tmp_path: Path) -> None:
    data = {"train": [["wake me at six", "alarm"], ["what is my balance", "balance"]],
            "val": [["set an alarm for noon", "alarm"]], "test": [["balance please", "balance"]],
            "oos_train": [["who won the derby", "oos"]], "oos_val": [["sing me a song", "oos"]],
            "oos_test": [["how tall is a giraffe", "oos"]]}
    write(tmp_path / "data" / "data_full.json", data)
    write(tmp_path / "data" / "domains.json", {"banking": ["balance"], "utility": ["alarm"]})
    stats = intents.clinc150(tmp_path, tmp_path / "out")
    assert stats["train"] == 3 and stats["dev"] == 2 and not (tmp_path / "out" / "test.jsonl").exists()
    train = lines(tmp_path / "out" / "train.jsonl")
    assert train[2] == {"id": "oos_train-0", "text": "who won the derby", "label": "oos", "domain": "oos"}
    assert lines(tmp_path / "out" / "labels.jsonl") == [{"label": "balance", "domain": "banking"},
                                                       {"label": "alarm", "domain": "utility"}]
    assert [e.label for e in load_intents(tmp_path / "out" / "dev.jsonl")] == ["alarm", "oos"]
    intents.clinc150(tmp_path / "data" / "data_full.json", tmp_path / "out2", with_test=True)
    assert len(load_intents(tmp_path / "out2" / "test.jsonl")) == 2


def test_banking77_and_kochat(tmp_path: Path) -> None:
    def csv_file(path: Path, header: list[str], rows: list[list[str]]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="") as fh:
            csv.writer(fh).writerows([header, *rows])

    csv_file(tmp_path / "bank" / "banking_data" / "train.csv", ["text", "category"],
             [["my card has not come, is that normal?", "card_arrival"], ["top up failed, why", "top_up_failed"],
              ["still no card after a week", "card_arrival"]])
    intents.banking77(tmp_path / "bank", tmp_path / "b")
    assert [e.label for e in load_intents(tmp_path / "b" / "train.jsonl")] == ["card_arrival", "top_up_failed",
                                                                              "card_arrival"]
    assert lines(tmp_path / "b" / "labels.jsonl") == [{"label": "card_arrival"}, {"label": "top_up_failed"}]

    data = tmp_path / "kochat" / "demo" / "data"
    csv_file(data / "raw" / "weather.csv", ["question", "label"],
             [["내일 부산 날씨 어때", "S-DATE S-LOCATION O O"], ["내일 부산 날씨 어때", "S-DATE S-LOCATION O O"],
              ["주말에 비 와", "S-DATE O O"], ["서울 기온 알려줘", "S-LOCATION O O"]])
    csv_file(data / "ood" / "ood_data.csv", ["question", "label"],
             [["노래 틀어줘", "OOD"], ["심심해", "OOD"], [" 심심해", "OOD"]])
    stats = intents.kochat(tmp_path / "kochat", tmp_path / "k", holdout=0.2, with_test=True)
    assert stats["examples_dedup_text_label"] == 6 and stats["dev"] == 5 and stats["test_holdout"] == 1
    dev = load_intents(tmp_path / "k" / "dev.jsonl")  # texts as published: " 심심해" is not "심심해"
    assert {e.label for e in dev} <= {"weather", "OOD"} and len({e.text for e in dev}) == 5
    assert lines(tmp_path / "k" / "labels.jsonl") == [{"label": "OOD"}, {"label": "weather"}]
    with pytest.raises(InputError, match="no column category"):
        csv_file(tmp_path / "bad" / "train.csv", ["text", "intent"], [["hi", "x"]])
        intents.banking77(tmp_path / "bad", tmp_path / "b2")


def test_cli_convert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write(tmp_path / "locomo10.json", [locomo_sample("conv-7")])
    assert main(["eval", "convert", "locomo", str(src), str(tmp_path / "out")]) == 0
    assert "locomo: wrote" in capsys.readouterr().out and (tmp_path / "out" / "stats.json").is_file()
    assert main(["eval", "convert", "sgd", str(tmp_path / "nowhere"), str(tmp_path / "o")]) == 1
    assert "nowhere" in capsys.readouterr().err
