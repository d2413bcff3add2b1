"""A real agent's transcript with a secret in the prompt: the agent keeps its own file as
it wrote it, and the thread sessiond imports from it holds the placeholder, nowhere in the
data directory the secret (issue 25's corpus, for a transcript no fixture built)."""

from __future__ import annotations

from pathlib import Path

from tests.agents.mock_model import Reply, Scenario
from tests.compat.conftest import Agents, import_from
from tests.security.test_redaction import SECRETS, data_dir_bytes, leaks
from tests.test_cli import sessiond

PLANTED = ("github-pat", "aws-access-token", "url-password", "secret-assignment")
PROMPT = "[[keys]] deploy with " + " and ".join(SECRETS[kind][1] for kind in PLANTED)
KEYS = Scenario({"keys": [Reply(text="I will not repeat them.")]})


def test_a_claude_code_prompt_with_secrets_is_imported_redacted(agents: Agents, home: Path) -> None:
    agent = agents.start(KEYS)
    agent.claude(PROMPT).check()
    (transcript,) = agent.transcripts(agent.claude_projects)
    assert leaks(transcript.read_bytes()) == list(PLANTED)  # the agent's own file: as written
    summary = import_from(home, "claude", agent.claude_projects)
    assert summary["created"] == 1, summary
    shown = sessiond(home, "show", sessiond(home, "list", "-q").stdout.split()[0])
    assert shown.returncode == 0, shown.stderr
    for kind in ("github-pat", "aws-access-token", "url-password"):
        assert f"[secret:{kind}:" in shown.stdout, kind
    assert leaks(data_dir_bytes(home) + shown.stdout.encode()) == []
