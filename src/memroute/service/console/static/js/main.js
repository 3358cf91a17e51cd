// The console's shell: who the caller is (key and owner), which page is shown, and the error banner.

import { ApiError, call, credentials } from "./api.js";
import { h } from "./dom.js";
import { memoriesPage } from "./memories.js";
import { metricsPage } from "./metrics.js";
import { playgroundPage } from "./playground.js";

// Each page binds its controls once (init) and loads its data whenever it is shown (shown).
const PAGES = { playground: playgroundPage, memories: memoriesPage, metrics: metricsPage };
let whoami = null;

const $ = (id) => document.getElementById(id);

export function showError(error) {
  const banner = $("banner");
  banner.textContent = error instanceof ApiError || error instanceof Error ? error.message : String(error);
  banner.hidden = false;
}

export function clearError() {
  $("banner").hidden = true;
  $("banner").textContent = "";
}

function askForKey(message) {
  $("key-form").hidden = false;
  $("owner-box").hidden = true;
  $("main").setAttribute("aria-busy", "true");
  if (message) showError(message);
  $("api-key").focus();
}

/** The owner control: plain text for a key with one owner, a list for several, a field for any. */
function ownerControl(info) {
  const slot = $("owner-slot");
  const label = $("owner-label");
  let control;
  if (info.owners.includes("*")) {
    control = h("input", { id: "owner", type: "text", maxlength: 256, spellcheck: "false", autocomplete: "off",
      value: credentials.owner || info.default_owner || "" });
    control.addEventListener("change", () => {
      credentials.setOwner(control.value.trim());
      window.dispatchEvent(new Event("memroute:owner"));
    });
    if (!credentials.owner && info.default_owner) credentials.setOwner(info.default_owner);
  } else if (info.owners.length > 1) {
    control = h("select", { id: "owner" }, info.owners.map((o) => h("option", { value: o, text: o })));
    const chosen = info.owners.includes(credentials.owner) ? credentials.owner : (info.default_owner || info.owners[0]);
    control.value = chosen;
    credentials.setOwner(chosen);
    control.addEventListener("change", () => {
      credentials.setOwner(control.value);
      window.dispatchEvent(new Event("memroute:owner"));
    });
  } else {
    control = h("output", { id: "owner", text: info.owners[0] || "" });
    credentials.setOwner(info.owners[0] || "");
  }
  label.setAttribute("for", "owner");
  slot.replaceChildren(control);
}

async function identify() {
  try {
    whoami = await call("GET", "/console/whoami", { owner: false });
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      askForKey(credentials.key ? `That API key was refused (${error.message}).` : "This service needs an API key.");
      return false;
    }
    showError(error);
    return false;
  }
  clearError();
  $("key-form").hidden = true;
  $("owner-box").hidden = false;
  $("forget-key").hidden = whoami.open || !credentials.key;
  $("main").removeAttribute("aria-busy");
  ownerControl(whoami);
  return true;
}

function currentPage() {
  const name = window.location.hash.replace(/^#/, "");
  return Object.hasOwn(PAGES, name) ? name : "playground";
}

function show(focus) {
  const name = currentPage();
  for (const page of Object.keys(PAGES)) {
    $(`page-${page}`).hidden = page !== name;
    const link = document.querySelector(`nav a[data-page="${page}"]`);
    if (page === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${name[0].toUpperCase()}${name.slice(1)} · memroute console`;
  if (focus) $(`page-${name}`).focus();
  if (whoami) PAGES[name].shown();
}

async function main() {
  for (const section of document.querySelectorAll("section.page")) section.setAttribute("tabindex", "-1");
  for (const page of Object.values(PAGES)) page.init();
  $("key-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = $("api-key").value.trim();
    if (!key) return;
    credentials.setKey(key);
    $("api-key").value = "";
    if (await identify()) {
      window.dispatchEvent(new Event("memroute:owner"));  // another key may mean another owner: reload the data
      $(`page-${currentPage()}`).focus();
    }
  });
  $("forget-key").addEventListener("click", () => {
    credentials.setKey("");
    credentials.setOwner("");
    whoami = null;
    askForKey("The key was removed from this tab.");
  });
  window.addEventListener("memroute:unauthorized", () => {
    whoami = null;
    askForKey("The service refused the API key: enter a valid one.");
  });
  window.addEventListener("hashchange", () => show(true));
  window.addEventListener("memroute:owner", () => show(false));
  window.addEventListener("memroute:error", (event) => showError(event.detail));
  window.addEventListener("memroute:ok", clearError);
  show(false);
  if (await identify()) show(false);
}

main().catch(showError);
