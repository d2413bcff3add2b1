"""Run the real agent CLIs headless against the mock model, in a home of their own.

`AgentHome` is a temporary HOME (nothing of the machine's own agent settings, logins or
sessions is seen) holding a git repository on a branch, with each CLI pointed at the
mock model on 127.0.0.1:

- Claude Code: `ANTHROPIC_BASE_URL` + an API key; `claude -p --output-format stream-json`.
  Transcripts: `$HOME/.claude/projects/<encoded cwd>/<sessionId>.jsonl`.
- Codex: a `model_providers.mock` entry (Responses API) in `$CODEX_HOME/config.toml`;
  `codex exec --json`. Rollouts: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`.
- Gemini CLI: `GOOGLE_GEMINI_BASE_URL` + `GEMINI_API_KEY`; `gemini -p --output-format
  stream-json`. Sessions: `$HOME/.gemini/tmp/<project>/chats/session-*.jsonl`.
- OpenCode: a custom provider (`@ai-sdk/openai-compatible`, the mock's Chat Completions)
  in `~/.config/opencode/opencode.json`; `opencode run --format json`. Sessions: rows of
  `$HOME/.local/share/opencode/opencode.db`.
- Kilo (a fork of OpenCode): the same provider in `~/.config/kilo/kilo.json`; `kilo run
  --format json`. Sessions: rows of `$HOME/.local/share/kilo/kilo.db`.
- Qwen Code: its OpenAI settings (`OPENAI_BASE_URL`, key and model) with `~/.qwen/settings.json`
  choosing OpenAI auth; `qwen --output-format stream-json`. Sessions:
  `$HOME/.qwen/projects/<encoded cwd>/chats/<sessionId>.jsonl`.
- GitHub Copilot CLI: no login, its own-key variables (`COPILOT_PROVIDER_BASE_URL`, key and
  model) with `COPILOT_OFFLINE=true`; `copilot -p --output-format json`. Sessions:
  `$HOME/.copilot/session-state/<sessionId>/events.jsonl`.
- Pi: a provider of its own in `~/.pi/agent/models.json` (`openai-completions`, the mock),
  run by Node 22 (installed as a package: `install.node22`); `pi -p --mode json`. Sessions:
  `$HOME/.pi/agent/sessions/--<cwd>--/<time>_<sessionId>.jsonl`.

Their ACP agents (`acp_command`: codex-acp, claude-agent-acp, `gemini --acp`) run with
the same `env()`, pointed at the mock the same way.

The environment each CLI gets is built from nothing but what it needs (PATH, HOME, the
mock's address and a dummy key), so no credential of this machine reaches it, and the test
run's marker (tests/support/leftovers.py), so nothing one of them leaves running goes unseen.

Every agent runs with its updater, its telemetry and its other calls home off (`env()`, the
Gemini CLI settings and `write_codex_config`): the tests reach 127.0.0.1 only, and the run's
guard (tests/support/only_loopback.py) fails it if one of them so much as looks up another
name. Codex's terminal UI also runs without its background app server (`daemon_auto_start`
off): that daemon outlives the UI by design, and runs an updater of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.agents import install
from tests.agents.mock_model import MockModel
from tests.support.leftovers import marker_env

BRANCH = "feature/compat"
ACP_COMMANDS = {
    "claude": ["claude-agent-acp"],
    "codex": ["codex-acp"],
    "gemini": ["gemini", "--acp"],
    "opencode": ["opencode", "acp"],
    "kilo": ["kilo", "acp"],
    "qwen": ["qwen", "--acp"],
    "copilot": ["copilot", "--acp", "--allow-all-tools"],
    "pi": ["pi-acp"],
}
"""The ACP agent of each CLI, as an editor launches it (its bin in `bins`, then args)."""
TIMEOUT = 180  # a hung CLI fails its test instead of hanging the run (never a speed check)
CALLS_HOME_REGARDLESS = {
    "raw.githubusercontent.com": "Codex's terminal UI fetches its announcement tip at every "
    "start (codex-rs/tui/src/tooltips.rs), whatever its settings",
}
"""Names an agent calls with no setting to stop it: `own_hosts` resolves them to 127.0.0.1."""


@dataclass
class Run:
    """One CLI run: its stdout's JSON events, exit code and stderr."""

    SESSION_KEYS = ("session_id", "thread_id", "sessionID", "sessionId")

    command: list[str]
    returncode: int
    events: list[dict[str, Any]]
    stderr: str
    stdout: str = ""

    def check(self) -> Run:
        if self.returncode != 0:
            raise AssertionError(
                f"{' '.join(self.command[:3])} exited {self.returncode}\n"
                f"stdout: {self.stdout[-2000:]}\nstderr: {self.stderr[-3000:]}"
            )
        return self

    @property
    def session_id(self) -> str:
        for event in self.events:
            for key in self.SESSION_KEYS:
                if isinstance(event.get(key), str):
                    return event[key]
            if event.get("type") == "session" and isinstance(event.get("id"), str):
                return event["id"]  # Pi's: its session's header
        raise AssertionError(f"no session id in the output of {self.command[:3]}")

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event.get("type") == kind]


