"""Params of a window's first requests taken without pydantic when they are plainly valid.

`thread/list` (open a window) and `thread/resume` (click Resume) are the first request of
a fresh server process (bench J1, J2), and `thread/read` the next (J3, J4: scrolling
back). Importing pydantic and building the models costs that process ~80-100 ms, about as
much as the rest of either answer. Params whose values already have their exact JSON types
and bounds are taken here; anything else (a coercion, an out-of-range value, a wrong type,
a missing field) goes to the pydantic model in `protocol.methods`, which gives the one
answer or error. tests/test_quick_params.py holds both to the same result, on generated
params too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.names import SESSION_KEY_MAX

MAX_PAGE = 200
DEFAULT_PAGE = 50
MAX_SEARCH = 500
MAX_CURSOR = 1000
MAX_READ = 10_000


@dataclass(frozen=True, slots=True)
class ListParams:
    """The fields `ThreadListParams` has, with its defaults."""

    cwd: str | None = None
    workspaceFolder: str | None = None
    archived: bool = False
    search: str | None = None
    cursor: str | None = None
    limit: int = DEFAULT_PAGE
    parentThreadId: str | None = None
    sessionKey: str | None = None


@dataclass(frozen=True, slots=True)
class ResumeParams:
    """The fields `ThreadResumeParams` has, with its defaults."""

    threadId: str
    cwd: str | None = None
    acceptDrift: bool = False
    messageLimit: int = MAX_PAGE
    availableModels: list[str] | None = None


@dataclass(frozen=True, slots=True)
class ReadParams:
    """The fields `ThreadReadParams` has, with its defaults."""

    threadId: str
    afterSeq: int | None = None
    beforeSeq: int | None = None
    limit: int = MAX_PAGE


class _NotPlain(Exception):
    """A value pydantic must judge."""


def _text(params: dict[str, Any], name: str, limit: int | None = None) -> str | None:
    value = params.get(name)
    if value is not None and (not isinstance(value, str) or (limit and len(value) > limit)):
        raise _NotPlain
    return value


def _flag(params: dict[str, Any], name: str) -> bool:
    value = params.get(name, False)
    if type(value) is not bool:
        raise _NotPlain
    return value


def _count(params: dict[str, Any], name: str, default: int, most: int) -> int:
    value = params.get(name, default)
    if type(value) is not int or not 1 <= value <= most:
        raise _NotPlain
    return value


def _seq(params: dict[str, Any], name: str, least: int) -> int | None:
    value = params.get(name)
    if value is not None and (type(value) is not int or value < least):
        raise _NotPlain
    return value


def _texts(params: dict[str, Any], name: str) -> list[str] | None:
    value = params.get(name)
    if value is not None and (
        type(value) is not list or not all(isinstance(v, str) for v in value)
    ):
        raise _NotPlain
    return None if value is None else list(value)


def _list(params: dict[str, Any]) -> ListParams:
    return ListParams(
        cwd=_text(params, "cwd"),
        workspaceFolder=_text(params, "workspaceFolder"),
        archived=_flag(params, "archived"),
        search=_text(params, "search", MAX_SEARCH),
        cursor=_text(params, "cursor", MAX_CURSOR),
        limit=_count(params, "limit", DEFAULT_PAGE, MAX_PAGE),
        parentThreadId=_text(params, "parentThreadId"),
        sessionKey=_text(params, "sessionKey", SESSION_KEY_MAX),
    )


def _thread_id(params: dict[str, Any]) -> str:
    thread_id = _text(params, "threadId")
    if thread_id is None:
        raise _NotPlain
    return thread_id


def _resume(params: dict[str, Any]) -> ResumeParams:
    return ResumeParams(
        threadId=_thread_id(params),
        cwd=_text(params, "cwd"),
        acceptDrift=_flag(params, "acceptDrift"),
        messageLimit=_count(params, "messageLimit", MAX_PAGE, MAX_PAGE),
        availableModels=_texts(params, "availableModels"),
    )


def _read(params: dict[str, Any]) -> ReadParams:
    after, before = _seq(params, "afterSeq", 0), _seq(params, "beforeSeq", 1)
    if after is not None and before is not None:
        raise _NotPlain  # both directions: the model says why not
    return ReadParams(
        threadId=_thread_id(params),
        afterSeq=after,
        beforeSeq=before,
        limit=_count(params, "limit", MAX_PAGE, MAX_READ),
    )


QUICK: dict[str, Callable[[dict[str, Any]], ListParams | ResumeParams | ReadParams]] = {
    "thread/list": _list,
    "thread/resume": _resume,
    "thread/read": _read,
}
"""The methods whose params may be taken here: a window's first requests, and the page
a resumed transcript asks for next (its first `thread/read` would otherwise pay the import)."""


def plainly_valid(method: str, params: Any) -> ListParams | ResumeParams | ReadParams | None:
    """The params, when every known field is exactly of its type and in bounds; None
    means "ask pydantic". Unknown fields are ignored, as `Params` ignores them."""
    take = QUICK.get(method)
    if take is None or not isinstance(params, dict):
        return None
    try:
        return take(params)
    except _NotPlain:
        return None
