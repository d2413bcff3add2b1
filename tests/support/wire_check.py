"""Every answer and notification a test client receives, held to the protocol's models
(protocol/methods.py): a result with a field of the wrong type, a notification the
protocol does not declare, an error without its typed `data.kind` fails the test that
received it, not a client in the field. The models accept fields they do not name
(older clients must read newer servers); the check does not: a field no model names is
a misspelling or an undocumented one, reported by its path."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from protocol.errors import ErrorKind
from protocol.methods import METHODS, NOTIFICATIONS_OUT

KINDS = frozenset(str(kind) for kind in ErrorKind)


def _unnamed(model: BaseModel, raw: Any, path: str) -> list[str]:
    """Paths of the fields in `raw` that no model of `model`'s tree names."""
    if not isinstance(raw, dict):
        return []
    found = []
    fields = type(model).model_fields
    names = {field.alias or name: name for name, field in fields.items()}
    for key, value in raw.items():
        name = names.get(key)
        if name is None:
            found.append(f"{path}.{key}")
            continue
        found += _nested(getattr(model, name), value, f"{path}.{key}")
    return found


def _nested(validated: Any, raw: Any, path: str) -> list[str]:
    if isinstance(validated, BaseModel):
        return _unnamed(validated, raw, path)
    if isinstance(validated, list) and isinstance(raw, list):
        pairs = enumerate(zip(validated, raw, strict=False))
        return [p for i, (v, r) in pairs for p in _nested(v, r, f"{path}[{i}]")]
    if isinstance(validated, dict) and isinstance(raw, dict):
        return [p for k, v in validated.items() for p in _nested(v, raw.get(k), f"{path}.{k}")]
    return []


def _validated(model: type[BaseModel], raw: Any, what: str) -> list[str]:
    try:
        checked = model.model_validate(raw)
    except ValidationError as exc:
        return [f"{what}: {error['loc']}: {error['msg']}" for error in exc.errors()]
    return [f"{what}: a field the protocol does not name: {path}"
            for path in _unnamed(checked, raw, what)]  # fmt: skip


def reply_problems(method: str | None, reply: dict[str, Any]) -> list[str]:
    """What is wrong with the answer to a `method` request (None: not known)."""
    if "error" in reply:
        error = reply["error"]
        kind = (error.get("data") or {}).get("kind") if isinstance(error, dict) else None
        if not isinstance(error, dict) or not isinstance(error.get("code"), int):
            return [f"{method}: an error without a code: {error!r}"]
        if not isinstance(error.get("message"), str) or kind not in KINDS:
            return [f"{method}: an error without a message and a known data.kind: {error!r}"]
        return []
    if method is None or method not in METHODS:
        return []  # a method the protocol does not have: answered with an error above
    model = METHODS[method][1]
    result = reply.get("result")
    if model is None:
        return [] if result is None else [f"{method}: a result where the protocol has none"]
    return _validated(model, result, method)


def notification_problems(message: dict[str, Any]) -> list[str]:
    method = message.get("method")
    model = NOTIFICATIONS_OUT.get(method) if isinstance(method, str) else None
    if model is None:
        return [f"a notification the protocol does not declare: {method!r}"]
    return _validated(model, message.get("params"), str(method))


class WireChecked:
    """A test client's record of what it sent and of what the protocol refused in what it
    received; `check_wire` fails the test on it (each problem reported once)."""

    def __init__(self) -> None:
        self._methods: dict[Any, str] = {}
        """The method of each request awaiting its answer."""
        self.wire_problems: list[str] = []

    def sent(self, msg_id: Any, method: str) -> None:
        self._methods[msg_id] = method

    def received(self, message: dict[str, Any]) -> None:
        if "method" in message:
            self.wire_problems += notification_problems(message)
        else:
            method = self._methods.pop(message.get("id"), None)
            self.wire_problems += reply_problems(method, message)

    def check_wire(self) -> None:
        problems, self.wire_problems = self.wire_problems, []
        assert not problems, "answers the protocol does not allow:\n" + "\n".join(problems)
