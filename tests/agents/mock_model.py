"""A model server of our own on 127.0.0.1 that the real agent CLIs talk to instead of a
provider: just enough of Anthropic's Messages API, OpenAI's Responses API, Google's Gemini
API and the OpenAI-compatible Chat Completions API (streamed and not, with tool calls and
`usage`), streamed as each provider streams, for Claude Code, Codex, Gemini CLI and the
agents that take any OpenAI-compatible endpoint (OpenCode, Kilo, Qwen Code, Copilot CLI,
Pi) to run a scripted session headless and write the transcripts sessiond then imports.

It is the agents' input, not the thing under test: a script (a function of the request,
normalised across providers) decides each answer, and every request is kept so a test can
assert what an agent sent (e.g. that a resumed session carried its earlier turns).

    with MockModel(script) as model:       # model.url: http://127.0.0.1:PORT
        ...                                # model.requests: every Request, in order

Scripted sessions name their scenario in the prompt, `[[scenario]]`; `Scenario` answers
the n-th model call of a turn with its n-th step, so an agent's own side requests (titles,
routing, token counts) never shift the script.
"""

from __future__ import annotations

import http.server
import itertools
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

MARKER = re.compile(r"\[\[([A-Za-z0-9_.:-]+)\]\]")
MODELS = ("mock-model", "gpt-4.1")
"""The models an OpenAI-compatible client is told of (`GET /v1/models`): a name no price list
knows, and one genai-prices prices (`gpt-4.1`), for the cost checks."""


@dataclass(frozen=True)
class Call:
    """A tool call the model makes. `args` is a dict for a function tool; a string for a
    free-form tool (Codex's `apply_patch` and code-mode `exec` take raw text)."""

    name: str
    args: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    namespace: str | None = None
    """OpenAI Responses: the tool namespace a function belongs to (Codex's multi-agent
    tools are `collaboration.spawn_agent`, …)."""


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 1200
    output_tokens: int = 60
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    """Of the cache writes, those kept for an hour (Anthropic's split; the rest 5 minutes)."""


@dataclass(frozen=True)
class Reply:
    """One model answer: optional thinking, optional text, then tool calls (none = the turn
    ends). `status` other than 200 answers an HTTP error instead (a provider outage)."""

    text: str = ""
    calls: tuple[Call, ...] = ()
    thinking: str = ""
    usage: Usage = Usage()
    status: int = 200
    cuts: tuple[int, ...] = ()
    """Offsets in `text` where a new delta of the stream starts (none: one delta), as a
    model's deltas fall: anywhere, inside a word or a token it repeats."""

    def text_deltas(self) -> list[str]:
        at = [0, *self.cuts, len(self.text)]
        return [self.text[a:b] for a, b in itertools.pairwise(at) if b > a]


@dataclass
class Request:
    """One model call, normalised: which provider's API, the model, the tool names offered,
    and the conversation as (role, text, calls, results) turns."""

    provider: str
    path: str
    model: str
    tools: list[str]
    turns: list[Turn]
    body: dict[str, Any]
    streamed: bool

    def user_texts(self) -> list[str]:
        return [turn.text for turn in self.turns if turn.role == "user" and turn.text]

    def last_user_text(self) -> str:
        texts = self.user_texts()
        return texts[-1] if texts else ""

    def round(self) -> int:
        """How many tool-call rounds the model already made since the person last spoke:
        the index of the step this call is for."""
        last = max((i for i, t in enumerate(self.turns) if t.role == "user" and t.text), default=-1)
        return sum(1 for t in self.turns[last + 1 :] if t.role == "assistant" and t.calls)

    def results(self) -> list[str]:
        """The tool results sent since the person last spoke, oldest first."""
        last = max((i for i, t in enumerate(self.turns) if t.role == "user" and t.text), default=-1)
        return [r for t in self.turns[last + 1 :] for r in t.results]

    @property
    def aside(self) -> bool:
        """A side call, not a step of the agent's turn: no tools offered (a title, a
        summary), or Claude Code's guess at the person's next prompt, which the Agent SDK
        (claude-agent-acp 0.101) asks after each turn with the turn's own tools and
        history, its last user text `[SUGGESTION MODE: …`."""
        return not self.tools or self.last_user_text().startswith("[SUGGESTION MODE:")

    def scenario(self) -> str | None:
        found = MARKER.findall(self.last_user_text())
        return found[-1] if found else None

    def text(self) -> str:
        """Everything the conversation says, for `in` checks."""
        return json.dumps(self.body, ensure_ascii=False)


