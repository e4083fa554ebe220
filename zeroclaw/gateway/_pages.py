"""The dashboard's pages, rendered from the control socket's own replies (the same structs
`zeroclaw status --json` prints) through the escaping builder. Pure: data in, bytes out.
No inline script or style: the page's behaviour is `/ui/static/app.js`, which reads the
live events (`/ui/events`) and writes them with `textContent` only."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..control import AgentStatus, ApprovalInfo, NextFire, UsageRow
from ..turns import Invocation, MemoryRecord
from ._html import Markup, document, join, tag

TITLE = "zeroclaw"


def _head(title: str) -> list[Markup]:
    return [
        tag("meta", {"charset": "utf-8"}),
        tag("meta", {"name": "viewport", "content": "width=device-width, initial-scale=1"}),
        tag("title", None, title),
        tag("link", {"rel": "stylesheet", "href": "/ui/static/app.css"}),
        tag("script", {"src": "/ui/static/app.js", "defer": True}),
    ]


def _layout(title: str, csrf: str | None, *content: Markup) -> bytes:
    nav = tag(
        "header",
        None,
        tag("h1", None, tag("a", {"href": "/ui"}, TITLE)),
        None
        if csrf is None
        else tag(
            "form",
            {"method": "post", "action": "/ui/signout", "class": "signout"},
            _csrf_field(csrf),
            tag("button", {"type": "submit"}, "Sign out"),
        ),
    )
    return document(
        _head(f"{title} · {TITLE}"), tag("body", None, nav, tag("main", None, *content))
    )


def _csrf_field(csrf: str) -> Markup:
    return tag("input", {"type": "hidden", "name": "csrf", "value": csrf})


def _table(headers: Sequence[str], rows: Sequence[Markup], empty: str, **attrs: str) -> Markup:
    if not rows:
        return tag("p", {"class": "empty"}, empty)
    head = tag("thead", None, tag("tr", None, [tag("th", None, h) for h in headers]))
    return tag("table", attrs, head, tag("tbody", None, *rows))


def _when(seconds: float | None, now: float) -> str:
    if seconds is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) if now else ""


def _bytes(count: int | None) -> str:
    if count is None:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return ""


# --------------------------------------------------------------------------- sign-in


def signin_page(csrf: str, error: str | None = None) -> bytes:
    return _layout(
        "Sign in",
        None,
        tag(
            "section",
            {"class": "signin"},
            tag("h2", None, "Sign in"),
            None if error is None else tag("p", {"class": "error", "role": "alert"}, error),
            tag(
                "form",
                {"method": "post", "action": "/ui/signin"},
                _csrf_field(csrf),
                tag(
                    "label",
                    None,
                    "Operator token ",
                    tag(
                        "input",
                        {
                            "type": "password",
                            "name": "token",
                            "autocomplete": "current-password",
                            "required": True,
                            "autofocus": True,
                        },
                    ),
                ),
                tag("button", {"type": "submit"}, "Sign in"),
            ),
        ),
    )


# --------------------------------------------------------------------------- overview


@dataclass(frozen=True)
class Overview:
    agents: Sequence[AgentStatus]
    approvals: Sequence[ApprovalInfo]
    invocations: Sequence[Invocation]
    usage: Sequence[UsageRow]
    rss: Mapping[int, int] = field(default_factory=dict)  # pid -> resident bytes
    now: float = 0.0
    next_runs: Sequence[NextFire] = ()  # each agent's schedule due first (status')


def overview_page(data: Overview, csrf: str) -> bytes:
    return _layout(
        "Overview",
        csrf,
        _agents(data),
        tag("section", {"id": "approvals"}, approvals_fragment(data.approvals, csrf)),
        tag(
            "section",
            {"id": "events"},
            tag("h2", None, "Live events"),
            tag("p", {"class": "hint", "id": "events-state"}, "connecting…"),
            tag("ol", {"id": "event-list", "data-stream": "/ui/events"}),
        ),
        _invocations(data.invocations, data.now),
        _usage(data.usage),
    )


def _agents(data: Overview) -> Markup:
    due = {fire.agent: fire for fire in data.next_runs}
    rows = [
        tag(
            "tr",
            {"data-agent": a.alias},
            tag("td", None, tag("a", {"href": f"/ui/memory?agent={a.alias}"}, a.alias)),
            tag("td", {"class": "state", "data-state": a.state}, a.state),
            tag("td", {"class": "pid"}, "" if a.pid is None else a.pid),
            tag("td", {"class": "rss"}, _bytes(data.rss.get(a.pid)) if a.pid else ""),
            tag("td", {"class": "restarts"}, a.restarts),
            tag("td", {"class": "last-error"}, a.last_error or ""),
            tag("td", None, a.activation),
            tag("td", {"class": "next-start"}, _next_start(a.next_start_in)),
            tag("td", {"class": "next-run"}, _next_run(due.get(a.alias), data.now)),
        )
        for a in data.agents
    ]
    headers = (
        "agent",
        "state",
        "pid",
        "memory",
        "restarts",
        "last error",
        "activation",
        "next start",
        "next run",
    )
    return tag(
        "section",
        {"id": "agents"},
        tag("h2", None, "Agents"),
        _table(headers, rows, "No agent is configured.", id="agent-table"),
    )


def _next_start(seconds: float | None) -> str:
    """When the supervisor starts the agent next (a restart's backoff)."""
    return "" if seconds is None else f"in {max(seconds, 0.0):.0f} s"


def _next_run(fire: NextFire | None, now: float) -> str:
    """The agent's schedule due first (issue 28): its name and when (the builder escapes
    the name, an agent's reminder's included)."""
    return "" if fire is None else f"{fire.schedule} at {_when(fire.at, now)}"


def approvals_fragment(approvals: Sequence[ApprovalInfo], csrf: str) -> Markup:
    """The approval queue with its buttons (also served alone, for the live page)."""
    rows = [
        tag(
            "tr",
            {"data-approval": a.id},
            tag("td", None, a.agent),
            tag("td", None, a.channel, ":", a.sender),
            tag("td", {"class": "what"}, a.what),
            tag("td", None, f"{a.expires_in_secs:.0f} s"),
            tag(
                "td",
                None,
                _decide(a.id, "approve", "Approve", csrf),
                _decide(a.id, "deny", "Deny", csrf),
            ),
        )
        for a in approvals
    ]
    return join(
        tag("h2", None, "Approvals waiting"),
        _table(
            ("agent", "from", "what", "expires in", ""),
            rows,
            "No approval is waiting.",
            id="approval-table",
        ),
    )


def _decide(approval_id: str, action: str, label: str, csrf: str) -> Markup:
    return tag(
        "form",
        {"method": "post", "action": f"/ui/approvals/{approval_id}/{action}", "class": "inline"},
        _csrf_field(csrf),
        tag("button", {"type": "submit", "class": action}, label),
    )


def _invocations(invocations: Sequence[Invocation], now: float) -> Markup:
    rows = [
        tag(
            "tr",
            None,
            tag("td", None, i.id),
            tag("td", None, i.agent_id),
            tag("td", None, i.caller),
            tag("td", None, i.state),
            tag("td", None, _when(i.updated_at, now)),
            tag("td", None, i.error_code or ""),
        )
        for i in invocations
    ]
    return tag(
        "section",
        {"id": "invocations"},
        tag("h2", None, "Sub-agent invocations"),
        _table(("id", "sub-agent", "caller", "state", "updated", "error"), rows, "None yet."),
    )


def _usage(rows: Sequence[UsageRow]) -> Markup:
    body = [
        tag(
            "tr",
            None,
            tag("td", None, r.day),
            tag("td", None, r.agent),
            tag("td", None, r.origin),
            tag("td", None, r.provider),
            tag("td", {"class": "num"}, r.turns),
            tag("td", {"class": "num"}, r.input_tokens + r.cached_input_tokens),
            tag("td", {"class": "num"}, r.output_tokens),
            tag("td", {"class": "num"}, r.cost),
        )
        for r in rows
    ]
    return tag(
        "section",
        {"id": "usage"},
        tag("h2", None, "Usage today"),
        _table(
            ("day", "agent", "origin", "provider", "turns", "input", "output", "cost"),
            body,
            "Nothing spent today.",
        ),
    )


# --------------------------------------------------------------------------- memory


def memory_page(
    agent: str,
    agents: Sequence[str],
    records: Sequence[MemoryRecord],
    csrf: str,
    next_before: str | None,
    error: str | None = None,
) -> bytes:
    picker = tag(
        "nav",
        {"class": "agents"},
        [
            tag("a", {"href": f"/ui/memory?agent={a}", "aria-current": a == agent or None}, a)
            for a in agents
        ],
    )
    rows = [
        tag(
            "tr",
            None,
            tag("td", None, r.key),
            tag("td", None, r.category),
            tag("td", None, r.session or ""),
            tag("td", {"class": "content"}, r.content),
            tag("td", None, _when(r.updated_at, 1.0)),
        )
        for r in records
    ]
    more = (
        None
        if next_before is None
        else tag(
            "a", {"href": f"/ui/memory?agent={agent}&before={next_before}", "rel": "next"}, "Older"
        )
    )
    return _layout(
        f"Memory of {agent}",
        csrf,
        tag(
            "section",
            {"id": "memory"},
            tag("h2", None, "Memory of ", agent, " (read-only)"),
            picker,
            None if error is None else tag("p", {"class": "error"}, error),
            _table(("key", "category", "session", "content", "updated"), rows, "No record."),
            more,
        ),
    )


def not_found_page(csrf: str | None) -> bytes:
    return _layout("Not found", csrf, tag("p", None, "No such page."))
