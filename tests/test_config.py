"""Settings precedence: defaults < memroute.toml < MEMROUTE_* environment < explicit arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from memroute import ConfigError, Settings


def test_precedence(tmp_path: Path) -> None:
    cfg = tmp_path / "memroute.toml"
    cfg.write_text('store = "sqlite:///from-file.db"\nowner = "file-owner"\nembed_cache_size = 10\n')
    assert Settings.load(cfg, env={}).store == "sqlite:///from-file.db"
    s = Settings.load(cfg, env={"MEMROUTE_OWNER": "env-owner", "MEMROUTE_EMBED_CACHE_SIZE": "20"})
    assert (s.owner, s.embed_cache_size, s.store) == ("env-owner", 20, "sqlite:///from-file.db")
    s = Settings.load(cfg, env={"MEMROUTE_OWNER": "env-owner"}, owner="arg-owner")
    assert s.owner == "arg-owner"
    assert Settings.load(env={}).embedder == "use-m3"


def test_memroute_table_and_env_config_path(tmp_path: Path) -> None:
    cfg = tmp_path / "other.toml"
    cfg.write_text('[memroute]\nowner = "tabled"\n')
    assert Settings.load(env={"MEMROUTE_CONFIG": str(cfg)}).owner == "tabled"


@pytest.mark.parametrize("content, match", [
    ("owner = ", "not valid TOML"),
    ('colour = "blue"', "unknown setting"),
    ("embed_cache_size = 'many'", "whole number"),
])
def test_bad_config_is_clear(tmp_path: Path, content: str, match: str) -> None:
    cfg = tmp_path / "memroute.toml"
    cfg.write_text(content)
    with pytest.raises(ConfigError, match=match):
        Settings.load(cfg, env={})


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Settings.load(env={"MEMROUTE_CONFIG": str(tmp_path / "nope.toml")})
