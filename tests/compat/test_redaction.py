"""A real agent's transcript with a secret in the prompt: the agent keeps its own file as
it wrote it, and the thread sessiond imports from it holds the placeholder, nowhere in the
data directory the secret (issue 25's corpus, for a transcript no fixture built)."""

from __future__ import annotations

from pathlib import Path

import pytest

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


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_a_key_the_model_streams_cut_across_deltas_is_whole_in_the_transcript_and_imported_redacted(
    agents: Agents, home: Path, cli: str
) -> None:
    """Unlike an ACP adapter's chunks, an agent's own transcript holds a streamed answer
    whole (Claude Code: one line per content block; Codex: the finished message), so
    redacting each source record as it is read takes the key whole."""
    anthropic = SECRETS["anthropic-api-key"][0]
    said = f"Your key is {anthropic} for now."
    at = said.index(anthropic)
    agent = agents.start(Scenario({"repeat": [Reply(text=said, cuts=(at + 30, at + 70))]}))
    if cli == "codex":
        agent.write_codex_config(model="gpt-5.5")
    getattr(agent, cli)("[[repeat]] say it back").check()
    folder = agent.claude_projects if cli == "claude" else agent.codex_sessions
    (transcript,) = agent.transcripts(folder)
    assert anthropic.encode() in transcript.read_bytes()  # the answer, whole, as written
    assert import_from(home, cli, folder)["created"] == 1
    stored = data_dir_bytes(home)
    pieces = [said[at : at + 30], said[at + 30 : at + 70], said[at + 70 : at + len(anthropic)]]
    assert [p for p in pieces if p.encode() in stored] == []
    assert b"[secret:anthropic-api-key:" in stored
