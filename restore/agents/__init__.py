"""The agents whose sessions sessiond imports, one folder each (`claude_code/`, `codex/`,
`gemini/`, …: its store, its parser, its handoff), listed by `registry.py`.

Invariant: everything sessiond knows about one agent is in its folder, and nothing outside
this package names an agent (protocol/agents.py holds their names). A parser is pure: a
source record in, items out, with deterministic item ids, its memory plain JSON state; a
store reads only names, stats and heads of files (or its database), never through a link.
"""