@dataclass
class Turn:
    role: str  # user | assistant
    text: str = ""
    calls: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)


Script = Callable[[Request], Reply]


class Scenario:
    """Steps per scenario name: the k-th model call of a turn gets `steps[name][k]`; past the
    last step, or with no marker, `done`. A request with no tools offered (a title, a
    summary; `Request.aside`) gets `aside`; it is not a step."""

    def __init__(
        self,
        steps: dict[str, list[Reply]],
        done: Reply = Reply(text="Done."),
        aside: Callable[[Request], Reply] | None = None,
    ) -> None:
        self.steps = steps
        self.done = done
        self.aside = aside or (lambda request: Reply(text="A short summary of the session."))

    def __call__(self, request: Request) -> Reply:
        if request.aside:
            return self.aside(request)
        name = request.scenario()
        steps = self.steps.get(name or "", [])
        index = request.round()
        return steps[index] if index < len(steps) else self.done


class MockModel:
    """The server: a thread per connection, every answer decided by `script`."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> MockModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def main_requests(self) -> list[Request]:
        """The agent's own turns, not its side calls (`Request.aside`)."""
        with self._lock:
            return [r for r in self.requests if not r.aside]

    def answer(self, provider: str, path: str, body: dict[str, Any]) -> tuple[Request, Reply]:
        request = PARSERS[provider](path, body)
        with self._lock:
            self.requests.append(request)
        return request, self.script(request)


# --- requests, per provider --------------------------------------------------------------


def _anthropic_request(path: str, body: dict[str, Any]) -> Request:
    turns = []
    for message in body.get("messages", []):
        if message.get("role") not in ("user", "assistant"):
            continue  # Claude Code sends its environment as a `system` message in the list
        turn = Turn(role=message["role"])
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts = []
        for block in blocks or []:
            kind = block.get("type")
            if kind == "text" and not block.get("text", "").startswith("<system-reminder>"):
                texts.append(block["text"])
            elif kind == "tool_use":
                turn.calls.append(block.get("name", ""))
            elif kind == "tool_result":
                turn.results.append(_flatten(block.get("content")))
        if turn.role == "user" and turn.results:
            texts = []  # text beside a tool result is the harness's, not the person's
        turn.text = "\n".join(texts)
        turns.append(turn)
    tools = [t.get("name", "") for t in body.get("tools") or []]
    return Request("anthropic", path, body.get("model", ""), tools, turns, body,
                   bool(body.get("stream")))  # fmt: skip


CALLS = {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"}
OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output",
           "tool_search_output"}  # fmt: skip
HARNESS_TEXT = ("<environment_context>", "<user_instructions>", "# AGENTS.md", "<permissions",
                "<skills_instructions>", "<collaboration_mode>", "<turn_aborted>")  # fmt: skip


