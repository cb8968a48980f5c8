// Building the page: elements from data (never HTML strings), announcements, dialogs, formats.

import { ApiError } from "./api.js";

/** An element: h("button", {class: "x", onclick: fn, disabled: true}, "text", child, [more]). */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false || key === "value") continue;
    if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "checked" || key === "selected") node.setAttribute(key, ""); // the default: form.reset() keeps it
    else if (key in node && !key.includes("-") && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  if (attrs.value !== undefined && attrs.value !== null) node.value = attrs.value; // after a select's options
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace everything inside ``node``. */
export function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

let announceTimer = 0;

/** Say ``text`` to screen readers (the polite live region); ``urgent`` uses the alert region. */
export function announce(text, urgent = false) {
  const region = document.getElementById(urgent ? "alert" : "live");
  if (!region) return;
  region.textContent = "";
  clearTimeout(announceTimer);
  announceTimer = setTimeout(() => { region.textContent = text; }, 50);
}

/** A modal confirmation; resolves true when confirmed. Focus returns to where it was. */
export function confirmDialog(message, confirmLabel) {
  const opener = document.activeElement;
  return new Promise((resolve) => {
    const cancel = h("button", { type: "button", class: "secondary", value: "cancel" }, "Cancel");
    const ok = h("button", { type: "submit", class: "danger", value: "ok" }, confirmLabel);
    const title = h("h2", { id: "dialog-title" }, message);
    const form = h("form", { method: "dialog" }, title, h("div", { class: "actions" }, cancel, ok));
    const dialog = h("dialog", { "aria-labelledby": "dialog-title", class: "confirm" }, form);
    cancel.addEventListener("click", () => dialog.close("cancel"));
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
      resolve(dialog.returnValue === "ok");
    });
    document.body.append(dialog);
    dialog.showModal();
    cancel.focus();
  });
}

/**
 * A row's removal once ``question`` is confirmed (``label`` on the button): ``remove()`` (the API
 * call), then ``done`` announced, ``reload()`` and the page title focused. A refusal shows in ``messages``.
 */
export async function confirmedRemoval({ question, label, remove, done, reload, messages }) {
  if (!(await confirmDialog(question, label))) return;
  messages.replaceChildren();
  try {
    await remove();
    announce(done);
    await reload();
    document.getElementById("page-title").focus();
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    messages.append(notice("error", `${error.message} (${error.code})`));
  }
}

/** A timestamp in the browser's time zone, to the second. */
export function formatTime(value) {
  if (!value) return "–";
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} `
    + `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

/** A <time> element for a timestamp. */
export function timeElement(value) {
  return value ? h("time", { datetime: value }, formatTime(value)) : "–";
}

/** A server status as a badge (its text says it; the colour only repeats it). */
export function statusBadge(status) {
  const value = status || "UNKNOWN";
  return h("span", { class: `badge status-${value.toLowerCase()}`, dataset: { status: value } }, value);
}

/** Milliseconds, short. */
export function formatMs(value) {
  if (value === null || value === undefined) return "–";
  return value < 10 ? `${value.toFixed(1)} ms` : `${Math.round(value)} ms`;
}

/** ``{a: 1}`` as ``a=1, ...`` for compact cells. */
export function describe(details) {
  if (!details || typeof details !== "object") return details ? String(details) : "";
  return Object.entries(details)
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(", ");
}

/** A page heading that receives focus when the page opens. */
export function pageTitle(text, ...extra) {
  return h("h1", { tabindex: "-1", id: "page-title" }, text, ...extra);
}

/** A line for errors and outcomes of a section (role=alert only for errors). */
export function notice(kind, text) {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : null }, text);
}
