"""The OpenAI-compatible API's decisions, without I/O (issue 29): which token a request
carries, which agent its `model` names and whether the token reaches it, what a chat
completion request asks for, and every answer's status and body, streamed or not.
`_server` only wires them to hypercorn.

- A token is its bearer value compared in constant time against every configured token
  (all of them, whatever matched: how many were compared says nothing).
- The turn's text is the last `user` message; earlier messages are the client's copy of a
  conversation the agent keeps itself (its session), so they are ignored. The session is
  the request's `user` field, inside the token's own namespace (the daemon's key,
  `bus.session_key`).
- Client-side `tools` (and the legacy `functions`) are refused: the agent's own tools run
  server-side, and a client's tool call could never be run by the client anyway.
- Errors are the OpenAI error object: `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import msgspec

from ..channels import (
    BUDGET_RETRY_SECS,
    ChannelAnswer,
    ChannelFailure,
    ChannelRefused,
    Outcome,
)
from ..turns import StepUsage

# The gateway's own error codes (the `code` of an OpenAI error object).
GatewayErrorCode = Literal[
    "invalid_api_key",  # 401: no bearer token, or not one of the gateway's tokens
    "model_not_found",  # 404: the token does not reach an agent of that alias
    "sender_not_accepted",  # 403: no peer group on the token's channel admits its sender
    "rate_limit_exceeded",  # 429: the token is over its rate (see Retry-After)
    "budget_exceeded",  # 429: a budget of the agent or of the token refused the turn
    "tools_not_supported",  # 400: client-side tools; the agent's own tools run server-side
    "invalid_request",  # 400: not a chat completion request we can run
    "request_too_large",  # 413: the body is over the gateway's max_body_bytes
    "unknown_endpoint",  # 404: no such path
    "method_not_allowed",  # 405
    "agent_unavailable",  # 503: the agent is down, or the turn failed in the daemon
    "turn_timeout",  # 503: the turn took longer than max_turn_secs
    "telegram_secret_mismatch",  # 401: a POST to /telegram/<alias> without the bot's secret
]

ErrorType = Literal[
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "rate_limit_error",
    "server_error",
]

_TYPES: dict[int, ErrorType] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


class ApiError(msgspec.Struct, frozen=True):
    status: int
    code: GatewayErrorCode
    message: str
    param: str | None = None
    retry_after: int | None = None

    def body(self) -> bytes:
        return msgspec.json.encode(
            {
                "error": {
                    "message": self.message,
                    "type": _TYPES.get(self.status, "server_error"),
                    "param": self.param,
                    "code": self.code,
                }
            }
        )

    def headers(self) -> list[tuple[bytes, bytes]]:
        if self.retry_after is None:
            return []
        return [(b"retry-after", str(self.retry_after).encode())]


def api_error(
    status: int, code: GatewayErrorCode, message: str, param: str | None = None
) -> ApiError:
    return ApiError(status, code, message, param)


# --------------------------------------------------------------------------- routes


class ListModels(msgspec.Struct, frozen=True):
    pass


class GetModel(msgspec.Struct, frozen=True):
    model: str


class ChatCompletions(msgspec.Struct, frozen=True):
    pass


ApiRoute = ListModels | GetModel | ChatCompletions


def parse_api_route(method: str, path: str) -> ApiRoute | ApiError:
    """Which endpoint under `/v1` a request names, or 404/405."""
    route: ApiRoute
    if path == "/v1/models":
        route, allowed = ListModels(), "GET"
    elif path.startswith("/v1/models/") and path.count("/") == 3:
        route, allowed = GetModel(path.removeprefix("/v1/models/")), "GET"
    elif path == "/v1/chat/completions":
        route, allowed = ChatCompletions(), "POST"
    else:
        return api_error(404, "unknown_endpoint", f"no endpoint at {path[:200]!r}")
    if method != allowed:
        return api_error(405, "method_not_allowed", f"{path[:200]} takes {allowed}")
    return route


# --------------------------------------------------------------------------- tokens


def bearer(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The `Authorization: Bearer <token>` value, if there is one."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, given = value.strip().partition(b" ")
            if scheme.lower() == b"bearer" and given.strip():
                return given.strip()
    return None


def identify(given: bytes | None, tokens: Mapping[str, bytes]) -> str | None:
    """The name of the token `given` is, compared in constant time against every token
    (each compared, whichever matched). An empty configured token matches nothing."""
    found: str | None = None
    for name, token in sorted(tokens.items()):
        same = hmac.compare_digest(given or b"\x00", token) if token else False
        if same and found is None:
            found = name
    return found if given else None


def unauthorized() -> ApiError:
    return api_error(
        401, "invalid_api_key", "a valid API key is required: Authorization: Bearer <token>"
    )


# --------------------------------------------------------------------------- requests


class TextPart(msgspec.Struct, frozen=True, tag_field="type", tag="text"):
    text: str


class ImagePart(msgspec.Struct, frozen=True, tag_field="type", tag="image_url"):
    image_url: object = None


ContentPart = TextPart | ImagePart


class ChatMessage(msgspec.Struct, frozen=True):
    role: str
    content: str | list[ContentPart] | None = None


class StreamOptions(msgspec.Struct, frozen=True):
    include_usage: bool = False


class ChatRequest(msgspec.Struct, frozen=True):
    """The fields of a chat completion request we read. Others a client sends (sampling
    parameters and the like) are accepted and ignored: the agent's own provider settings
    apply, as they do to its every turn."""

    model: str
    messages: list[ChatMessage]
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    n: int | None = None
    tools: list[object] | None = None
    functions: list[object] | None = None
    tool_choice: object = None


_chat_decoder = msgspec.json.Decoder(ChatRequest)


@dataclass(frozen=True)
class TurnAsk:
    """What a chat completion request asks the daemon for: one turn of `agent`."""

    agent: str
    text: str
    session: str | None
    stream: bool
    include_usage: bool


def parse_chat(body: bytes, reach: Iterable[str]) -> TurnAsk | ApiError:
    """The turn a request asks for, or why it is refused: the JSON, the model (an agent the
    token reaches), client-side tools, `n`, and a last user message with text."""
    try:
        request = _chat_decoder.decode(body)
    except msgspec.DecodeError as exc:  # a ValidationError is one
        return api_error(400, "invalid_request", f"not a chat completion request: {exc}")
    if request.model not in set(reach):
        return model_not_found(request.model)
    if request.tools or request.functions or request.tool_choice not in (None, "none", "auto"):
        return api_error(
            400,
            "tools_not_supported",
            "client-side tools are not supported: the agent's own tools run on the server "
            "(within what the token's peer group grants); send no 'tools'",
            "tools",
        )
    if request.n is not None and request.n != 1:
        return api_error(400, "invalid_request", "only n = 1 is supported", "n")
    text = last_user_text(request.messages)
    if text is None:
        return api_error(
            400, "invalid_request", "the messages hold no user message with text", "messages"
        )
    include_usage = request.stream_options is not None and request.stream_options.include_usage
    return TurnAsk(request.model, text, request.user or None, request.stream, include_usage)


def last_user_text(messages: list[ChatMessage]) -> str | None:
    """The text of the last `user` message (its text parts joined), None if there is none."""
    for message in reversed(messages):
        if message.role != "user":
            continue
        content = message.content
        if isinstance(content, str):
            return content if content else None
        if content:
            text = "\n".join(p.text for p in content if isinstance(p, TextPart))
            return text or None
        return None
    return None


def model_not_found(model: str) -> ApiError:
    return api_error(
        404,
        "model_not_found",
        f"the model {model[:64]!r} does not exist or this key cannot reach it",
        "model",
    )


# --------------------------------------------------------------------------- answers


def models_body(agents: Iterable[str], created: int) -> bytes:
    return msgspec.json.encode(
        {"object": "list", "data": [model_entry(a, created) for a in sorted(agents)]}
    )


def model_entry(agent: str, created: int) -> dict[str, object]:
    return {"id": agent, "object": "model", "created": created, "owned_by": "zeroclaw"}


def usage_of(steps: Iterable[StepUsage]) -> dict[str, int]:
    """The OpenAI usage object of a turn: every provider step's tokens added up."""
    prompt = completion = 0
    for step in steps:
        tokens = step.tokens
        prompt += tokens.input_tokens + tokens.cached_input_tokens + tokens.cache_write_tokens
        completion += tokens.output_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def finish_reason(answer: ChannelAnswer) -> str:
    """`stop`, or `length` when a budget or the tool-step limit ended the turn early."""
    return "length" if answer.stopped is not None else "stop"