def _openai_request(path: str, body: dict[str, Any]) -> Request:
    turns: list[Turn] = []
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    tools = [t.get("name") or t.get("type", "") for t in body.get("tools") or []]
    for item in items:
        kind = item.get("type", "message")
        if kind == "additional_tools":  # code mode: the tools ride in the input
            tools += [_tool_name(t) for t in item.get("tools", [])]
        if kind == "tool_search_output":  # tools a tool search loaded: offered from now on,
            for tool in item.get("tools", []):  # a namespace's as `namespace.name`
                if tool.get("type") == "namespace":
                    tools += [f"{tool['name']}.{t.get('name')}" for t in tool.get("tools", [])]
                else:
                    tools.append(str(tool.get("name")))
        elif kind == "message" and item.get("role") in ("user", "assistant"):
            text = _flatten(item.get("content"))
            if item["role"] == "user" and text.startswith(HARNESS_TEXT):
                continue
            turns.append(Turn(role=item["role"], text=text))
        elif kind == "agent_message":  # Codex multi-agent: a task for this sub-agent, or
            text = "\n".join(  # a sub-agent's report to its parent (a result, not a prompt)
                str(part.get("text") or part.get("encrypted_content") or "")
                for part in item.get("content") or []
                if isinstance(part, dict)
            )
            if "Message Type: NEW_TASK" in text:
                turns.append(Turn(role="user", text=text))
            else:
                turns.append(Turn(role="user", results=[text]))
        elif kind in CALLS:
            if not (turns and turns[-1].role == "assistant" and turns[-1].calls):
                turns.append(Turn(role="assistant"))
            turns[-1].calls.append(item.get("name", kind))
        elif kind in OUTPUTS:
            if not (turns and turns[-1].role == "user" and turns[-1].results):
                turns.append(Turn(role="user"))
            turns[-1].results.append(_flatten(item.get("output")))
    return Request("openai", path, body.get("model", ""), [t for t in tools if t], turns, body,
                   bool(body.get("stream")))  # fmt: skip


def _chat_request(path: str, body: dict[str, Any]) -> Request:
    """OpenAI Chat Completions: `messages` of system/user/assistant/tool roles, an
    assistant's `tool_calls`, a tool's answer as its own message."""
    turns: list[Turn] = []
    for message in body.get("messages") or []:
        role = message.get("role")
        if role == "assistant":
            calls = [str((c.get("function") or {}).get("name", "")) for c in
                     message.get("tool_calls") or []]  # fmt: skip
            turns.append(Turn(role="assistant", text=_flatten(message.get("content")), calls=calls))
        elif role == "tool":
            if not (turns and turns[-1].role == "user" and turns[-1].results):
                turns.append(Turn(role="user"))
            turns[-1].results.append(_flatten(message.get("content")))
        elif role == "user":
            text = "\n".join(t for t in _texts(message.get("content")) if not _harness(t))
            if text:
                turns.append(Turn(role="user", text=text))
    tools = [str((t.get("function") or {}).get("name") or t.get("name") or "")
             for t in body.get("tools") or []]  # fmt: skip
    return Request("chat", path, body.get("model", ""), [t for t in tools if t], turns, body,
                   bool(body.get("stream")))  # fmt: skip


def _texts(content: Any) -> list[str]:
    """The text parts of a Chat Completions content (a string, or a list of parts)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(part.get("text", "")) for part in content
                if isinstance(part, dict) and part.get("type", "text") == "text"]  # fmt: skip
    return []


def _tool_name(tool: dict[str, Any]) -> str:
    if tool.get("type") == "namespace":
        return ",".join(_tool_name(t) for t in tool.get("tools", []))
    return str(tool.get("name") or tool.get("type") or "")


def _gemini_request(path: str, body: dict[str, Any]) -> Request:
    turns = []
    for content in body.get("contents", []):
        turn = Turn(role="assistant" if content.get("role") == "model" else "user")
        texts = []
        for part in content.get("parts", []):
            if "text" in part and not part.get("thought"):
                texts.append(part["text"])
            elif "functionCall" in part:
                turn.calls.append(part["functionCall"].get("name", ""))
            elif "functionResponse" in part:
                turn.results.append(json.dumps(part["functionResponse"].get("response")))
        turn.text = "" if turn.results else "\n".join(t for t in texts if not _harness(t))
        turns.append(turn)
    tools = [f.get("name", "") for t in body.get("tools") or [] for f in
             t.get("functionDeclarations", [])]  # fmt: skip
    model = path.split("/models/", 1)[-1].split(":", 1)[0]
    return Request("gemini", path, model, tools, turns, body, "stream" in path)


def _harness(text: str) -> bool:
    return text.lstrip().startswith(("<session_context>", "<system-reminder>"))


def _flatten(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_flatten(part) for part in content)
    if isinstance(content, dict):
        return str(content.get("text") or content.get("output") or content.get("content") or "")
    return str(content)


PARSERS: dict[str, Callable[[str, dict[str, Any]], Request]] = {
    "anthropic": _anthropic_request,
    "openai": _openai_request,
    "gemini": _gemini_request,
    "chat": _chat_request,
}


# --- answers, per provider ---------------------------------------------------------------


def _id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def _sse(event: str | None, data: dict[str, Any]) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def cache_split(usage: Usage) -> dict[str, int]:
    """The API's split of the cache writes by lifetime (5 minutes unless said otherwise)."""
    hour = min(usage.cache_write_1h_tokens, usage.cache_write_tokens)
    return {"ephemeral_5m_input_tokens": usage.cache_write_tokens - hour,
            "ephemeral_1h_input_tokens": hour}  # fmt: skip


