// The metrics page: /metrics drawn as latency histograms (recall by strategy, routing, rerank), strategy
// usage, and the counters beside them; every chart has its numbers in a table under it.

import { call } from "./api.js";
import { barChart, histogram } from "./charts.js";
import { h, num, table } from "./dom.js";
import { counters, histograms, parse, quantile } from "./prom.js";

const $ = (id) => document.getElementById(id);
const AUTO_MS = 5000;
let timer = null;

const HISTOGRAMS = [
  ["retrieval_latency_ms", "Recall latency", "strategy"],
  ["routing_latency_ms", "Routing latency", "router"],
  ["rerank_latency_ms", "Rerank latency", "reranker"],
  ["llm_latency_ms", "LLM call latency", "step"],
];
const COUNTERS = [
  ["retrieval_empty_results_total", "Recalls that returned no memory"],
  ["llm_calls_total", "LLM calls"],
  ["llm_fallbacks_total", "LLM fallbacks to the rule-based result"],
  ["http_requests_total", "HTTP requests"],
];

function family(families, name) {
  return families.get(name) || families.get(name.replace(/_total$/, ""));
}

function labelText(labels) {
  return Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(", ") || "(no labels)";
}

function histogramSection(families, [name, title, label]) {
  const series = histograms(families.get(name)).filter((x) => x.count > 0);
  const id = `metric-${name}`;
  const body = series.length === 0 ? [h("p", { class: "empty", text: "No observation yet." })]
    : series.map((x) => {
      const which = x.labels[label] ?? labelText(x.labels);
      const p50 = quantile(0.5, x.cumulative);
      const p95 = quantile(0.95, x.cumulative);
      return h("figure", { class: "metric-chart", "data-series": which },
        h("figcaption", null, h("strong", { text: which }),
          ` — ${x.count} observations, mean ${num(x.sum / x.count, 1)} ms, p50 ≈ ${num(p50, 1)} ms, p95 ≈ ${num(p95, 1)} ms`),
        histogram(x.buckets, { unit: "ms", title: `${title}, ${which}` }),
        h("details", null, h("summary", { text: "Numbers" }),
          table(null, ["bucket (≤ ms)", "observations"], x.buckets.map((b) => [b.le, String(b.count)]))));
    });
  return h("section", { class: "card metric", id, "aria-labelledby": `${id}-title`, "data-metric": name },
    h("h3", { id: `${id}-title`, text: title }), h("p", { class: "meta" }, h("code", { text: name })), ...body);
}

function strategySection(families) {
  const usage = counters(family(families, "retrieval_strategy_usage_total"))
    .map((x) => ({ label: x.labels.strategy ?? labelText(x.labels), value: x.value }))
    .sort((a, b) => b.value - a.value);
  const total = usage.reduce((a, b) => a + b.value, 0);
  return h("section", { class: "card metric", "aria-labelledby": "metric-strategy-title", "data-metric": "retrieval_strategy_usage_total" },
    h("h3", { id: "metric-strategy-title", text: "Strategy usage" }),
    h("p", { class: "meta" }, h("code", { text: "retrieval_strategy_usage_total" }), ` — ${total} recalls`),
    barChart(usage, { unit: "", title: "Recalls per strategy" }),
    usage.length ? h("details", null, h("summary", { text: "Numbers" }),
      table(null, ["strategy", "recalls", "share"], usage.map((u) => [u.label, String(u.value),
        `${num((100 * u.value) / (total || 1), 1)} %`]))) : null);
}

function countersSection(families) {
  const rows = [];
  for (const [name, title] of COUNTERS) {
    for (const x of counters(family(families, name))) rows.push([title, labelText(x.labels), String(x.value)]);
  }
  return h("section", { class: "card metric", "aria-labelledby": "metric-counters-title" },
    h("h3", { id: "metric-counters-title", text: "Counters" }),
    rows.length ? table(null, ["counter", "labels", "value"], rows, { class: "counters" })
      : h("p", { class: "empty", text: "Nothing counted yet." }));
}

async function refresh() {
  $("metrics-status").textContent = "Loading…";
  try {
    const text = await call("GET", "/metrics", { owner: false, as: "text" });
    const families = parse(text);
    $("metrics-body").replaceChildren(strategySection(families),
      ...HISTOGRAMS.map((spec) => histogramSection(families, spec)), countersSection(families));
    $("metrics-status").textContent = `Updated at ${new Date().toLocaleTimeString()}.`;
    window.dispatchEvent(new Event("memroute:ok"));
  } catch (error) {
    $("metrics-status").textContent = "";
    window.dispatchEvent(new CustomEvent("memroute:error", { detail: error }));
  }
}

function visible() {
  return !$("page-metrics").hidden && document.visibilityState === "visible";
}

function init() {
  $("metrics-refresh").addEventListener("click", refresh);
  $("metrics-auto").addEventListener("change", () => {
    if (timer) window.clearInterval(timer);
    timer = $("metrics-auto").checked ? window.setInterval(() => visible() && refresh(), AUTO_MS) : null;
  });
}

export const metricsPage = { init, shown: refresh };
