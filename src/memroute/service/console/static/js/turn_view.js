// What the playground shows for one user turn: the routing decision with every candidate, the recalled
// memories, the memory pack and the trace. Everything here comes from the service's answers as they are.

import { barChart } from "./charts.js";
import { explained, facts, h, num, scoreCell, t, table } from "./dom.js";

// What the numbers mean, shown as tooltips where they appear.
const HELP = {
  confidence: "How sure the router is, from 0 to 1, that this agent is the right one. Below the agent's "
    + "threshold the answer is \"no agent\": ask the user.",
  threshold: "The lowest confidence at which a message goes to this agent (the catalogue's threshold, or "
    + "the one memroute fit chose).",
  score: "The agent's combined score over the routing strategies (meaning, words, keywords, mentions, tools); "
    + "it orders the candidates.",
  gap: "gap: how far the best other agent leads the current one on this message's own words. margin: the "
    + "lead a switch needs on this turn (larger for a short answer, smaller after \"by the way\"). The "
    + "agent switches when the gap is above the margin.",
  relevance: "How sure memroute is that this memory matters for the turn: high, medium or none (from the "
    + "reranker's estimate, meaning similarity and the message's keywords).",
  memoryScore: "The reranker's estimated probability that this is the memory the message asks about.",
};

function card(id, title, ...body) {
  return h("section", { class: "card", "aria-labelledby": id, "data-part": id.replace(/-\d+$/, "") },
    h("h4", { id }, title), ...body);
}

function list(values, cls = "chips") {
  if (!values || values.length === 0) return null;
  return h("ul", { class: cls }, values.map((v) => t("li", v)));
}

/** One strategy's part of a candidate's score: its score and what it matched (never the user's text). */
function strategyLine(name, detail) {
  const parts = [];
  for (const [key, value] of Object.entries(detail || {})) {
    if (key === "score") continue;
    if (Array.isArray(value)) parts.push(`${key.replaceAll("_", " ")}: ${value.join(", ") || "–"}`);
    else if (typeof value === "number") parts.push(`${key.replaceAll("_", " ")} ${num(value)}`);
    else if (value !== null && typeof value === "object") parts.push(`${key.replaceAll("_", " ")}: ${JSON.stringify(value)}`);
    else if (value !== null && value !== undefined) parts.push(`${key.replaceAll("_", " ")}: ${value}`);
  }
  return h("li", { "data-strategy": name },
    h("span", { class: "strategy-name", text: name }), " ",
    h("span", { class: "num", text: num(detail?.score) }),
    parts.length ? [" — ", t("span", parts.join("; "))] : null);
}

function routeCard(n, route, error) {
  const id = `routing-${n}`;
  if (error) return card(id, "Routing", h("p", { class: "error", role: "alert", text: error.message }));
  const chosen = (route.candidates || []).find((c) => c.agent_id === route.agent);
  const decision = h("p", { class: "decision" },
    route.agent
      ? [h("span", { class: "agent", "data-field": "agent", "data-agent-id": route.agent },
        chosen?.name || route.agent), " ", h("code", { text: route.agent })]
      : h("span", { class: "agent none", "data-field": "agent", text: "no confident route" }),
    " ", h("span", { class: `badge action-${route.action}`, "data-field": "action", text: route.action }));
  const rows = (route.candidates || []).map((c) => ({
    attrs: { "data-agent-id": c.agent_id, class: c.agent_id === route.agent ? "chosen" : null },
    cells: [String(c.rank), h("span", null, t("span", c.name), " ", h("code", { text: c.agent_id })),
      h("td", { "data-field": "score" }, scoreCell(c.score, `score of ${c.agent_id}`)),
      num(c.confidence), num(c.threshold),
      h("ul", { class: "strategies" }, Object.entries(c.strategies || {}).map(([k, v]) => strategyLine(k, v)))],
  }));
  return card(id, "Routing", decision,
    t("p", route.reason, { class: "reason", "data-field": "reason" }),
    facts([["mode", route.mode], ["previous agent", route.previous || "none"],
      ["continuation", route.continuation], ["context used", route.used_context ? "yes" : "no"],
      ["cues", route.cues?.length ? route.cues.join(", ") : "none"],
      ["confidence", num(route.confidence), HELP.confidence],
      ["gap / margin", route.gap === undefined ? null : `${num(route.gap)} / ${num(route.margin)}`, HELP.gap],
      ["catalogue", route.catalogue], ["latency", `${num(route.latency_ms, 2)} ms`]]),
    rows.length ? table("Every candidate, best first", ["#", "agent", explained("span", "score", HELP.score),
      explained("span", "confidence", HELP.confidence), explained("span", "threshold", HELP.threshold),
      "strategies (score — what matched)"], rows, { class: "candidates" })
      : h("p", { class: "empty", text: "The catalogue has no agent to route to." }));
}

