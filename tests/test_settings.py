"""Every setting is checked where it is read (issue 35): a value sessiond does not know is
one line naming the setting and what it takes, exit code 2, before anything starts or is
stored; never a server that advertises it and then fails every request, never a typo
that is ignored (a `redaction.toml` with `[[pattern]]` once stored the secret it named in
the clear). Real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.rpc_client import REPO, RpcError, ServerProcess

SESSIOND = [sys.executable, "-m", "server.cli"]


def sessiond(
    *args: str, env: dict[str, str] | None = None, stdin: bytes = b""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SESSIOND, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        input=stdin.decode(),
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        timeout=120,
    )


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("SESSIOND_DURABILITY", "bogus",
         "sessiond: SESSIOND_DURABILITY is one of fsync, group, none, not 'bogus'\n"),
        ("SESSIOND_REDACT", "strictest",
         "sessiond: SESSIOND_REDACT is one of off, default, strict, not 'strictest'\n"),
        ("SESSIOND_LOG", "LOUD",
         "sessiond: SESSIOND_LOG must be one of DEBUG, INFO, WARNING, ERROR, not 'LOUD'\n"),
    ],
)  # fmt: skip
def test_an_environment_setting_sessiond_does_not_know_is_one_line_before_serving(
    home: Path, name: str, value: str, said: str
) -> None:
    request = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'
    for command in (["serve", "--stdio"], ["list"]):
        done = sessiond("--home", str(home), *command, env={name: value}, stdin=request)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", said), command


def test_an_empty_sessiond_home_is_refused_not_the_default_home(tmp_path: Path) -> None:
    """`SESSIOND_HOME=$UNSET_VARIABLE sessiond list` once listed (and wrote) the default
    home without a word."""
    default = tmp_path / "state"
    env = {"SESSIOND_HOME": "", "XDG_STATE_HOME": str(default)}
    done = sessiond("list", env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "sessiond: SESSIOND_HOME is set but empty: name a directory, or unset it for the "
        "default ($XDG_STATE_HOME/sessiond or ~/.local/state/sessiond)\n"
    )
    assert not default.exists()
    given = sessiond("--home", str(tmp_path / "given"), "list", env=env)  # --home wins
    assert given.returncode == 0, given.stderr


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ('mode = "strict"\n\n[[pattern]]\nkind = "itk"\nregex = "itk_[0-9a-f]{8}"\n', 3,
         "unknown key 'pattern': it knows mode (off | default | strict); allow (a list of "
         "regexes); patterns ([[patterns]] tables of kind and regex)"),
        ('modee = "strict"\n', 1, "unknown key 'modee': it knows mode (off | default | "
         "strict); allow (a list of regexes); patterns ([[patterns]] tables of kind and regex)"),
        ('[[patterns]]\nkind = "itk"\nregexp = "itk_[0-9a-f]{8}"\n', 3,
         "unknown key 'regexp' in [[patterns]]: a pattern has kind and regex"),
        ('allow = "^sk_test_"\n', 1, "allow is a list of regexes (strings)"),
        ("mode = 3\n", 1, "mode is a string (off | default | strict)"),
    ],
)  # fmt: skip
def test_a_redaction_toml_typo_names_the_file_the_line_and_the_keys_it_knows(
    home: Path, tmp_path: Path, text: str, line: int, what: str
) -> None:
    config = home / "redaction.toml"
    config.write_text(text)
    home.chmod(0o700)
    listed = sessiond("--home", str(home), "list")
    assert listed.returncode == 2 and listed.stdout == ""
    assert listed.stderr == f"sessiond: InvalidParams: {config}, line {line}: {what}\n"
    server = ServerProcess(home)  # serving: the first request that stores is refused, typed
    try:
        server.initialize()
        with pytest.raises(RpcError) as refused:
            server.request("thread/start", {"cwd": str(tmp_path), "title": "itk_0123abcd"})
        assert refused.value.kind == "InvalidParams" and f"line {line}" in refused.value.message
    finally:
        server.close()
    assert not list(home.glob("threads/*/*.jsonl"))  # nothing stored unredacted


def test_a_valid_redaction_toml_still_redacts_its_own_pattern(home: Path, tmp_path: Path) -> None:
    (home / "redaction.toml").write_text(
        'mode = "default"\nallow = ["^sk_test_"]\n\n[[patterns]]\nkind = "itk"\n'
        'regex = "(itk_[0-9a-f]{8})"\n'
    )
    server = ServerProcess(home)
    try:
        server.initialize()
        started = server.request("thread/start", {"cwd": str(tmp_path), "title": "itk_0123abcd"})
        assert started["thread"]["title"].startswith("[secret:itk:")
    finally:
        server.close()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["list", "--limit", "0"], "argument --limit: takes a number from 1 to 200, not '0'"),
        (["list", "--limit", "-5"], "argument --limit: takes a number from 1 to 200, not '-5'"),
        (["search", "x", "--limit", "201"],
         "argument --limit: takes a number from 1 to 200, not '201'"),
        (["client", "list", "--limit", "0"],
         "argument --limit: takes a number from 1 to 200, not '0'"),
        (["serve", "--max-frame", "5"],
         "argument --max-frame: takes a number of bytes, 1024 or more, not '5'"),
    ],
)  # fmt: skip
def test_a_flag_out_of_range_is_refused_not_taken_as_everything(
    home: Path, args: list[str], said: str
) -> None:
    done = sessiond("--home", str(home), *args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1].endswith(f"error: {said}"), done.stderr


def test_since_and_until_say_the_forms_they_take(home: Path) -> None:
    for option in ("--since", "--until"):
        done = sessiond("--home", str(home), "search", "x", option, "yesterday")
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr == (
            f"sessiond: {option} takes 30m, 12h, 7d, 2w (that long ago) or an ISO 8601 date "
            "or time (2026-03-10, 2026-03-10T12:00:00Z), not 'yesterday'\n"
        )
    for good in ("7d", "2026-03-10", "2026-03-10T12:00:00Z"):
        found = sessiond("--home", str(home), "search", "x", "--since", good)
        assert found.returncode == 1 and found.stderr == "no hits\n", (good, found.stderr)
