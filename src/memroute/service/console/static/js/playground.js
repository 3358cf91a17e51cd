// The playground: a conversation typed turn by turn. A user turn is recalled first (the service reads
// the earlier turns from the session's log) and then routed in its session (which appends it to the log),
// so each turn sees exactly the conversation before it; an assistant turn is only appended to the log.

import { call } from "./api.js";
import { h, t } from "./dom.js";
import { turnView } from "./turn_view.js";

const SESSION_ITEM = "memroute.console.session";
const $ = (id) => document.getElementById(id);

const state = { turns: [], selected: -1, loadedSession: null, busy: false };

function newSessionId() {
  const bytes = new Uint8Array(6);
  window.crypto.getRandomValues(bytes);
  return `console-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

function session() {
  return $("session").value.trim();
}

function status(text) {
  $("turn-status").textContent = text;
}

function fail(error) {
  window.dispatchEvent(new CustomEvent("memroute:error", { detail: error }));
}

function renderTranscript() {
  const list = $("transcript");
  let userTurn = 0;
  list.replaceChildren(...state.turns.map((turn, i) => {
    const isUser = turn.role === "user";
    if (isUser) userTurn += 1;
    const item = h("li", { class: `turn role-${turn.role}`, "data-role": turn.role },
      h("span", { class: "role", text: isUser ? `user · ${userTurn}` : turn.role }),
      t("p", turn.text, { class: "turn-text" }));
    if (turn.recall || turn.route || turn.recallError || turn.routeError) {
      const summary = turn.route?.agent ? ` → ${turn.route.agent} (${turn.route.action})` : "";
      const button = h("button", { type: "button", class: "link", "aria-pressed": String(i === state.selected),
        text: `Show turn ${userTurn}${summary}` });
      button.addEventListener("click", () => select(i));
      item.append(button);
    }
    return item;
  }));
  if (!state.turns.length) list.append(h("li", { class: "empty", text: "No turn yet in this session." }));
}

function select(index) {
  state.selected = index;
  const turn = state.turns[index];
  const n = state.turns.slice(0, index + 1).filter((x) => x.role === "user").length;
  $("turn-results").replaceChildren(turnView(n, turn));
  renderTranscript();
}

async function loadSession() {
  const id = session();
  state.turns = [];
  state.selected = -1;
  state.loadedSession = id;
  $("turn-results").replaceChildren(h("p", { class: "empty", text: "Send a message to see how it is routed and what is recalled." }));
  if (id) {
    try {
      const messages = await call("GET", `/v1/sessions/${encodeURIComponent(id)}/messages`, { query: { limit: 200 } });
      state.turns = messages.map((m) => ({ role: m.role, text: m.text }));
      status(messages.length ? `Session ${id}: ${messages.length} earlier turns loaded from its log.` : "");
    } catch (error) {
      fail(error);
    }
  }
  renderTranscript();
}

function setBusy(busy) {
  state.busy = busy;
  $("send-user").disabled = busy;
  $("send-assistant").disabled = busy;
  $("results").setAttribute("aria-busy", String(busy));
}

async function sendUser(text) {
  const id = session();
  const body = { text, session: id || undefined, trace: true };
  const now = $("now").value.trim();
  if (now) body.now = now;
  const turn = { role: "user", text };
  status("Recalling and routing…");
  try {
    turn.recall = await call("POST", "/v1/recall", { body });
  } catch (error) {
    turn.recallError = error;
  }
  try {
    turn.route = await call("POST", "/v1/route", { body: { text, session: id || undefined } });
  } catch (error) {
    turn.routeError = error;
    // Routing appends the turn to the log; when it could not (e.g. no agents), append it here so that
    // the next turn's recall still sees this one.
    if (id && error.status !== 401) {
      await call("POST", `/v1/sessions/${encodeURIComponent(id)}/messages`, { body: { role: "user", text } })
        .catch(() => {});
    }
  }
  state.turns.push(turn);
  select(state.turns.length - 1);
  const n = state.turns.filter((x) => x.role === "user").length;
  const routed = turn.route ? (turn.route.agent ? `routed to ${turn.route.agent} (${turn.route.action})` : "no confident route")
    : "routing failed";
  const recalled = turn.recall ? `${turn.recall.memories.length} memories recalled` : "recall failed";
  status(`Turn ${n}: ${routed}; ${recalled}.`);
  return !(turn.recallError && turn.routeError);
}

async function sendAssistant(text) {
  const id = session();
  if (!id) {
    status("An assistant turn needs a session: name one first.");
    return false;
  }
  try {
    await call("POST", `/v1/sessions/${encodeURIComponent(id)}/messages`, { body: { role: "assistant", text } });
  } catch (error) {
    fail(error);
    return false;
  }
  state.turns.push({ role: "assistant", text });
  renderTranscript();
  status("Assistant turn added to the session's log.");
  return true;
}

async function submit(role) {
  const box = $("turn-text");
  const text = box.value.trim();
  if (!text || state.busy) return;
  setBusy(true);
  try {
    const ok = role === "user" ? await sendUser(text) : await sendAssistant(text);
    if (ok) box.value = "";
  } finally {
    setBusy(false);
    box.focus();
  }
}

function init() {
  $("session").value = window.sessionStorage.getItem(SESSION_ITEM) || newSessionId();
  $("session").addEventListener("change", () => {
    window.sessionStorage.setItem(SESSION_ITEM, session());
    loadSession();
  });
  $("new-session").addEventListener("click", () => {
    $("session").value = newSessionId();
    window.sessionStorage.setItem(SESSION_ITEM, session());
    loadSession();
    $("turn-text").focus();
  });
  $("turn-form").addEventListener("submit", (event) => {
    event.preventDefault();
    submit("user");
  });
  $("send-assistant").addEventListener("click", () => submit("assistant"));
  $("turn-text").addEventListener("keydown", (event) => {
    // Enter sends; Shift+Enter is a new line; Enter that confirms an IME conversion (Japanese, Korean
    // input) must not send the half-typed message.
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
      event.preventDefault();
      $("turn-form").requestSubmit();
    }
  });
  // Another owner has other sessions: read the log again when the page is next shown.
  window.addEventListener("memroute:owner", () => { state.loadedSession = null; });
  renderTranscript();
}

function shown() {
  if (state.loadedSession !== session()) loadSession();
}

export const playgroundPage = { init, shown };
