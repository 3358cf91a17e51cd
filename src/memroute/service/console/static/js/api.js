// The HTTP API as the console calls it: the API key from sessionStorage (this tab only, gone when it
// closes), the chosen owner as ?owner=, and the service's {type, message, detail} errors as ApiError.

const KEY_ITEM = "memroute.console.key";
const OWNER_ITEM = "memroute.console.owner";

export class ApiError extends Error {
  constructor(status, type, message, detail) {
    super(`${type}: ${message}`);
    this.status = status;
    this.type = type;
    this.detail = detail;
  }
}

function stored(name) {
  try {
    return window.sessionStorage.getItem(name) || "";
  } catch {
    return "";  // storage disabled: the key lives as long as the page
  }
}

function store(name, value) {
  try {
    if (value) window.sessionStorage.setItem(name, value);
    else window.sessionStorage.removeItem(name);
  } catch {
    // storage disabled: nothing to keep
  }
}

export const credentials = {
  key: stored(KEY_ITEM),
  owner: stored(OWNER_ITEM),
  setKey(value) {
    this.key = value;
    store(KEY_ITEM, value);
  },
  setOwner(value) {
    this.owner = value;
    store(OWNER_ITEM, value);
  },
};

/** A readable line for a validation error's detail (FastAPI's list of {loc, msg}). */
function describe(detail) {
  if (!Array.isArray(detail)) return "";
  return detail.map((d) => `${(d.loc || []).filter((p) => p !== "body").join(".")}: ${d.msg}`).join("; ");
}

/**
 * Call the API. `query` values that are null/undefined/"" are left out; `owner: true` adds the chosen
 * owner (every /v1 endpoint). Answers JSON, or text when `as: "text"`. Throws ApiError; a 401 also
 * fires "memroute:unauthorized" so that the page asks for a key again.
 */
export async function call(method, path, { query = {}, body, owner = true, as = "json" } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(query)) {
    if (value === null || value === undefined || value === "") continue;
    for (const one of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(one));
  }
  if (owner && credentials.owner) url.searchParams.set("owner", credentials.owner);
  const headers = { Accept: as === "json" ? "application/json" : "text/plain" };
  if (credentials.key) headers.Authorization = `Bearer ${credentials.key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit", cache: "no-store" });
  } catch (exc) {
    throw new ApiError(0, "NetworkError", `the service did not answer (${exc.message}); is it running?`, null);
  }
  if (!response.ok) {
    let type = `HTTP ${response.status}`;
    let message = response.statusText || "error";
    let detail = null;
    try {
      const err = await response.json();
      type = err.type || type;
      message = err.message || message;
      detail = err.detail ?? null;
    } catch {
      // not the service's JSON error (a proxy's page): keep the status line
    }
    const extra = describe(detail);
    const error = new ApiError(response.status, type, extra ? `${message} (${extra})` : message, detail);
    if (response.status === 401) window.dispatchEvent(new CustomEvent("memroute:unauthorized", { detail: error }));
    throw error;
  }
  return as === "text" ? response.text() : response.json();
}
