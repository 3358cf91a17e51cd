// Building the page from data without ever parsing data as HTML: every string becomes a text node
// (textContent), so a memory that contains "<img onerror=...>" is shown as those characters.

const SVG_NS = "http://www.w3.org/2000/svg";

function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else if (child instanceof Node) node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
  }
  return node;
}

function setAttributes(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    // Handlers and inline styles are never set from here: the CSP forbids them, and data must not reach them.
    if (name.startsWith("on") || name === "style") throw new Error(`refusing attribute ${name}`);
    if (name === "text") node.textContent = String(value);
    else if (name === "class") node.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
}

/** An HTML element: h("p", {class: "x"}, "text", otherNode, [more]). */
export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttributes(node, attrs);
  return append(node, children);
}

/** An SVG element, same calling convention as h(). */
export function s(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttributes(node, attrs);
  return append(node, children);
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

/** The language of a piece of text for its lang attribute, so that Han characters get Japanese or
 * Korean glyph forms and line breaking: kana means Japanese, hangul Korean, Han alone is taken as
 * Japanese (memroute's languages are en, ja and ko). Latin-only text gives null (inherit). */
export function langOf(text) {
  const value = String(text ?? "");
  if (/[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]/u.test(value)) return "ja";
  if (/[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]/u.test(value)) return "ko";
  if (/[\u3400-\u9fff\uf900-\ufaff]/u.test(value)) return "ja";
  return null;
}

/** An element holding user data as text, with its lang attribute when it is Japanese or Korean. */
export function t(tag, text, attrs = {}) {
  const value = text === null || text === undefined ? "" : String(text);
  return h(tag, { ...attrs, lang: attrs.lang ?? langOf(value) ?? undefined, text: value });
}

/** A number for display: fixed digits, or an en dash when there is none. */
export function num(value, digits = 3) {
  if (value === null || value === undefined || Number.isNaN(Number(value))) return "–";
  return Number(value).toFixed(digits);
}

/** A definition list from [label, value] pairs; values may be nodes or text, nulls are skipped. */
export function facts(pairs, attrs = { class: "facts" }) {
  const list = h("dl", attrs);
  for (const [label, value, help] of pairs) {
    if (value === null || value === undefined || value === "") continue;
    list.append(explained("dt", label, help), value instanceof Node ? h("dd", null, value) : t("dd", value));
  }
  return list;
}

/** A label with what it means as its tooltip (a dotted underline says there is one). */
export function explained(tag, label, help) {
  return h(tag, help ? { title: help, class: "explained" } : null, label);
}

/** A table with a caption, header labels and rows of cells (text or nodes). */
export function table(caption, headers, rows, attrs = {}) {
  return h("table", attrs,
    caption ? h("caption", null, caption) : null,
    h("thead", null, h("tr", null, headers.map((label) => h("th", { scope: "col" }, label)))),
    h("tbody", null, rows.length === 0 ? h("tr", null, h("td", { colspan: headers.length, class: "empty", text: "none" }))
      : rows.map((cells) => h("tr", cells.attrs || null,
        (cells.cells || cells).map((cell) => (cell instanceof Node && cell.tagName === "TD") ? cell
          : cell instanceof Node ? h("td", null, cell) : t("td", cell))))));
}

/** A <meter> for a score in [0, 1], with the number beside it for people who cannot see the bar. */
export function scoreCell(value, label) {
  const v = Math.max(0, Math.min(1, Number(value) || 0));
  return h("span", { class: "score" },
    h("meter", { min: 0, max: 1, value: v, "aria-label": label }),
    h("span", { class: "score-num", text: num(value, 4) }));
}
