"""Anthropic Messages API, streamed, with tool use."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._http import EncodedTools, HttpModel, SseEvent, StreamedStep, encode_body, load_json
from ._spec import AnthropicSpec
from ._types import Conversation, OnDelta, ProviderError, Step, ToolSpec
from ._usage import anthropic_usage

API_VERSION = "2023-06-01"


def anthropic_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """The conversation as Messages API turns. Pure."""
    messages: list[dict[str, Any]] = [
        {"role": t.role, "content": t.content} for t in conversation.history
    ]
    messages.append({"role": "user", "content": conversation.user})
    for round_ in conversation.rounds:
        content: list[dict[str, Any]] = []
        if round_.step.text:
            content.append({"type": "text", "text": round_.step.text})
        content += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.args}
            for c in round_.step.tool_calls
        ]
        messages.append({"role": "assistant", "content": content})
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": o.call.id,
                        "content": o.as_text(),
                        "is_error": not o.ok,
                    }
                    for o in round_.outcomes
                ],
            }
        )
    return messages


def anthropic_tools(specs: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """The toolset as Messages API `tools`. Pure."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in specs
    ]


_tools_json = EncodedTools(anthropic_tools)


class _Stream(StreamedStep):
    """One streamed message: text blocks and tool_use blocks by index; or the whole
    message (`content` blocks), when a server answered the streamed request without
    streaming."""

    def __init__(self, provider: str, on_delta: OnDelta) -> None:
        super().__init__(provider, on_delta, "toolu_")
        self.stopped = False

    async def feed(self, event: SseEvent) -> None:
        if event.event == "ping":
            return
        data = load_json(self.provider, event.data)
        if not isinstance(data, dict):
            raise self.malformed(f"{event.event} event is not an object")
        kind = data.get("type", event.event)
        if kind == "error":
            error = data.get("error") or {}
            message = error.get("message") if isinstance(error, dict) else error
            raise ProviderError(self.provider, f"error in stream: {message}", "server")
        index = data.get("index")
        if kind == "message_start":
            message = data.get("message")
            if isinstance(message, dict):
                self.usage = anthropic_usage(message.get("usage"), self.usage)
        elif kind == "message_delta":
            self.usage = anthropic_usage(data.get("usage"), self.usage)
        elif kind == "content_block_start":
            block = data.get("content_block")
            if not isinstance(index, int) or not isinstance(block, dict):
                raise self.malformed("content_block_start without index or block")
            if block.get("type") == "tool_use":
                call = self.call(index)
                call["id"], call["name"] = str(block.get("id", "")), str(block.get("name", ""))
        elif kind == "content_block_delta":
            delta = data.get("delta")
            if not isinstance(index, int) or not isinstance(delta, dict):
                raise self.malformed("content_block_delta without index or delta")
            if delta.get("type") == "text_delta":
                await self.text_delta(str(delta.get("text", "")))
            elif delta.get("type") == "input_json_delta" and index in self.calls:
                self.calls[index]["args"] += str(delta.get("partial_json", ""))
        elif kind == "message_stop":
            self.stopped = True

    async def whole(self, data: Any) -> None:
        """A non-streamed message, given as the same deltas a stream would have."""
        if not isinstance(data, dict):
            raise self.malformed("the answer is not an object")
        if data.get("type") == "error" or "error" in data:
            error = data.get("error") or {}
            message = error.get("message") if isinstance(error, dict) else error
            raise ProviderError(self.provider, f"error in answer: {message}", "server")
        content = data.get("content")
        if not isinstance(content, list):
            raise self.malformed("no 'content' in the answer")
        self.usage = anthropic_usage(data.get("usage"))
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                raise self.malformed("a content block is not an object")
            if block.get("type") == "text":
                await self.text_delta(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                call = self.call(index)
                call["id"], call["name"] = str(block.get("id", "")), str(block.get("name", ""))
                arguments = block.get("input")
                call["args"] = json.dumps(arguments if arguments is not None else {})
        self.stopped = True


class AnthropicProvider:
    def __init__(self, alias: str, config: AnthropicSpec, env: Mapping[str, str]) -> None:
        self.name = f"anthropic.{alias}"
        self.model = config.model
        self.max_tokens = config.max_tokens
        key_env = config.api_key_env
        key = env.get(key_env)
        if not key:
            raise ProviderError(self.name, f"environment variable {key_env} is not set", "setup")
        self.http = HttpModel(
            self.name,
            config.base_url,
            headers={
                "content-type": "application/json",
                "x-api-key": key,
                "anthropic-version": API_VERSION,
            },
            timeout_secs=config.timeout_secs,
            max_retries=config.max_retries,
            answer_timeout_secs=config.answer_timeout_secs,
        )

    async def complete(self, conversation: Conversation, on_delta: OnDelta) -> Step:
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": anthropic_messages(conversation),
            "stream": True,
        }
        if conversation.tools:
            payload["tools"] = _tools_json(conversation.tools)
        system = conversation.system_text()  # the identity, then what was recalled (as data)
        if system:
            payload["system"] = system
        stream = _Stream(self.name, on_delta)
        await self.http.stream("v1/messages", encode_body(payload), stream.feed, stream.whole)
        if not stream.stopped:
            raise stream.malformed("the stream ended before message_stop")
        return stream.step()

    async def aclose(self) -> None:
        await self.http.aclose()
