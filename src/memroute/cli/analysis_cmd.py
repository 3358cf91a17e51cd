"""`memroute analyze`, `memroute eval analysis`, `memroute bench analysis` (filled in by the analysis work)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any, groups: dict[str, Any]) -> None:
    del sub, groups


def _unused(args: argparse.Namespace) -> int:
    return 0
