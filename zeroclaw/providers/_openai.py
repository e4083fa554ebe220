"""OpenAI-compatible chat completions (Ollama, vLLM, llama.cpp server, OpenRouter), streamed,
with tool calling."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._http import EncodedTools, HttpModel, SseEvent, StreamedStep, encode_body, load_json
from ._spec import OpenAISpec
from ._types import Conversation, OnDelta, ProviderError, Step, ToolSpec
from ._usage import openai_usage


def openai_tools(specs: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """The toolset as chat-completions `tools`. Pure."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in specs
    ]


def openai_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """The conversation as chat-completions messages. Pure."""
    messages: list[dict[str, Any]] = []
    system = conversation.system_text()  # the identity, then what was recalled (as data)
    if system:
        messages.append({"role": "system", "content": system})
    messages += [{"role": t.role, "content": t.content} for t in conversation.history]
    messages.append({"role": "user", "content": conversation.user})
    for round_ in conversation.rounds:
        messages.append(
            {
                "role": "assistant",
                "content": round_.step.text,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.args)},
                    }
                    for call in round_.step.tool_calls
                ],
            }
        )
        messages += [
            {"role": "tool", "tool_call_id": o.call.id, "content": o.as_text()}
            for o in round_.outcomes
        ]
    return messages


_tools_json = EncodedTools(openai_tools)


class _Stream(StreamedStep):
    """One streamed completion: `data:` chunks with content and tool-call fragments; or
    the whole completion (`choices[].message`), when a server answered the streamed
    request without streaming."""

    def __init__(self, provider: str, on_delta: OnDelta) -> None:
        super().__init__(provider, on_delta, "call_")
        self.done = False

    async def feed(self, event: SseEvent) -> None:
        if event.data.strip() == "[DONE]":
            self.done = True
            return
        chunk = load_json(self.provider, event.data)
        if not isinstance(chunk, dict):
            raise self.malformed("a chunk is not an object")
        if "error" in chunk:
            raise ProviderError(self.provider, f"error in stream: {chunk['error']}", "server")
        self.usage = openai_usage(chunk.get("usage")) or self.usage
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            raise self.malformed("no 'choices' in a chunk")
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            content = delta.get("content")
            if isinstance(content, str):
                await self.text_delta(content)
            for fragment in delta.get("tool_calls") or ():
                self._call_fragment(fragment)

    async def whole(self, data: Any) -> None:
        """A non-streamed completion, given as the same deltas a stream would have."""
        if not isinstance(data, dict):
            raise self.malformed("the answer is not an object")
        if "error" in data:
            raise ProviderError(self.provider, f"error in answer: {data['error']}", "server")
        self.usage = openai_usage(data.get("usage"))
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise self.malformed("no 'choices' in the answer")
        for choice in choices:
            message = choice.get("message") if isinstance(choice, dict) else None
            if not isinstance(message, dict):
                raise self.malformed("a choice without a 'message'")
            content = message.get("content")
            if isinstance(content, str):
                await self.text_delta(content)
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                raise self.malformed("'tool_calls' is not a list")
            for index, call in enumerate(calls):
                if isinstance(call, dict) and "index" not in call:
                    call = {**call, "index": index}
                self._call_fragment(call)
        self.done = True

    def _call_fragment(self, fragment: Any) -> None:
        if not isinstance(fragment, dict) or not isinstance(fragment.get("index", 0), int):
            raise self.malformed("bad tool_calls fragment")
        call = self.call(fragment.get("index", 0))
        function = fragment.get("function") or {}
        if not isinstance(function, dict):
            raise self.malformed("bad tool_calls function")
        if fragment.get("id"):
            call["id"] = str(fragment["id"])
        if function.get("name"):
            call["name"] += str(function["name"])
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # some servers send the object, not its JSON text
            call["args"] = json.dumps(arguments)
        elif arguments:
            call["args"] += str(arguments)


class OpenAIProvider:
    def __init__(self, alias: str, config: OpenAISpec, env: Mapping[str, str]) -> None:
        self.name = f"openai.{alias}"
        self.model = config.model
        self.stream_usage = config.stream_usage
        headers = {"content-type": "application/json"}
        key_env = config.api_key_env
        if key_env:
            key = env.get(key_env)
            if not key:
                raise ProviderError(
                    self.name, f"environment variable {key_env} is not set", "setup"
                )
            headers["authorization"] = f"Bearer {key}"
        self.http = HttpModel(
            self.name,
            config.base_url,
            headers=headers,
            timeout_secs=config.timeout_secs,
            max_retries=config.max_retries,
            answer_timeout_secs=config.answer_timeout_secs,
        )

    async def complete(self, conversation: Conversation, on_delta: OnDelta) -> Step:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(conversation),
            "stream": True,
        }
        if self.stream_usage:  # the usage comes in a last chunk of its own
            payload["stream_options"] = {"include_usage": True}
        if conversation.tools:  # an empty `tools` list is refused by some servers
            payload["tools"] = _tools_json(conversation.tools)
        stream = _Stream(self.name, on_delta)
        await self.http.stream("chat/completions", encode_body(payload), stream.feed, stream.whole)
        if not stream.done and not stream.text and not stream.calls:
            raise stream.malformed("the stream ended with nothing")
        return stream.step()

    async def aclose(self) -> None:
        await self.http.aclose()
