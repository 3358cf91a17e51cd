"""Agent catalogues: formats, round trips, errors with line and column, content versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from memroute.errors import CatalogueError, InputError
from memroute.routing import agent_version, dump_catalogue, load_catalogue, parse_catalogue, save_catalogue
from memroute.routing.agents import capabilities, check_agents
from memroute.types import Agent, AgentStatus

TOML = """
[[agents]]
id = "translate"
name = "Translator"
description = "Translates text between English, Japanese and Korean"
keywords = ["translate", "翻訳"]
examples = ["How do you say hello in French?"]
threshold = 0.4

[[agents]]
id = "review"
description = "Reviews source code"
tools = ["run_linter"]
status = "idle"
capabilities = ["Find bugs in a pull request", "Suggest faster code"]
"""


def test_toml_loads_every_field(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(TOML, encoding="utf-8")
    agents = load_catalogue(path)
    assert [a.id for a in agents] == ["translate", "review"]
    assert agents[0].keywords == ("translate", "翻訳") and agents[0].threshold == 0.4
    assert agents[1].name == "review"  # name defaults to the id
    assert agents[1].status is AgentStatus.IDLE and agents[1].tools == ("run_linter",)
    assert capabilities(agents[1]) == ("Find bugs in a pull request", "Suggest faster code")


@pytest.mark.parametrize("fmt", ["toml", "yaml", "json"])
def test_round_trip_loses_nothing(tmp_path: Path, fmt: str) -> None:
    agents = parse_catalogue(TOML, "toml")
    path = tmp_path / f"agents.{fmt}"
    save_catalogue(agents, path)
    again = load_catalogue(path)
    assert again == agents
    assert [agent_version(a) for a in again] == [agent_version(a) for a in agents]


@pytest.mark.parametrize(("fmt", "text", "where"), [
    ("toml", '[[agents]]\nid = "a"\nname = "x\n', "line 3"),
    ("json", '{"agents": [\n  {"id": "a",}\n]}', "line 2, column"),
    ("yaml", "agents:\n  - id: a\n    name: [unclosed\n", "line"),
])
def test_syntax_errors_say_line_and_column(fmt: str, text: str, where: str) -> None:
    with pytest.raises(CatalogueError) as info:
        parse_catalogue(text, fmt, "agents." + fmt)
    message = str(info.value)
    assert where in message and "column" in message and f"agents.{fmt}" in message


def test_duplicate_ids_and_bad_fields_are_clear_errors() -> None:
    with pytest.raises(CatalogueError, match="duplicate agent id 'a'"):
        parse_catalogue('[[agents]]\nid = "a"\n[[agents]]\nid = "a"\n', "toml")
    with pytest.raises(CatalogueError, match="unknown field"):
        parse_catalogue('[[agents]]\nid = "a"\ncolour = "red"\n', "toml")
    with pytest.raises(CatalogueError, match="non-empty id"):
        parse_catalogue('[[agents]]\nname = "no id"\n', "toml")
    with pytest.raises(CatalogueError, match="status must be one of"):
        parse_catalogue('[[agents]]\nid = "a"\nstatus = "asleep"\n', "toml")
    with pytest.raises(CatalogueError, match="no agents"):
        parse_catalogue("", "toml")
    with pytest.raises(InputError, match="duplicate"):
        check_agents([Agent("x", "x"), Agent("x", "y")])


def test_missing_file_and_unknown_suffix(tmp_path: Path) -> None:
    with pytest.raises(CatalogueError, match="does not exist"):
        load_catalogue(tmp_path / "none.toml")
    with pytest.raises(CatalogueError, match="suffix"):
        load_catalogue(tmp_path / "agents.txt")


def test_version_follows_content_not_usage() -> None:
    a = Agent("a", "A", "Books hotel rooms")
    assert agent_version(a) == agent_version(Agent("a", "A", "Books hotel rooms", usage_count=9,
                                                   status=AgentStatus.IDLE))
    assert agent_version(a) != agent_version(Agent("a", "A", "Books hotel rooms and flights"))


def test_dump_is_compact() -> None:
    text = dump_catalogue([Agent("a", "a")], "json")
    assert '"input_types"' not in text and '"status"' not in text