def anthropic_events(request: Request, reply: Reply) -> Iterator[bytes]:
    usage = reply.usage
    start_usage = {
        "input_tokens": usage.input_tokens,
        "output_tokens": 1,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        # As the API splits them: Claude Code writes zeros for a missing split, and
        # ccusage counts the split.
        "cache_creation": cache_split(usage),
    }
    message = {"id": _id("msg_"), "type": "message", "role": "assistant",
               "model": request.model or "claude-sonnet-4-5", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": start_usage}  # fmt: skip
    yield _sse("message_start", {"type": "message_start", "message": message})
    index = 0
    if reply.thinking:
        yield _block(index, {"type": "thinking", "thinking": "", "signature": ""},
                     [{"type": "thinking_delta", "thinking": reply.thinking},
                      {"type": "signature_delta", "signature": "mock-signature"}])  # fmt: skip
        index += 1
    if reply.text:
        deltas = [{"type": "text_delta", "text": piece} for piece in reply.text_deltas()]
        yield _block(index, {"type": "text", "text": ""}, deltas)
        index += 1
    for call in reply.calls:
        block = {"type": "tool_use", "id": call.id or _id("toolu_"), "name": call.name, "input": {}}
        args = call.args if isinstance(call.args, str) else json.dumps(call.args)
        yield _block(index, block, [{"type": "input_json_delta", "partial_json": args}])
        index += 1
    stop = "tool_use" if reply.calls else "end_turn"
    yield _sse("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": usage.output_tokens}})  # fmt: skip
    yield _sse("message_stop", {"type": "message_stop"})


def _block(index: int, start: dict[str, Any], deltas: list[dict[str, Any]]) -> bytes:
    out = _sse("content_block_start", {"type": "content_block_start", "index": index,
                                       "content_block": start})  # fmt: skip
    for delta in deltas:
        out += _sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                            "delta": delta})  # fmt: skip
    return out + _sse("content_block_stop", {"type": "content_block_stop", "index": index})


def anthropic_message(request: Request, reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call in reply.calls:
        content.append({"type": "tool_use", "id": call.id or _id("toolu_"), "name": call.name,
                        "input": call.args})  # fmt: skip
    usage = reply.usage
    return {"id": _id("msg_"), "type": "message", "role": "assistant",
            "model": request.model, "content": content,
            "stop_reason": "tool_use" if reply.calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                      "cache_read_input_tokens": usage.cache_read_tokens,
                      "cache_creation_input_tokens": usage.cache_write_tokens,
                      "cache_creation": cache_split(usage)}}  # fmt: skip


