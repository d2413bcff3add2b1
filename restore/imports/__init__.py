"""Other agents' sessions (Claude Code, Codex, Gemini CLI) imported as threads. Invariant:
writes only through the store interface; a source file never leads outside its root."""
