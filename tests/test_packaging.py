"""The wheel holds every package the code imports (restore.subsystems and restore.sources
were once left out by a plain package list: `sessiond` from the wheel could not resume)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

REPO = Path(__file__).resolve().parent.parent


def test_the_wheel_includes_every_subpackage() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    packaged = set(find_packages(REPO, include=config["packages"]["find"]["include"]))
    on_disk = {
        ".".join(path.parent.relative_to(REPO).parts)
        for top in ("protocol", "restore", "server")
        for path in (REPO / top).rglob("__init__.py")
    }
    assert {"restore.subsystems", "restore.sources"} <= on_disk
    assert on_disk <= packaged
