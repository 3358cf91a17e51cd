// The memories page: the owner's memories newest first, page by page, or a search (bm25, vector,
// hybrid); each row can be forgotten after a confirmation.

import { call } from "./api.js";
import { h, num, t } from "./dom.js";

const $ = (id) => document.getElementById(id);
const state = { offset: 0, search: null, pending: null };

function status(text) {
  $("memories-status").textContent = text;
}

function filters() {
  return { session: $("filter-session").value.trim(), max_sensitivity: $("filter-sensitivity").value };
}

function pageSize() {
  return Number($("page-size").value) || 20;
}

function row(memory, hit) {
  const when = memory.occurred_at ? memory.occurred_at.slice(0, 16).replace("T", " ") : "–";
  const forget = h("button", { type: "button", class: "danger small", "aria-label": `Forget memory ${memory.id}`,
    text: "Forget" });
  forget.addEventListener("click", () => confirmForget(memory, forget));
  return h("tr", { "data-memory-id": memory.id },
    hit ? h("td", { "data-field": "score" }, h("span", { class: "score-num", text: num(hit.score, 4) }),
      h("span", { class: "meta block", text: Object.entries(hit.scores || {}).map(([k, v]) => `${k} ${num(v)}`).join(" · ") }))
      : null,
    h("td", { class: "memory-cell" }, t("p", memory.text, { class: "memory-text", "data-field": "text" }),
      memory.reply ? h("p", { class: "reply" }, h("span", { class: "meta", text: "reply: " }), t("span", memory.reply)) : null),
    h("td", null, h("code", { text: memory.id })),
    t("td", memory.kind), t("td", memory.session_id || "–"), t("td", when),
    t("td", memory.sensitivity), t("td", memory.language),
    h("td", null, forget));
}

function render(items, hits) {
  const headers = [hits ? "score" : null, "text", "id", "kind", "session", "occurred", "sensitivity", "language", "action"]
    .filter(Boolean);
  if (!items.length) {
    $("memories-table").replaceChildren(h("p", { class: "empty", text: hits ? "No memory matches." : "No memory on this page." }));
    return;
  }
  const caption = hits ? `Search results for “${state.search.q}” (${state.search.mode})` : "Memories, newest first";
  $("memories-table").replaceChildren(h("table", { class: "memories-table" },
    t("caption", caption),
    h("thead", null, h("tr", null, headers.map((x) => h("th", { scope: "col", text: x })))),
    h("tbody", null, items.map((m, i) => row(m, hits ? hits[i] : null)))));
}

async function load() {
  const ticket = Symbol("load");
  state.pending = ticket;
  status("Loading…");
  try {
    if (state.search) {
      const hits = await call("GET", "/v1/search", { query: { ...filters(), q: state.search.q, mode: state.search.mode,
        limit: Math.min(pageSize(), 100) } });
      if (state.pending !== ticket) return;  // a newer request is on its way
      render(hits.map((x) => x.memory), hits);
      status(`${hits.length} memories found by ${state.search.mode} search.`);
      $("page-prev").disabled = true;
      $("page-next").disabled = true;
      $("page-label").textContent = "";
    } else {
      const size = pageSize();
      const items = await call("GET", "/v1/memories", { query: { ...filters(), limit: size + 1, offset: state.offset } });
      if (state.pending !== ticket) return;
      const more = items.length > size;
      render(items.slice(0, size), null);
      status(`Memories ${items.length ? state.offset + 1 : 0}–${state.offset + Math.min(items.length, size)}${more ? " (more on the next page)" : ""}.`);
      $("page-prev").disabled = state.offset === 0;
      $("page-next").disabled = !more;
      $("page-label").textContent = `Page ${Math.floor(state.offset / size) + 1}`;
    }
    window.dispatchEvent(new Event("memroute:ok"));
  } catch (error) {
    status("");
    window.dispatchEvent(new CustomEvent("memroute:error", { detail: error }));
  }
}

function confirmForget(memory, opener) {
  const dialog = $("forget-dialog");
  $("forget-text").replaceChildren(h("code", { text: memory.id }), " ", t("q", memory.text));
  dialog.returnValue = "";
  dialog.addEventListener("close", async () => {
    opener.focus();
    if (dialog.returnValue !== "forget") return;
    try {
      await call("DELETE", `/v1/memories/${encodeURIComponent(memory.id)}`);
      status(`Forgot ${memory.id}.`);
      await load();
      $("memories-status").textContent = `Forgot ${memory.id}. ${$("memories-status").textContent}`;
    } catch (error) {
      window.dispatchEvent(new CustomEvent("memroute:error", { detail: error }));
    }
  }, { once: true });
  dialog.showModal();
}

function init() {
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const q = $("search-q").value.trim();
    if (!q) return;
    state.search = { q, mode: $("search-mode").value };
    load();
  });
  $("search-clear").addEventListener("click", () => {
    state.search = null;
    state.offset = 0;
    $("search-q").value = "";
    load();
  });
  $("filter-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.offset = 0;
    load();
  });
  $("page-size").addEventListener("change", () => {
    state.offset = 0;
    load();
  });
  $("page-prev").addEventListener("click", () => {
    state.offset = Math.max(0, state.offset - pageSize());
    load();
  });
  $("page-next").addEventListener("click", () => {
    state.offset += pageSize();
    load();
  });
}

export const memoriesPage = { init, shown: load };
