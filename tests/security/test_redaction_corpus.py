"""Issue 34's acceptance corpus: the 12 secret kinds of tests/security/test_redaction.py,
each as a tool puts it in its I/O (`SHAPES`: environment dicts, config objects, credential
responses, error bodies, webhooks, MCP tool results, Kubernetes secrets, `docker inspect`
env arrays, …), recorded every way sessiond is told of tool I/O — `thread/record` of
operations with results and of `tool` messages through a real server, `sessiond acp` with
the fake ACP agent's tool calls (`rawInput`, `rawOutput`), an import of a Claude Code
transcript's tool calls and results — on both stores. Not one raw secret byte anywhere:
every file of the home (thread files, index, search index and WAL, blobs, the import
ledger), every PostgreSQL table, the answers (`thread/read`, `thread/search`), the logs.

The values are planted the way a tool would carry them: under their own name where the
shape is structured (`{"AWS_SECRET_ACCESS_KEY": …}`), as `NAME=value` where it is text. A
secret known only by its name (an AWS secret access key is 40 characters of base64 and
nothing else) cannot be told apart from any other string when its name is not beside it;
no shape here drops the name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import BOTH_STORES
from tests.security.test_redaction import SECRETS, data_dir_bytes, database_bytes, leaks
from tests.support.acp_editor import fake_agent, sessiond_acp
from tests.support.import_fixtures import ClaudeSession
from tests.support.rpc_client import REPO, ServerProcess

Spawn = Callable[..., ServerProcess]
NAMES = {
    "github-pat": "GITHUB_TOKEN",
    "gitlab-pat": "GITLAB_TOKEN",
    "slack-bot-token": "SLACK_BOT_TOKEN",
    "stripe-access-token": "STRIPE_SECRET_KEY",
    "aws-access-token": "AWS_ACCESS_KEY_ID",
    "aws-secret-access-key": "AWS_SECRET_ACCESS_KEY",
    "openai-api-key": "OPENAI_API_KEY",
    "anthropic-api-key": "ANTHROPIC_API_KEY",
    "gcp-api-key": "GOOGLE_API_KEY",
    "jwt": "SESSION_TOKEN",
    "private-key": "TLS_PRIVATE_KEY",
    "url-password": "DATABASE_URL",
}
"""The 12 kinds, each with the name a tool gives it."""
KINDS = {
    kind: (name, f"postgresql://app:{SECRETS[kind][0]}@db.internal:5432/app"
           if kind == "url-password" else SECRETS[kind][0])
    for kind, name in NAMES.items()
}  # fmt: skip
"""Each kind's name and value (a URL's password is a URL)."""

Shape = Callable[[str, str], Any]
SHAPES: dict[str, Shape] = {
    "env dict": lambda n, v: {n: v, "NODE_ENV": "production"},
    "env dict, lower-case names": lambda n, v: {n.lower(): v},
    "docker inspect Config.Env": lambda n, v: {"Config": {"Env": [f"{n}={v}", "PATH=/usr/bin"]}},
    "kubernetes pod env": lambda n, v: {
        "spec": {"containers": [{"name": "app", "env": [{"name": n, "value": v}]}]}},
    "kubernetes Secret stringData": lambda n, v: {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "app"}, "stringData": {n.lower(): v}},
    "kubernetes ConfigMap": lambda n, v: {"kind": "ConfigMap", "data": {n: v}},
    "compose environment map": lambda n, v: {"services": {"app": {"environment": {n: v}}}},
    "compose environment list": lambda n, v: {"services": {"app": {"environment": [f"{n}={v}"]}}},
    "ECS task definition": lambda n, v: {
        "containerDefinitions": [{"name": "web", "environment": [{"name": n, "value": v}]}]},
    "SSM parameter": lambda n, v: {
        "Parameter": {"Name": f"/prod/{n}", "Type": "SecureString", "Value": v, "Version": 3}},
    "Secrets Manager SecretString": lambda n, v: {
        "Name": "prod/app", "SecretString": json.dumps({n: v}), "VersionStages": ["AWSCURRENT"]},
    "credential response": lambda n, v: {"credentials": {n: v, "expires_in": 3600}},
    "terraform output": lambda n, v: {
        "outputs": {n.lower(): {"value": v, "sensitive": True, "type": "string"}}},
    "terraform state attributes": lambda n, v: {
        "resources": [{"type": "aws_instance", "instances": [{"attributes": {n.lower(): v}}]}]},
    "CI workflow env": lambda n, v: {"jobs": {"build": {"env": {n: v}, "steps": []}}},
    "npm-style config text": lambda n, v: {"stdout": f"registry=https://r.example\n{n}={v}\n"},
    "shell command": lambda n, v: {"command": f"export {n}={v} && make deploy"},
    "MCP text content": lambda n, v: {
        "content": [{"type": "text", "text": f"{n}={v}"}], "isError": False},
    "MCP structuredContent": lambda n, v: {"structuredContent": {"config": {n: v}}},
    "API error body": lambda n, v: {
        "error": {"code": 400, "reason": "InvalidParameter", "message": f"{n}={v} is invalid"}},
    "Google API errors list": lambda n, v: {
        "error": {"errors": [{"domain": "global", "reason": f"{n}: {v}"}], "status": "INVALID"}},
    "webhook event object": lambda n, v: {
        "event": {"type": "config.updated", "data": {"object": {n: v}}}},
    "chat webhook text": lambda n, v: {
        "event": {"type": "message", "user": "U1", "text": f"here you go {n}={v}"}},
    "webhook edit changes": lambda n, v: {
        "action": "edited", "changes": {"body": {"from": f"{n}={v}"}}},
    "request log with body": lambda n, v: {
        "request": {"method": "POST", "url": "https://api.example.com/v1", "body": {n: v}}},
    "JSON file content": lambda n, v: {"content": json.dumps({n: v}, indent=2)},
    "YAML file content": lambda n, v: {"content": f"database:\n  {n.lower()}: {v}\n"},
    ".env file content": lambda n, v: {"content": f"# prod\n{n}={v}\nDEBUG=false\n"},
    "INI file content": lambda n, v: {"content": f"[default]\n{n.lower()} = {v}\n"},
    "Python source": lambda n, v: {"content": f'{n} = "{v}"\n'},
    "JavaScript source": lambda n, v: {"content": f"const {n.lower()} = '{v}';\n"},
    "array under the name": lambda n, v: {n: [v]},
    "object under the name": lambda n, v: {n: {"value": v, "version": 3}},
    "deeply nested": lambda n, v: {"a": {"b": {"c": {"d": {"e": {n: v}}}}}},
    "assignment as a key": lambda n, v: {f"{n}={v}": True},
    "Vault KV read": lambda n, v: {"data": {"data": {n.lower(): v}, "metadata": {"version": 1}}},
    "platform config vars": lambda n, v: {"config_vars": {n: v}},
    "platform env list": lambda n, v: {
        "envs": [{"key": n, "value": v, "target": ["production"], "type": "encrypted"}]},
    "CI log line": lambda n, v: {"log": f"2026-01-01T00:00:00Z {n}: {v}"},
    "traceback locals": lambda n, v: {
        "traceback": f"File app.py, line 3\n  locals: {{'{n.lower()}': '{v}'}}"},
    "database rows": lambda n, v: {"rows": [{"id": 1, "key": n, "value": v}]},
    "tool arguments": lambda n, v: {"name": "set_env", "arguments": {n: v}},
    "status and source subtrees": lambda n, v: {
        "status": {"source": {"type": "env", "id": {n: v}}}, "state": "ready"},
    "kubectl describe text": lambda n, v: {"stdout": f"Environment:\n  {n}:  {v}\n"},
}  # fmt: skip


def planted() -> list[tuple[str, str, Any]]:
    """Every shape with every kind: (shape, kind, the shape's value)."""
    return [(shape, kind, make(*KINDS[kind])) for shape, make in SHAPES.items() for kind in KINDS]


def leaked(data: bytes) -> list[str]:
    return leaks(data)


def everything(home: Path, store_url: str | None) -> bytes:
    """Every byte of the home and of the test's logs, and every PostgreSQL table."""
    logs = b"".join(p.read_bytes() for p in home.parent.glob("*.log") if p.is_file())
    return data_dir_bytes(home) + logs + (database_bytes(store_url) if store_url else b"")


def test_the_corpus_is_what_the_issue_asks() -> None:
    assert len(SHAPES) >= 40 and len(KINDS) == 12
    assert sorted(NAMES) == sorted(set(SECRETS) - {"secret-assignment", "secret-json-field",
                                                   "authorization-header"})  # fmt: skip


@BOTH_STORES
def test_tool_io_recorded_through_the_server_stores_no_secret(
    spawn: Spawn, home: Path, tmp_path: Path, store_url: str | None
) -> None:
    server = spawn()
    server.initialize([str(tmp_path)])
    started = server.request("thread/start", {"cwd": str(tmp_path), "title": "tool I/O"})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    items: list[dict[str, Any]] = []
    for n, (shape, kind, value) in enumerate(planted()):
        items.append({"type": "operation", "id": str(uuid.uuid4()), "operationId": f"op-{n}",
                      "tool": shape, "effect": "read", "state": "committed",
                      "resultPersisted": True, "result": value})  # fmt: skip
        part = {"type": "tool_result", "text": f"{shape} of {kind}", "output": value}
        items.append({"type": "message", "id": str(uuid.uuid4()), "role": "tool",
                      "content": [part]})  # fmt: skip
    for at in range(0, len(items), 100):
        batch = items[at : at + 100]
        server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": batch})
    stored = server.request("thread/read", {"threadId": tid, "limit": 5000})["items"]
    searched = [
        server.request("thread/search", {"query": word})["hits"]
        for word in ("Environment", "traceback", "prod", "DATABASE_URL", "export")
    ]
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    server.close()

    assert len([i for i in stored if i["type"] == "operation"]) == len(planted())
    answers = json.dumps([stored, searched]).encode()
    assert leaked(answers) == [], _which(stored)
    assert leaked(everything(home, store_url)) == []
    assert answers.count(b"[secret:") >= len(planted())


@BOTH_STORES
async def test_tool_calls_through_sessiond_acp_store_no_secret(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path], store_url: str | None
) -> None:
    repo = make_repo("repo")
    calls = tmp_path / "calls.json"
    calls.write_text(json.dumps([[{"shape": shape, "kind": kind}, value]
                                 for shape, kind, value in planted()]))  # fmt: skip
    env = {"SESSIOND_STORE": store_url} if store_url else {}
    async with sessiond_acp(home, fake_agent(tmp_path / "agent", "none"), env=env) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(
            session_id=session, prompt=[{"type": "text", "text": f"tools {calls}"}]
        )
        live = json.dumps(run.editor.received).encode()
    assert leaked(live) != []  # the editor was shown the tools' I/O as they gave it
    assert leaked(everything(home, store_url)) == []
    assert b"[secret:aws-secret-access-key:" in everything(home, store_url)


