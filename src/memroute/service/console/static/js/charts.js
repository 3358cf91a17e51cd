// Hand-written SVG charts: horizontal bars (one value per label) and a histogram (counts per bucket).
// Sizes are SVG attributes, not inline styles, so the page keeps its strict CSP; each chart carries a
// <title> and an aria-label that state its numbers for people who cannot see it.

import { h, num, s } from "./dom.js";

const fmt = (v, unit) => `${Number.isInteger(v) ? v : num(v, 2)}${unit ? ` ${unit}` : ""}`;

/** Horizontal bars: items [{label, value}], longest bar = largest value. */
export function barChart(items, { unit = "", title = "" } = {}) {
  if (!items.length) return h("p", { class: "empty", text: "No data yet." });
  const row = 22;
  const labelWidth = 150;
  const width = 520;
  const barSpace = width - labelWidth - 90;
  const max = Math.max(...items.map((i) => i.value), 0) || 1;
  const summary = items.map((i) => `${i.label} ${fmt(i.value, unit)}`).join(", ");
  const svg = s("svg", { class: "chart bars", viewBox: `0 0 ${width} ${items.length * row + 6}`, role: "img",
    "aria-label": `${title}: ${summary}` }, s("title", { text: `${title}: ${summary}` }));
  items.forEach((item, i) => {
    const y = i * row + 3;
    const w = Math.max(1, (item.value / max) * barSpace);
    svg.append(
      s("text", { x: labelWidth - 8, y: y + 15, "text-anchor": "end", class: "label", text: item.label }),
      s("rect", { x: labelWidth, y: y + 2, width: w.toFixed(1), height: row - 6, rx: 2, class: `bar bar-${i % 6}` }),
      s("text", { x: labelWidth + w + 6, y: y + 15, class: "value", text: fmt(item.value, unit) }));
  });
  return svg;
}

/** A histogram: buckets [{le, count}] with non-cumulative counts; `le` is the bucket's upper bound. */
export function histogram(buckets, { unit = "ms", title = "" } = {}) {
  const width = 560;
  const height = 180;
  const left = 40;
  const bottom = 38;
  const top = 14;
  const plotW = width - left - 8;
  const plotH = height - bottom - top;
  const max = Math.max(...buckets.map((b) => b.count), 0) || 1;
  const barW = plotW / Math.max(buckets.length, 1);
  const total = buckets.reduce((a, b) => a + b.count, 0);
  const summary = buckets.filter((b) => b.count > 0).map((b) => `≤ ${b.le} ${unit}: ${b.count}`).join(", ") || "no observations";
  const svg = s("svg", { class: "chart histogram", viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `${title}: ${summary}` }, s("title", { text: `${title}: ${total} observations; ${summary}` }),
  s("line", { x1: left, y1: top + plotH, x2: width - 8, y2: top + plotH, class: "axis" }),
  s("text", { x: left - 6, y: top + 8, "text-anchor": "end", class: "tick", text: String(max) }),
  s("text", { x: left - 6, y: top + plotH, "text-anchor": "end", class: "tick", text: "0" }));
  buckets.forEach((b, i) => {
    const x = left + i * barW;
    const hgt = (b.count / max) * plotH;
    if (b.count > 0) {
      svg.append(s("rect", { x: (x + 1).toFixed(1), y: (top + plotH - hgt).toFixed(1), width: Math.max(1, barW - 2).toFixed(1),
        height: Math.max(1, hgt).toFixed(1), class: "bar bar-0" }, s("title", { text: `≤ ${b.le} ${unit}: ${b.count}` })));
    }
    // Every other bound under the axis, so that the labels never overlap.
    if (i % 2 === 0 || i === buckets.length - 1) {
      svg.append(s("text", { x: (x + barW / 2).toFixed(1), y: top + plotH + 14, "text-anchor": "middle", class: "tick",
        text: b.le === "+Inf" ? "∞" : String(Number(b.le)) }));
    }
  });
  svg.append(s("text", { x: left + plotW / 2, y: height - 4, "text-anchor": "middle", class: "tick",
    text: `upper bound of the bucket (${unit})` }));
  return svg;
}
