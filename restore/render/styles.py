"""How a transcript's entries are written: `Text` (a terminal, `sessiond show`), `Markdown`
and `Html` (exports). Each makes recorded text safe for its medium: control characters
shown as escapes everywhere, and in HTML every recorded string escaped (nothing recorded
becomes markup or script).
"""

from __future__ import annotations

import html
import re
from typing import Any

from restore.render.text import safe
from restore.render.transcript import failed

INDENT = "    "
RESULT_CHARS = 100_000
"""Most characters of one call's result an md or HTML page shows (the JSON export keeps
every byte): a 50 MB tool output would make the page unreadable, not more useful."""


def _cut(text: str, limit: int = RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit:,} more characters: the JSON export has them]"


class Text:
    """A terminal's transcript: each chunk one or more lines, printed as they come."""

    def _block(self, text: str) -> str:
        return "\n".join(f"{INDENT}{line}".rstrip() for line in safe(text).splitlines() or [""])

    def speaker(self, role: str) -> str:
        return f"{role}:"

    def message(self, text: str) -> str:
        return self._block(text)

    def separator(self, text: str) -> str:
        return text

    def note(self, text: str) -> str:
        return f"{INDENT}{text}"

    def summary(self, text: str) -> str:
        return self._block(text)

    def operation(self, item: dict[str, Any], line: str, result: str | None) -> str:
        if result is not None:
            line += f": {safe(result, one_line=True)[:120]}"
        return f"{INDENT}{line}"

    def edit(self, line: str, diff: str | None) -> str:
        return f"{INDENT}{line}" + ("" if diff is None else "\n" + self._block(diff))

    def todos(self, entries: list[tuple[str, str]]) -> str:
        lines = [f"{INDENT}todos:"]
        lines += [f"{INDENT}  {mark} {safe(content, one_line=True)}" for mark, content in entries]
        return "\n".join(lines)

    def nested(self, chunk: str) -> str:
        return "\n".join(f"{INDENT}{line}" for line in chunk.split("\n"))

    def sub_agent(self, title: str) -> tuple[str, str | None]:
        return safe(title, one_line=True), None


def _fence(text: str, info: str = "") -> str:
    """A fenced code block whose fence no run of backticks in `text` closes early."""
    runs = [len(run) for run in re.findall(r"`{3,}", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{info}\n{text}\n{fence}\n"


def _md_inline(text: str) -> str:
    """One line of recorded text where Markdown would otherwise read its syntax."""
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", safe(text, one_line=True))


class Markdown:
    """A Markdown document: messages as their own Markdown (what the agent wrote is
    Markdown already), everything else escaped or fenced."""

    def speaker(self, role: str) -> str:
        return f"\n#### {_md_inline(role)}\n"

    def message(self, text: str) -> str:
        return safe(text).rstrip("\n") + "\n\n"

    def separator(self, text: str) -> str:
        return f"\n---\n\n*{_md_inline(text)}*\n"

    def note(self, text: str) -> str:
        return f"- {_md_inline(text)}\n"

    def summary(self, text: str) -> str:
        return _fence(safe(text))

    def operation(self, item: dict[str, Any], line: str, result: str | None) -> str:
        mark = "**✗ failed** " if failed(item) else ""
        out = f"- {mark}{_md_inline(line)}\n"
        if result is not None:
            out += "\n" + _fence(safe(_cut(result)))
        return out

    def edit(self, line: str, diff: str | None) -> str:
        out = f"- {_md_inline(line)}\n"
        return out if diff is None else out + "\n" + _fence(safe(diff), "diff")

    def todos(self, entries: list[tuple[str, str]]) -> str:
        lines = ["- todos:"]
        lines += [f"  - {mark} {_md_inline(content)}" for mark, content in entries]
        return "\n".join(lines) + "\n"

    def nested(self, chunk: str) -> str:
        return "\n".join(f"> {line}".rstrip() for line in chunk.rstrip("\n").split("\n")) + "\n"

    def sub_agent(self, title: str) -> tuple[str, str | None]:
        return f"\n**{_md_inline(title)}**\n", None


def _h(text: str) -> str:
    return html.escape(safe(text), quote=True)


class Html:
    """HTML entries (the page around them is page.py's): recorded text escaped, tool calls
    and edits in collapsed `<details>`, failed calls marked."""

    def speaker(self, role: str) -> str:
        kind = re.sub(r"[^a-z]", "", role.split(" ")[0].lower()) or "message"
        return f'<h3 class="e role {kind}">{_h(role)}</h3>\n'

    def message(self, text: str) -> str:
        return f'<div class="e msg">{_h(text)}</div>\n'

    def separator(self, text: str) -> str:
        return f'<div class="e sep">{_h(text)}</div>\n'

    def note(self, text: str) -> str:
        return f'<div class="e note">{_h(text)}</div>\n'

    def summary(self, text: str) -> str:
        return f'<div class="e msg summary">{_h(text)}</div>\n'

    def operation(self, item: dict[str, Any], line: str, result: str | None) -> str:
        bad = failed(item)
        cls = "e op failed" if bad else "e op"
        mark = '<span class="bad">✗ failed</span> ' if bad else ""
        if result is None:
            return f'<div class="{cls}">{mark}{_h(line)}</div>\n'
        return (
            f'<details class="{cls}"><summary>{mark}{_h(line)}</summary>'
            f"<pre>{_h(_cut(result))}</pre></details>\n"
        )

    def edit(self, line: str, diff: str | None) -> str:
        if diff is None:
            return f'<div class="e edit">{_h(line)}</div>\n'
        rows = []
        for row in safe(diff).split("\n"):
            kind = {"+": "add", "-": "del", "@": "hunk"}.get(row[:1], "")
            rows.append(
                f'<span class="{kind}">{html.escape(row)}</span>' if kind else html.escape(row)
            )
        body = "\n".join(rows)
        return f'<details class="e edit"><summary>{_h(line)}</summary><pre>{body}</pre></details>\n'

    def todos(self, entries: list[tuple[str, str]]) -> str:
        done = {"[x]": "done", "[>]": "doing", "[ ]": "todo"}
        rows = "".join(
            f'<li class="{done.get(mark, "todo")}">{_h(mark)} {_h(content)}</li>'
            for mark, content in entries
        )
        return f'<div class="e todos">todos:<ul>{rows}</ul></div>\n'

    def nested(self, chunk: str) -> str:
        return chunk

    def sub_agent(self, title: str) -> tuple[str, str | None]:
        return f'<details class="sub" open><summary>{_h(title)}</summary>\n', "</details>\n"
