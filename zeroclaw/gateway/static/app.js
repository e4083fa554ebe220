// The dashboard's one script (served from our origin: the CSP allows no other, and no
// inline script). It follows the daemon's events over server-sent events and writes
// them with textContent only: whatever an event holds (a sender's name, a model's text)
// stays text. It never builds HTML from an event.
"use strict";

const MAX_EVENTS = 200;

function summary(event) {
  const parts = [];
  for (const [key, value] of Object.entries(event)) {
    if (key === "kind") continue;
    parts.push(key + "=" + (typeof value === "string" ? value : JSON.stringify(value)));
  }
  return parts.join(" ");
}

function showEvent(list, published) {
  const event = published.event || {};
  const item = document.createElement("li");
  item.dataset.kind = event.kind || "";
  const when = document.createElement("time");
  when.textContent = new Date(published.at * 1000).toLocaleTimeString();
  const kind = document.createElement("strong");
  kind.textContent = " " + (event.kind || "?") + " ";
  const text = document.createElement("span");
  text.textContent = summary(event);
  item.append(when, kind, text);
  list.prepend(item);
  while (list.children.length > MAX_EVENTS) list.lastElementChild.remove();
}

function updateAgent(event) {
  if (event.kind !== "agent.transition") return;
  for (const row of document.querySelectorAll("tr[data-agent]")) {
    if (row.dataset.agent !== event.alias) continue;
    const cell = row.querySelector("td.state");
    if (cell) {
      cell.textContent = event.to_state;
      cell.dataset.state = event.to_state;
    }
  }
}

async function refreshApprovals() {
  const section = document.getElementById("approvals");
  if (!section) return;
  const answer = await fetch("/ui/fragments/approvals", { credentials: "same-origin" });
  if (!answer.ok) return;
  // Server-rendered and escaped; parsed inert (DOMParser runs no script), then moved in.
  const parsed = new DOMParser().parseFromString(await answer.text(), "text/html");
  section.replaceChildren(...Array.from(parsed.body.childNodes));
}

function follow() {
  const list = document.getElementById("event-list");
  const state = document.getElementById("events-state");
  if (!list) return;
  const source = new EventSource(list.dataset.stream);
  source.onopen = () => { if (state) state.textContent = "live"; };
  source.onerror = () => { if (state) state.textContent = "reconnecting…"; };
  source.onmessage = (message) => {
    let published;
    try {
      published = JSON.parse(message.data);
    } catch (_) {
      return;
    }
    showEvent(list, published);
    const event = published.event || {};
    updateAgent(event);
    if (event.kind === "approval.requested" || event.kind === "approval.resolved") {
      refreshApprovals();
    }
  };
}

document.addEventListener("DOMContentLoaded", follow);