@BOTH_STORES
def test_tool_calls_of_an_imported_transcript_store_no_secret(
    home: Path, tmp_path: Path, store_url: str | None
) -> None:
    projects = tmp_path / "projects"
    repo = tmp_path / "repo"
    repo.mkdir()
    session = ClaudeSession(projects, repo, "main")
    session.user("look at the configuration")
    for shape, kind, value in planted():
        session._tool("mcp__config__read", {"shape": shape, "kind": kind, "seen": value},
                      json.dumps(value), value)  # fmt: skip
    session.save()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if store_url:
        env["SESSIOND_STORE"] = store_url
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), "import", "claude",
         "--from", str(projects), "--json"],
        capture_output=True, text=True, cwd=REPO, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["created"] == 1
    assert leaked(session.path.read_bytes()) != []  # the agent's own file, as it wrote it
    assert leaked(done.stdout.encode() + done.stderr.encode()) == []
    assert leaked(everything(home, store_url)) == []


def _which(stored: list[dict[str, Any]]) -> list[str]:
    """The shapes (and kinds) a leak is in: what a failure names."""
    found = []
    for item in stored:
        if item["type"] == "operation":
            text = json.dumps(item["result"]).encode()
            kinds = leaked(text)
            if kinds:
                found.append(f"{item['tool']}: {kinds}")
    return found