function memoryItem(m) {
  const when = m.occurred_at ? m.occurred_at.slice(0, 16).replace("T", " ") : "undated";
  return h("li", { class: `memory relevance-${m.relevance}`, "data-memory-id": m.id },
    h("div", { class: "memory-head" },
      h("span", { class: `badge relevance-${m.relevance}`, "data-field": "relevance", text: m.relevance,
        title: HELP.relevance }),
      h("span", { "data-field": "score", title: HELP.memoryScore }, scoreCell(m.score, `score of ${m.id}`)),
      h("code", { text: m.id }), h("span", { class: "meta", text: `${m.kind} · ${when}${m.session_id ? ` · ${m.session_id}` : ""}` })),
    t("p", m.text, { class: "memory-text", "data-field": "text" }),
    m.reply ? h("p", { class: "reply" }, h("span", { class: "meta", text: "reply: " }), t("span", m.reply)) : null,
    t("p", m.reason, { class: "reason", "data-field": "reason" }),
    h("p", { class: "meta", text: Object.entries(m.scores || {}).map(([k, v]) => `${k} ${num(v)}`).join(" · ") }));
}

function recallCard(n, recall, error) {
  const id = `recalled-${n}`;
  if (error) return card(id, "Recalled memories", h("p", { class: "error", role: "alert", text: error.message }));
  const memories = recall.memories || [];
  return card(id, `Recalled memories (${memories.length})`,
    h("p", { class: "meta", "data-field": "inject" },
      recall.should_inject ? "Put in the prompt: at least one memory of high relevance, or two of medium."
        : "Not put in the prompt: that needs one memory of high relevance, or two of medium.",
      recall.injection_strategy ? ` Strategy: ${recall.injection_strategy}.` : ""),
    memories.length ? h("ol", { class: "memories" }, memories.map(memoryItem))
      : h("p", { class: "empty", text: "No memory was recalled for this turn." }));
}

function packCard(n, recall) {
  if (!recall) return null;
  const pack = recall.memory_pack || "";
  return card(`pack-${n}`, "Memory pack",
    pack ? t("pre", pack, { class: "pack", "data-field": "pack", tabindex: 0 })
      : h("p", { class: "empty", text: "Empty: nothing is injected into the prompt for this turn." }));
}

function analysisFacts(a) {
  if (!a) return null;
  const range = a.time_range ? `${a.time_range.expression ?? ""} ${a.time_range.start ?? "…"} → ${a.time_range.end ?? "…"}` : null;
  const refs = (a.references || []).map((r) => `${r.type} “${r.surface}”${r.resolved ? ` → ${r.resolved}` : ""}`);
  return facts([["language", a.language], ["continuation", `${a.continuation}${a.continuation_cue ? ` (cue “${a.continuation_cue}”)` : ""}`],
    ["needs context", a.needs_context ? "yes" : "no"], ["query type", a.query_type], ["intent", a.intent],
    ["time range", range], ["references", list(refs)], ["keywords", list(a.keywords)],
    ["named things", list(a.named_entities)], ["parts", (a.parts || []).length > 1 ? list(a.parts) : null]]);
}

function traceCard(n, trace) {
  if (!trace) return null;
  const stages = Object.entries(trace.stages_ms || {}).filter(([k]) => k !== "total");
  const queries = (trace.queries || []).map((q) => [t("span", q.text), q.source, num(q.weight, 2)]);
  const searches = (trace.searches || []).map((x) => [x.name, num(x.weight, 2), num(x.ms, 2), String((x.hits || []).length)]);
  const candidates = (trace.candidates || []).map((c) => [h("code", { text: c.id }), num(c.fused), String(c.fused_rank),
    num(c.rerank), num(c.final)]);
  const dupes = Object.entries(trace.duplicates || {}).map(([k, v]) => `${k} ≈ ${Array.isArray(v) ? v.join(", ") : v}`);
  const llm = (trace.llm || []).map((x) => (typeof x === "string" ? x : JSON.stringify(x)));
  return card(`trace-${n}`, "Trace",
    facts([["strategy", h("span", { "data-field": "strategy", text: `${trace.strategy}${trace.strategy_forced ? " (forced)" : ""}` })],
      ["fusion", trace.fusion], ["parameters", Object.entries(trace.params || {}).map(([k, v]) => `${k} ${v}`).join(" · ")],
      ["total", `${num(trace.stages_ms?.total, 2)} ms`]]),
    h("h5", { text: "Per-stage latency (ms)" }),
    barChart(stages.map(([k, v]) => ({ label: k, value: Number(v) })), { unit: "ms", title: "Latency of each stage of this recall" }),
    h("h5", { text: "Query analysis" }), analysisFacts(trace.analysis),
    table("Expanded queries", ["query", "source", "weight"], queries, { class: "queries", "data-part": "queries" }),
    table("Searches", ["search", "weight", "ms", "hits"], searches),
    h("details", null, h("summary", { text: `Candidates before and after rerank (${candidates.length})` }),
      table(null, ["memory", "fused", "fused rank", "rerank", "final"], candidates)),
    dupes.length ? facts([["near-duplicates removed", list(dupes)]]) : null,
    (trace.notes || []).length ? facts([["notes", list(trace.notes)]]) : null,
    llm.length ? facts([["LLM steps", list(llm)]]) : null);
}

/** The results of user turn `n` (1-based). */
export function turnView(n, turn) {
  return h("article", { class: "turn-results", "data-turn": n, "aria-labelledby": `turn-title-${n}` },
    h("h3", { id: `turn-title-${n}`, class: "turn-title" }, `Turn ${n}: `, t("q", turn.text)),
    routeCard(n, turn.route, turn.routeError),
    recallCard(n, turn.recall, turn.recallError),
    packCard(n, turn.recall),
    traceCard(n, turn.recall?.trace));
}
