"""Helpers for tests (not fixtures): where the shared design docs and captures are."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path | None:
    """``../shared`` beside the project (or ``$JGPY_SHARED_DIR``); None when absent."""
    for cand in (os.environ.get("JGPY_SHARED_DIR"), ROOT.parent / "shared", "/work/shared"):
        if cand and Path(cand, "docs").is_dir():
            return Path(cand)
    return None


def shared_file(rel: str) -> Path | None:
    d = shared_dir()
    if d is None:
        if os.environ.get("CI", "").lower() == "true":
            raise FileNotFoundError(f"CI=true and ../shared/{rel} is missing (set JGPY_SHARED_DIR)")
        return None
    return d / rel