@dataclass
class AgentHome:
    """A HOME of its own with a git repo on `BRANCH`, the agents pointed at `model`."""

    root: Path
    model: MockModel
    bins: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.repo = self.root / "repo"
        self.codex_home = self.home / ".codex"
        for path in (self.home, self.repo, self.codex_home):
            path.mkdir(parents=True, exist_ok=True)
        self._git("init", "-q", "-b", "main")
        (self.repo / "README.md").write_text("# compat\n\nA repository the agents work in.\n")
        self._git("add", "README.md")
        self._git("commit", "-q", "-m", "first")
        self._git("checkout", "-q", "-b", BRANCH)
        self.write_codex_config()
        gemini = self.home / ".gemini"
        gemini.mkdir(exist_ok=True)
        (gemini / "settings.json").write_text(json.dumps({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
        }))  # fmt: skip
        self.write_opencode_config()
        pi = self.home / ".pi" / "agent"
        pi.mkdir(parents=True, exist_ok=True)
        (pi / "models.json").write_text(json.dumps({"providers": {"mock": {
            "baseUrl": f"{self.model.url}/v1", "api": "openai-completions", "apiKey": "sk-mock",
            "models": [{"id": "gpt-4.1", "name": "gpt-4.1", "reasoning": True,
                        "input": ["text"], "contextWindow": 200_000, "maxTokens": 16_000,
                        "cost": {"input": 2, "output": 8, "cacheRead": 0.5, "cacheWrite": 0}}],
        }}}))  # fmt: skip
        # What Pi runs when no --provider/--model says (pi-acp's `pi --mode rpc`): the mock.
        (pi / "settings.json").write_text(
            json.dumps({"defaultProvider": "mock", "defaultModel": "gpt-4.1"})
        )
        qwen = self.home / ".qwen"
        qwen.mkdir(exist_ok=True)
        (qwen / "settings.json").write_text(json.dumps({
            "security": {"auth": {"selectedType": "openai"}},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "model": {"name": "gpt-4.1"},
            "tools": {"todoWrite": {"enabled": True}},  # off by default in 0.24
        }))  # fmt: skip

    # --- where each agent keeps its sessions ----------------------------------------------

    @property
    def claude_projects(self) -> Path:
        return self.home / ".claude" / "projects"

    @property
    def codex_sessions(self) -> Path:
        return self.codex_home / "sessions"

    @property
    def gemini_tmp(self) -> Path:
        return self.home / ".gemini" / "tmp"

    @property
    def opencode_data(self) -> Path:
        return self.home / ".local" / "share" / "opencode"

    @property
    def kilo_data(self) -> Path:
        return self.home / ".local" / "share" / "kilo"

    @property
    def qwen_projects(self) -> Path:
        return self.home / ".qwen" / "projects"

    @property
    def copilot_sessions(self) -> Path:
        return self.home / ".copilot" / "session-state"

    @property
    def pi_sessions(self) -> Path:
        return self.home / ".pi" / "agent" / "sessions"

    def transcripts(self, root: Path, suffix: str = ".jsonl") -> list[Path]:
        return sorted(root.rglob(f"*{suffix}")) if root.exists() else []

    # --- running them ---------------------------------------------------------------------

    def env(self, **extra: str) -> dict[str, str]:
        path = os.pathsep.join([str(self.bins), str(Path(_node()).parent), "/usr/bin", "/bin"])
        env = {
            "PATH": path, "HOME": str(self.home), "LANG": "C.UTF-8", "TERM": "dumb",
            "TMPDIR": os.environ.get("TMPDIR", "/tmp"), "NO_COLOR": "1", "CI": "1",
            # Claude Code
            "ANTHROPIC_BASE_URL": self.model.url, "ANTHROPIC_API_KEY": "sk-ant-mock",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
            "IS_SANDBOX": "1",  # lets `--permission-mode bypassPermissions` run as root (CI)
            # Codex
            "CODEX_HOME": str(self.codex_home), "MOCK_API_KEY": "sk-mock",
            # Gemini CLI
            "GOOGLE_GEMINI_BASE_URL": self.model.url, "GEMINI_API_KEY": "mock-key",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            # OpenCode: no update check, models.dev, default plugins, LSP downloads or
            # sharing; the plugin package it installs into its config folder at every start
            # (@opencode-ai/plugin, by npm's own code) is asked of the mock (a 404), not of
            # the registry.
            "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1",
            "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
            "npm_config_registry": f"{self.model.url}/npm/",
            # Kilo: OpenCode's switches under its own name, and its own: no telemetry
            # (PostHog), no presence or session ingest to its cloud, no background daemon
            # (it would outlive the run), no codebase indexing.
            "KILO_DISABLE_AUTOUPDATE": "1", "KILO_DISABLE_MODELS_FETCH": "1",
            "KILO_DISABLE_DEFAULT_PLUGINS": "1", "KILO_DISABLE_LSP_DOWNLOAD": "1",
            "KILO_DISABLE_SHARE": "1", "KILO_DISABLE_CLAUDE_CODE": "1",
            "KILO_DISABLE_EXTERNAL_SKILLS": "1", "KILO_TELEMETRY_LEVEL": "off",
            "KILO_DISABLE_PRESENCE": "1", "KILO_DISABLE_SESSION_INGEST": "1",
            "KILO_NO_DAEMON": "1", "KILO_DISABLE_CODEBASE_INDEXING": "1",
            # ... and what it asks of its own cloud whatever the provider (its gateway's
            # models, notices) is asked of the mock.
            "KILO_API_URL": f"{self.model.url}/kilo-api",
            "EVENT_SERVICE_URL": f"ws://127.0.0.1:{self.model.port}/kilo-events",
            # Qwen Code: the mock's Chat Completions as its OpenAI provider.
            "OPENAI_API_KEY": "sk-mock", "OPENAI_BASE_URL": f"{self.model.url}/v1",
            "OPENAI_MODEL": "gpt-4.1", "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
            # Copilot CLI: offline (no GitHub login, telemetry, web tools or updates), the
            # mock's Chat Completions as its own-key provider, no indexing server.
            "COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": f"{self.model.url}/v1",
            "COPILOT_PROVIDER_API_KEY": "sk-mock", "COPILOT_MODEL": "gpt-4.1",
            "COPILOT_AUTO_UPDATE": "false", "USE_TGREP": "false",
            # Pi: no network at startup (its model catalog, its version check), no telemetry.
            "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0",
        }  # fmt: skip
        return {**env, **marker_env(), **self.extra_env, **extra}

    def run(self, command: list[str], *, cwd: Path | None = None, **env: str) -> Run:
        done = subprocess.run(command, cwd=cwd or self.repo, env=self.env(**env),
                              capture_output=True, text=True, timeout=TIMEOUT,
                              stdin=subprocess.DEVNULL)  # fmt: skip
        events = []
        for line in done.stdout.splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):  # a CLI's log line that looks like JSON
                    events.append(json.loads(line))
        return Run(command, done.returncode, events, done.stderr, done.stdout)

    def claude(self, prompt: str, *, resume: str | None = None, args: tuple[str, ...] = (),
               **env: str) -> Run:  # fmt: skip
        command = [str(self.bins / "claude"), "-p", prompt, "--output-format", "stream-json",
                   "--verbose", "--permission-mode", "bypassPermissions", *args]  # fmt: skip
        if resume:
            command += ["--resume", resume]
        return self.run(command, **env)

    def codex(self, prompt: str, *, resume: str | None = None, args: tuple[str, ...] = (),
              **env: str) -> Run:  # fmt: skip
        head = [str(self.bins / "codex"), "exec"]
        flags = ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                 *args]  # fmt: skip
        command = [*head, "resume", *flags, resume, prompt] if resume else [*head, *flags, prompt]
        return self.run(command, **env)

    def gemini(self, prompt: str, *, resume: str | None = None, args: tuple[str, ...] = (),
               **env: str) -> Run:  # fmt: skip
        command = [str(self.bins / "gemini"), "-p", prompt, "--output-format", "stream-json",
                   "--approval-mode", "yolo", *args]  # fmt: skip
        if resume:
            command += ["--resume", resume]
        return self.run(command, **env)

    def opencode(self, prompt: str, *, resume: str | None = None, args: tuple[str, ...] = (),
                 **env: str) -> Run:  # fmt: skip
        """`opencode run --format json`: the prompt as words (OpenCode quotes a message
        argument that holds a space, and keeps the quotes in what it records)."""
        command = [str(self.bins / "opencode"), "run", "--format", "json", *args]
        if resume:
            command += ["--session", resume]
        return self.run([*command, "--", *prompt.split()], **env)

    def kilo(self, prompt: str, *, resume: str | None = None, args: tuple[str, ...] = (),
             **env: str) -> Run:  # fmt: skip
        """`kilo run --format json`, as `opencode` (Kilo is its fork)."""
        command = [str(self.bins / "kilo"), "run", "--format", "json", *args]
        if resume:
            command += ["--session", resume]
        return self.run([*command, "--", *prompt.split()], **env)

    def qwen(self, prompt: str, *, resume: str | None = None, args: tuple[str, ...] = (),
             **env: str) -> Run:  # fmt: skip
        command = [str(self.bins / "qwen"), "-p", prompt, "--output-format", "stream-json",
                   "--approval-mode", "yolo", *args]  # fmt: skip
        if resume:
            command += ["--resume", resume]
        return self.run(command, **env)

    def copilot(self, prompt: str, *, resume: str | None = None, args: tuple[str, ...] = (),
                **env: str) -> Run:  # fmt: skip
        command = [str(self.bins / "copilot"), "-p", prompt, "--allow-all-tools",
                   "--no-auto-update", "--disable-client-telemetry", "--output-format", "json",
                   *args]  # fmt: skip
        if resume:
            command += ["--resume", resume]
        return self.run(command, **env)

    def pi(self, prompt: str, *, resume: str | None = None, fork: str | None = None,
           args: tuple[str, ...] = (), **env: str) -> Run:  # fmt: skip
        """`pi -p --mode json`, with Node 22 first on its PATH (Pi needs it)."""
        command = [str(self.bins / "pi"), "-p", "--mode", "json", "--provider", "mock",
                   "--model", "gpt-4.1", *args]  # fmt: skip
        if resume:
            command += ["--session", resume]
        if fork:
            command += ["--fork", fork]
        node22 = install.node22(self.bins)
        assert node22 is not None, "Pi needs Node 22: `python -m tests.agents.install`"
        path = os.pathsep.join([str(node22), self.env()["PATH"]])
        return self.run([*command, "--", prompt], **{"PATH": path, **env})

    def write_opencode_config(self, model: str = "gpt-4.1") -> None:
        """OpenCode's (and Kilo's) provider: the mock's Chat Completions (`mock/<model>`),
        priced as genai-prices prices gpt-4.1 (USD per million tokens), so the agent's own
        figure can be held against sessiond's; every tool allowed without asking."""
        config = json.dumps({
            "$schema": "https://opencode.ai/config.json", "autoupdate": False,
            "share": "disabled", "model": f"mock/{model}", "small_model": f"mock/{model}",
            "enabled_providers": ["mock"],
            "provider": {"mock": {
                "npm": "@ai-sdk/openai-compatible", "name": "Mock",
                "options": {"baseURL": f"{self.model.url}/v1", "apiKey": "sk-mock"},
                "models": {model: {"name": model, "tool_call": True, "reasoning": True,
                                   "limit": {"context": 200_000, "output": 16_000},
                                   "cost": {"input": 2.0, "output": 8.0, "cache_read": 0.5}}},
            }},
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
        })  # fmt: skip
        for app, name in (("opencode", "opencode.json"), ("kilo", "kilo.json")):
            folder = self.home / ".config" / app
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(config)

    def acp_command(self, agent: str) -> list[str]:
        """The ACP agent for `agent` ("claude", "codex", "gemini"), pointed at the mock the
        same way as its CLI when run with `env()`: claude-agent-acp runs Claude Code
        underneath (`ANTHROPIC_BASE_URL`), codex-acp runs Codex's app server, which reads
        `$CODEX_HOME/config.toml` (`write_codex_config`), `gemini --acp` reads
        `GOOGLE_GEMINI_BASE_URL` and `~/.gemini/settings.json`."""
        head, *args = ACP_COMMANDS[agent]
        return [str(self.bins / head), *args]

    def own_hosts(self, argv: list[str]) -> list[str]:
        """`argv` run with an /etc/hosts of its own (bound over the machine's in a mount
        namespace of its own) in which `CALLS_HOME_REGARDLESS` are 127.0.0.1: the agent
        reaches a closed local port at once, where it would have looked the name up."""
        hosts = self.root / "hosts"
        machine = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else ""
        hosts.write_text(machine + "".join(f"127.0.0.1 {name}\n" for name in
                                           CALLS_HOME_REGARDLESS))  # fmt: skip
        unshare = shutil.which("unshare")
        assert unshare, "unshare (util-linux) is needed to give an agent an /etc/hosts of its own"
        flags = "-m" if os.geteuid() == 0 else "-rm"
        bind = 'mount --bind "$1" /etc/hosts && shift && exec "$@"'
        return [unshare, flags, "--", "/bin/sh", "-c", bind, "sh", str(hosts), *argv]

    def write_gemini_settings(self, **sections: dict[str, Any]) -> None:
        """Merge settings sections into `~/.gemini/settings.json` (e.g. `model=
        {"compressionThreshold": 0.00001}`)."""
        path = self.home / ".gemini" / "settings.json"
        settings = json.loads(path.read_text())
        for name, values in sections.items():
            settings[name] = {**settings.get(name, {}), **values}
        path.write_text(json.dumps(settings))

    def write_codex_config(self, model: str | None = None, **features: bool) -> None:
        """Codex's provider: the mock's Responses API. `model` None keeps Codex's default
        model (code mode: one `exec` tool); `gpt-5.5` gets the classic tool set (and the
        multi-agent tools only with `multi_agent_v2=True`). `features`: more `[features]`."""
        head = f'model = "{model}"\n' if model else ""
        flags = "".join(f"{name} = {str(on).lower()}\n" for name, on in features.items())
        (self.codex_home / "config.toml").write_text(f"""{head}model_provider = "mock"
check_for_update_on_startup = false

[analytics]
enabled = false

[otel]
exporter = "none"
trace_exporter = "none"
metrics_exporter = "none"

[model_providers.mock]
name = "mock"
base_url = "{self.model.url}/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false
remote_plugin = false
apps = false
in_app_updates = false
daemon_auto_start = false
{flags}""")

    def _git(self, *args: str) -> None:
        subprocess.run(["git", "-C", str(self.repo), "-c", "user.name=t", "-c",
                        "user.email=t@example.com", *args], check=True,
                       env={"PATH": "/usr/bin:/bin", "HOME": str(self.home)})  # fmt: skip


def _node() -> str:
    from shutil import which

    found = which("node")
    if found is None:
        raise RuntimeError("node is not on PATH: the agent CLIs need Node.js 20+")
    return found
