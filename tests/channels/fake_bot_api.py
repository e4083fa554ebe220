"""A loopback server that speaks the Telegram Bot API methods the channel uses (getMe,
getUpdates, sendMessage, editMessageText, sendChatAction, answerCallbackQuery, setWebhook,
deleteWebhook), over real
HTTP/1.1 (h11, keep-alive) on 127.0.0.1. Telegram itself is not reachable here.

It keeps what Telegram keeps: the updates not yet confirmed (a getUpdates with `offset`
confirms every update below it), the messages in each chat. A test queues updates as a
Telegram user would cause them (`message`, `press`), can make any method answer 429 with a
`retry_after` for its next calls (`flood`), and reads every call the bot made (`calls`).
While a webhook is set (`webhook`), getUpdates is refused with 409 as Telegram refuses it;
the updates themselves a webhook test POSTs to the gateway as Telegram would.
Only requests under `/bot<token>/` are answered; any other token gets 401 as Telegram
answers it.

Run as a module it serves until killed, printing its port on the first line, for daemon
tests: `python -m tests.channels.fake_bot_api TOKEN [PORT]`; a test then drives it over
`/_test/...` (POST message, press, flood; calls, messages; next: the bot's next word).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import h11
import trio

BOT = {"id": 777000111, "is_bot": True, "first_name": "Zeroclaw", "username": "zc_test_bot"}


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    result: Any = None  # what it answered, when it succeeded


@dataclass
class FakeBotApi:
    token: str
    port: int = 0
    updates: list[dict[str, Any]] = field(default_factory=list)  # not yet confirmed
    calls: list[Call] = field(default_factory=list)
    messages: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    floods: dict[str, list[int]] = field(default_factory=dict)  # method -> retry_afters
    failing: dict[str, int] = field(default_factory=dict)  # method -> HTTP status (500...)
    replay_confirmed: bool = False  # answer getUpdates from update 1 whatever the offset
    webhook: dict[str, Any] | None = None  # setWebhook's url and secret_token, while set
    next_update: int = 1
    next_message: int = 1000
    confirmed_below: int = 0
    _changed: trio.Event = field(default_factory=trio.Event)
    _all: list[dict[str, Any]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ the test's side

    def _queue(self, update: dict[str, Any]) -> int:
        update["update_id"] = self.next_update
        self.next_update += 1
        self.updates.append(update)
        self._all.append(update)
        self._wake()
        return int(update["update_id"])

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def message(
        self,
        user: dict[str, Any],
        text: str | None,
        *,
        chat: dict[str, Any] | None = None,
        entities: list[dict[str, Any]] | None = None,
        reply_to: int | None = None,
        **more: Any,
    ) -> int:
        """A user's message (a private chat with them unless `chat`); its update id."""
        chat = chat or {"id": user["id"], "type": "private"}
        message_id = self.next_message
        self.next_message += 1
        message: dict[str, Any] = {
            "message_id": message_id,
            "from": user,
            "chat": chat,
            "date": 1_800_000_000,
            **more,
        }
        if text is not None:
            message["text"] = text
        if entities:
            message["entities"] = entities
        if reply_to is not None:
            message["reply_to_message"] = self.messages[(chat["id"], reply_to)]
        self.messages[(chat["id"], message_id)] = message
        return self._queue({"message": message})

    def press(self, user: dict[str, Any], data: str, chat_id: int, message_id: int) -> int:
        """A user presses an inline button of a message the bot sent."""
        held = self.messages[(chat_id, message_id)]
        query = {"id": f"q{self.next_update}", "from": user, "data": data, "message": held}
        return self._queue({"callback_query": query})

    def flood(self, method: str, *retry_after: int) -> None:
        """The next calls of `method` answer 429 with these retry_afters, in order."""
        self.floods.setdefault(method, []).extend(retry_after)

    def sent(self, chat_id: int | None = None) -> list[dict[str, Any]]:
        return [
            c.params
            for c in self.calls
            if c.method == "sendMessage" and (chat_id is None or c.params["chat_id"] == chat_id)
        ]

    def of(self, method: str) -> list[dict[str, Any]]:
        return [c.params for c in self.calls if c.method == method]

    def text_of(self, chat_id: int, message_id: int) -> str:
        return str(self.messages[(chat_id, message_id)].get("text", ""))

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Until `predicate` holds (checked at each call the bot makes or update queued)."""
        while not predicate():
            await self._changed.wait()

    # ------------------------------------------------------------------ the bot's side

    def _answer(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        call = Call(method, params)
        self.calls.append(call)
        self._wake()
        if method in self.failing:
            status = self.failing[method]
            return status, {"ok": False, "error_code": status, "description": "Bad Gateway"}
        flood = self.floods.get(method)
        if flood:
            after = flood.pop(0)
            return 429, {
                "ok": False,
                "error_code": 429,
                "description": f"Too Many Requests: retry after {after}",
                "parameters": {"retry_after": after},
            }
        handler = getattr(self, f"_{method}", None)
        if handler is None:
            return 404, {"ok": False, "error_code": 404, "description": "Not Found"}
        try:
            call.result = handler(params)
        except _BadRequest as exc:
            return 400, {"ok": False, "error_code": 400, "description": f"Bad Request: {exc}"}
        return 200, {"ok": True, "result": call.result}

    def _getMe(self, params: dict[str, Any]) -> Any:
        return BOT

    def _getUpdates(self, params: dict[str, Any]) -> Any:
        return []  # the long poll answers (`_long_poll`)

    def _pending(self, offset: int) -> list[dict[str, Any]]:
        if self.replay_confirmed:
            return list(self._all)
        if offset:
            self.confirmed_below = max(self.confirmed_below, offset)
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        return list(self.updates)

    def _sendMessage(self, params: dict[str, Any]) -> Any:
        text = params.get("text")
        if not isinstance(text, str) or not text:
            raise _BadRequest("message text is empty")
        if _utf16(text) > 4096:
            raise _BadRequest("message is too long")
        if params.get("parse_mode") == "MarkdownV2":
            _check_markdown_v2(text)
        chat_id = params["chat_id"]
        message_id = self.next_message
        self.next_message += 1
        chat_type = "private" if chat_id > 0 else "supergroup"
        message = {
            "message_id": message_id,
            "from": BOT,
            "chat": {"id": chat_id, "type": chat_type},
            "date": 1_800_000_000,
            "text": text,
        }
        if "reply_markup" in params:
            message["reply_markup"] = params["reply_markup"]
        self.messages[(chat_id, message_id)] = message
        return message

    def _editMessageText(self, params: dict[str, Any]) -> Any:
        key = (params["chat_id"], params["message_id"])
        held = self.messages.get(key)
        if held is None:
            raise _BadRequest("message to edit not found")
        text = params.get("text", "")
        if not text or _utf16(text) > 4096:
            raise _BadRequest("MESSAGE_TOO_LONG" if text else "message text is empty")
        if params.get("parse_mode") == "MarkdownV2":
            _check_markdown_v2(text)
        if text == held.get("text") and "reply_markup" not in held:
            raise _BadRequest("message is not modified")
        held["text"] = text
        held.pop("reply_markup", None)
        if "reply_markup" in params:
            held["reply_markup"] = params["reply_markup"]
        return held

    def _sendChatAction(self, params: dict[str, Any]) -> Any:
        return True

    def _answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        return True

    def _setWebhook(self, params: dict[str, Any]) -> Any:
        url = params.get("url")
        if not isinstance(url, str) or not url:
            raise _BadRequest("bad webhook: an HTTPS URL must be provided for webhook")
        self.webhook = {"url": url, "secret_token": params.get("secret_token", "")}
        return True

    def _deleteWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = None
        return True

    # ------------------------------------------------------------------ serving

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(self.port, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, stream: trio.SocketStream) -> None:
        # the bot may go away mid-request (a restart): as Telegram, serve on
        with contextlib.suppress(
            trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError
        ):
            await self._exchange(stream)

    async def _exchange(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        async with stream:
            while True:
                request, body = await _read_request(conn, stream)
                if request is None:
                    return
                status, answer = await self._route(request.target.decode(), body)
                data = json.dumps(answer).encode()
                headers = [("content-type", "application/json"), ("content-length", str(len(data)))]
                for event in (
                    h11.Response(status_code=status, headers=headers),
                    h11.Data(data=data),
                    h11.EndOfMessage(),
                ):
                    await stream.send_all(conn.send(event) or b"")
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()

    async def _route(self, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        params = json.loads(body or b"{}")
        if path == "/_test/next":
            return 200, await self._next(params)
        if path.startswith("/_test/"):
            return 200, self._control(path.removeprefix("/_test/"), params)
        prefix = f"/bot{self.token}/"
        if not path.startswith(prefix):
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        method = path.removeprefix(prefix)
        if method == "getUpdates" and self.webhook is not None:
            return 409, {
                "ok": False,
                "error_code": 409,
                "description": "Conflict: can't use getUpdates method while webhook is active",
            }
        if method == "getUpdates":
            return await self._long_poll(params)
        return self._answer(method, params)

    async def _long_poll(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        offset = int(params.get("offset", 0))
        status, answer = self._answer("getUpdates", params)
        if status != 200:
            return status, answer
        with trio.move_on_after(float(params.get("timeout", 0))):
            while not self._pending(offset):
                await self._changed.wait()
        return 200, {"ok": True, "result": self._pending(offset)}

    async def _next(self, params: dict[str, Any]) -> dict[str, Any]:
        """The bot's next sendMessage or answerCallbackQuery after the first `after` calls
        of those (waits up to `timeout` s; {} when none came)."""
        wanted = ("sendMessage", "answerCallbackQuery")

        def said() -> list[Call]:
            return [c for c in self.calls if c.method in wanted]

        with trio.move_on_after(float(params.get("timeout", 60))):
            await self.until(lambda: len(said()) > params["after"])
        calls = said()
        if len(calls) <= params["after"]:
            return {}
        call = calls[params["after"]]
        return {"method": call.method, "params": call.params, "result": call.result}

    def _control(self, what: str, params: dict[str, Any]) -> dict[str, Any]:
        if what == "message":
            return {"update_id": self.message(**params)}
        if what == "press":
            return {"update_id": self.press(**params)}
        if what == "flood":
            self.flood(params["method"], *params["retry_after"])
            return {}
        if what == "pushed":  # the updates queued, taken to be POSTed as Telegram would
            pushed, self.updates = self.updates, []
            return {"updates": pushed}
        if what == "calls":
            return {"calls": [{"method": c.method, "params": c.params} for c in self.calls]}
        if what == "messages":
            return {"messages": [m for m in self.messages.values() if m["from"] == BOT]}
        return {"error": f"no control {what!r}"}


class _BadRequest(Exception):
    pass


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


_RESERVED = set("_*[]()~`>#+-=|{}.!")


def _check_markdown_v2(text: str) -> None:
    """Telegram refuses MarkdownV2 with a reserved character not escaped (outside the
    entities it opens and closes: `*bold*` here)."""
    escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in _RESERVED and ch != "*":
            raise _BadRequest(f"can't parse entities: character '{ch}' is reserved")


async def _read_request(
    conn: h11.Connection, stream: trio.SocketStream
) -> tuple[h11.Request | None, bytes]:
    request: h11.Request | None = None
    body = b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            conn.receive_data(data)
            if not data and conn.their_state is not h11.DONE:
                return None, b""
            continue
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return request, body
        elif isinstance(event, h11.ConnectionClosed):
            return None, b""


async def _main(token: str, port: int) -> None:
    server = FakeBotApi(token, port)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        print(server.port, flush=True)


if __name__ == "__main__":
    trio.run(_main, sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
