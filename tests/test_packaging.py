"""What `pip install .` installs: every package of the checkout, and nothing of the tests.

The wheel is built from a copy of the files git would commit (tracked and new, not
ignored), so a build never leaves `build/` or `*.egg-info` in the worktree; pip builds
it as it would for a user, in an isolated environment with the declared setuptools (its
wheel fetched before the run, tests/support/fetched.py: the run itself has no network; the
check of the find configuration alone needs none). The full install-and-run check (a
fresh virtualenv outside the checkout, the README's "Try it" block) runs in `.ci/run`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from setuptools import find_packages

from tests.support import fetched
from tests.support.rpc_client import REPO

NOT_SHIPPED = ("tests", "bench", "vscode-extension")


def _checkout_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (REPO / name).is_file()]


def _packages(files: list[str]) -> set[str]:
    """Every importable package of the checkout, as a dotted name."""
    return {
        ".".join(Path(name).parent.parts)
        for name in files
        if Path(name).name == "__init__.py" and Path(name).parts[0] not in NOT_SHIPPED
    }


def _build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    for name in _checkout_files():
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    out = tmp_path / "dist"
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(fetched.build_backend())}
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        env={**os.environ, **offline},
    )
    (wheel,) = out.glob("sessiond-*.whl")
    return wheel


def test_wheel_holds_every_package_and_the_schema(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    shipped = set(zipfile.ZipFile(wheel).namelist())
    packages = _packages(_checkout_files())
    assert {"protocol", "restore", "restore.engine.subsystems", "restore.sources", "restore.stores",
            "server"} <= packages  # fmt: skip
    missing = {p for p in packages if f"{p.replace('.', '/')}/__init__.py" not in shipped}
    assert not missing, f"packages left out of the wheel: {sorted(missing)}"
    assert "protocol/schema.json" in shipped  # package data: clients read it from the install
    # The PostgreSQL store applies its migrations from the install (stores/postgres/schema.py).
    assert "restore/stores/postgres/migrations/001_initial.sql" in shipped
    assert any(name.endswith("LICENSE") and ".dist-info/" in name for name in shipped)
    strays = {name.split("/")[0] for name in shipped} & set(NOT_SHIPPED)
    assert not strays, f"the wheel would install top-level {sorted(strays)}"


def test_license_is_mit_as_declared_and_ships_with_the_extension() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == {"text": "MIT"}
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert (REPO / "vscode-extension" / "LICENSE").read_text() == text  # vsce packages it
    assert json.loads((REPO / "vscode-extension" / "package.json").read_text())["license"] == "MIT"


def test_pytest_starts_without_deprecation_warnings() -> None:
    """pytest-asyncio warns at start-up while `asyncio_default_fixture_loop_scope` is unset;
    as an error here, so a new warning of the test set-up is seen, not scrolled past."""
    run = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-m", "pytest", "-q",
         "-p", "no:cacheprovider", "tests/test_framing.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_find_configuration_includes_every_subpackage() -> None:
    """restore.subsystems and restore.sources were once left out by a plain package list:
    `sessiond` from the wheel could not resume. Checked without building anything."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    packaged = set(find_packages(REPO, include=config["packages"]["find"]["include"]))
    on_disk = {
        ".".join(path.parent.relative_to(REPO).parts)
        for top in ("protocol", "restore", "server")
        for path in (REPO / top).rglob("__init__.py")
    }
    assert {"restore.engine.subsystems", "restore.sources"} <= on_disk
    assert on_disk <= packaged