def openai_events(request: Request, reply: Reply) -> Iterator[bytes]:
    seq = itertools.count()
    response_id = _id("resp_")
    base = {"id": response_id, "object": "response", "model": request.model, "output": []}

    def event(kind: str, **data: Any) -> bytes:
        return _sse(kind, {"type": kind, "sequence_number": next(seq), **data})

    yield event("response.created", response={**base, "status": "in_progress"})
    output: list[dict[str, Any]] = []
    if reply.text:
        item_id = _id("msg_")
        index = len(output)
        item = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress",
                "content": []}  # fmt: skip
        yield event("response.output_item.added", output_index=index, item=item)
        part = {"type": "output_text", "text": "", "annotations": []}
        yield event("response.content_part.added", item_id=item_id, output_index=index,
                    content_index=0, part=part)  # fmt: skip
        for piece in reply.text_deltas():
            yield event("response.output_text.delta", item_id=item_id, output_index=index,
                        content_index=0, delta=piece)  # fmt: skip
        yield event("response.output_text.done", item_id=item_id, output_index=index,
                    content_index=0, text=reply.text)  # fmt: skip
        done_part = {**part, "text": reply.text}
        yield event("response.content_part.done", item_id=item_id, output_index=index,
                    content_index=0, part=done_part)  # fmt: skip
        item = {**item, "status": "completed", "content": [done_part]}
        yield event("response.output_item.done", output_index=index, item=item)
        output.append(item)
    for call in reply.calls:
        index = len(output)
        call_id = call.id or _id("call_")
        if call.name == "tool_search" and "tool_search" in request.tools:
            # the Responses API's own tool search (Codex defers MCP tools behind it): the
            # client runs it and sends back `tool_search_output` with the tools it loaded
            item = {"type": "tool_search_call", "id": _id("tsc_"), "call_id": call_id,
                    "status": "completed", "execution": "client",
                    "arguments": call.args}  # fmt: skip
        elif isinstance(call.args, str):
            item = {"type": "custom_tool_call", "id": _id("ctc_"), "call_id": call_id,
                    "name": call.name, "input": call.args, "status": "completed"}  # fmt: skip
        else:
            item = {"type": "function_call", "id": _id("fc_"), "call_id": call_id,
                    "name": call.name, "arguments": json.dumps(call.args),
                    "status": "completed"}  # fmt: skip
            if call.namespace:
                item["namespace"] = call.namespace
        yield event("response.output_item.added", output_index=index, item=item)
        yield event("response.output_item.done", output_index=index, item=item)
        output.append(item)
    usage = reply.usage
    usage_out = {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    done = {**base, "status": "completed", "output": output, "usage": usage_out}
    yield event("response.completed", response=done)


def gemini_chunk(request: Request, reply: Reply) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if reply.thinking:
        parts.append({"text": reply.thinking, "thought": True})
    if reply.text:
        parts.append({"text": reply.text})
    for call in reply.calls:
        parts.append({"functionCall": {"name": call.name, "args": call.args},
                      "thoughtSignature": "bW9jaw=="})  # fmt: skip
    usage = reply.usage
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                        "index": 0}],
        "usageMetadata": {"promptTokenCount": usage.input_tokens,
                          "candidatesTokenCount": usage.output_tokens,
                          "cachedContentTokenCount": usage.cache_read_tokens,
                          "totalTokenCount": usage.input_tokens + usage.output_tokens},
        "modelVersion": request.model,
        "responseId": _id(""),
    }  # fmt: skip


def _chat_usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    prompt = usage.input_tokens + usage.cache_read_tokens
    return {"prompt_tokens": prompt, "completion_tokens": usage.output_tokens,
            "total_tokens": prompt + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
            "completion_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip


def _chat_calls(reply: Reply) -> list[dict[str, Any]]:
    return [{"id": call.id or _id("call_"), "type": "function",
             "function": {"name": call.name, "arguments": call.args if isinstance(call.args, str)
                          else json.dumps(call.args)}}
            for call in reply.calls]  # fmt: skip


def chat_events(request: Request, reply: Reply) -> Iterator[bytes]:
    """A streamed Chat Completions answer: the role, reasoning (`reasoning_content`, as
    DeepSeek and the OpenAI-compatible providers stream it), text deltas, each tool call
    whole in one delta, the finish reason, then `usage` in a chunk of its own and `[DONE]`."""
    completion_id, created = _id("chatcmpl-"), 1_700_000_000
    model = request.model or "mock-model"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(
            None,
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            },
        )

    yield chunk({"role": "assistant", "content": ""})
    if reply.thinking:
        yield chunk({"reasoning_content": reply.thinking})
    for piece in reply.text_deltas():
        yield chunk({"content": piece})
    for index, call in enumerate(_chat_calls(reply)):
        yield chunk({"tool_calls": [{"index": index, **call}]})
    yield chunk({}, "tool_calls" if reply.calls else "stop")
    yield _sse(None, {"id": completion_id, "object": "chat.completion.chunk", "created": created,
                      "model": model, "choices": [], "usage": _chat_usage(reply)})  # fmt: skip
    yield b"data: [DONE]\n\n"