def completion_body(completion_id: str, created: int, answer: ChannelAnswer) -> bytes:
    return msgspec.json.encode(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": answer.agent,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer.reply},
                    "finish_reason": finish_reason(answer),
                }
            ],
            "usage": usage_of(answer.usage),
        }
    )


def chunk_body(
    completion_id: str,
    created: int,
    model: str,
    delta: dict[str, str],
    finish: str | None = None,
    usage: dict[str, int] | None = None,
) -> bytes:
    chunk: dict[str, object] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return msgspec.json.encode(chunk)


def sse(data: bytes) -> bytes:
    """One server-sent event carrying `data` (JSON has no raw newline, so one line)."""
    return b"data: " + data + b"\n\n"


SSE_DONE = sse(b"[DONE]")


def outcome_error(outcome: ChannelRefused | ChannelFailure) -> ApiError:
    """The OpenAI error of a conversation that ended without a reply."""
    if isinstance(outcome, ChannelRefused):
        if outcome.code in ("sender_ignored", "sender_not_accepted"):
            return api_error(
                403,
                "sender_not_accepted",
                f"this key's sender is not admitted by the agent's peer groups: {outcome.detail}",
            )
        return api_error(404, "model_not_found", outcome.detail, "model")
    if outcome.code == "budget_exceeded":
        return ApiError(429, "budget_exceeded", outcome.detail, None, BUDGET_RETRY_SECS)
    if outcome.code == "timeout":
        return api_error(503, "turn_timeout", outcome.detail)
    return api_error(503, "agent_unavailable", f"{outcome.code}: {outcome.detail}")


def answer_or_error(outcome: Outcome) -> ChannelAnswer | ApiError:
    if isinstance(outcome, ChannelAnswer):
        if outcome.error is not None and not outcome.reply:
            detail = f"the agent's provider failed: {outcome.error}"
            return api_error(503, "agent_unavailable", detail)
        return outcome
    return outcome_error(outcome)