def chat_completion(request: Request, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    if reply.calls:
        message["tool_calls"] = _chat_calls(reply)
    return {"id": _id("chatcmpl-"), "object": "chat.completion", "created": 1_700_000_000,
            "model": request.model or "mock-model",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if reply.calls else "stop"}],
            "usage": _chat_usage(reply)}  # fmt: skip


def json_instance(schema: dict[str, Any]) -> Any:
    """The smallest value a JSON schema admits (Gemini CLI asks its router for a JSON
    object; any well-formed one will do)."""
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties", {})
        return {name: json_instance(sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 10
    if kind == "boolean":
        return False
    return "mock"


# --- HTTP --------------------------------------------------------------------------------


def _handler(model: MockModel) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # close-delimited bodies: no chunking to get wrong

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):  # an OpenAI-compatible model list
                return self._json(200, {"object": "list", "data": [
                    {"id": name, "object": "model", "created": 1_700_000_000, "owned_by": "mock"}
                    for name in MODELS]})  # fmt: skip
            self._json(404, {"error": {"message": f"not mocked: GET {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            path = self.path
            try:
                if path.startswith("/v1/messages/count_tokens"):
                    self._json(200, {"input_tokens": 1000})
                elif path.startswith("/v1/messages"):
                    self._anthropic(path, body)
                elif path.rstrip("/").endswith("/responses"):
                    self._openai(path, body)
                elif path.split("?")[0].rstrip("/").endswith("/chat/completions"):
                    self._chat(path, body)
                elif ":countTokens" in path:
                    self._json(200, {"totalTokens": 1000})
                elif "/models/" in path and "generatecontent" in path.lower():
                    self._gemini(path, body)
                else:
                    self._json(404, {"error": {"message": f"not mocked: POST {path}"}})
            except (BrokenPipeError, ConnectionResetError):
                pass
            except Exception as exc:  # a script bug: say so, the agent gets a 500
                model.errors.append(f"{path}: {exc!r}")
                self._json(500, {"error": {"message": repr(exc)}})

        def _anthropic(self, path: str, body: dict[str, Any]) -> None:
            request, reply = model.answer("anthropic", path, body)
            if reply.status != 200:
                return self._json(reply.status, {"type": "error", "error": {
                    "type": "api_error", "message": "mock outage"}})  # fmt: skip
            if request.streamed:
                return self._stream(anthropic_events(request, reply))
            self._json(200, anthropic_message(request, reply))

        def _openai(self, path: str, body: dict[str, Any]) -> None:
            request, reply = model.answer("openai", path, body)
            if reply.status != 200:
                return self._json(reply.status, {"error": {"message": "mock outage"}})
            self._stream(openai_events(request, reply))

        def _chat(self, path: str, body: dict[str, Any]) -> None:
            request, reply = model.answer("chat", path, body)
            if reply.status != 200:
                return self._json(reply.status, {"error": {"message": "mock outage",
                                                           "type": "server_error"}})  # fmt: skip
            if request.streamed:
                return self._stream(chat_events(request, reply))
            self._json(200, chat_completion(request, reply))

        def _gemini(self, path: str, body: dict[str, Any]) -> None:
            config = body.get("generationConfig") or {}
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            if schema is not None and not body.get("tools"):
                request = PARSERS["gemini"](path, body)
                with model._lock:
                    model.requests.append(request)
                reply = Reply(text=json.dumps(json_instance(schema)))
            else:
                request, reply = model.answer("gemini", path, body)
            if reply.status != 200:
                return self._json(reply.status, {"error": {"code": reply.status,
                                                           "message": "mock outage"}})  # fmt: skip
            chunk = gemini_chunk(request, reply)
            if request.streamed:
                return self._stream(iter([_sse(None, chunk)]))
            self._json(200, chunk)

        def _stream(self, events: Iterator[bytes]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            for chunk in events:
                self.wfile.write(chunk)
                self.wfile.flush()

        def _json(self, status: int, data: Any) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler
