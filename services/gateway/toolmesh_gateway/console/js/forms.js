// Labelled fields, and the API's validation errors shown on the field they are about.

import { announce, h } from "./dom.js";

/**
 * A labelled field: ``field({id, label, loc, hint, control})``. ``loc`` is where the API reports
 * errors about it (``"connection_config.url"``); ``control`` is the input, select or textarea.
 */
export function field({ id, label, loc, hint, control, className = "field" }) {
  control.id = id;
  if (!control.name) control.name = id;
  if (loc) control.dataset.loc = loc;
  const described = [];
  let hintNode = null;
  if (hint) {
    hintNode = h("p", { class: "hint", id: `${id}-hint` }, hint);
    described.push(hintNode.id);
  }
  if (described.length) control.setAttribute("aria-describedby", described.join(" "));
  const error = h("p", { class: "error", id: `${id}-error`, hidden: true });
  const isCheck = control.type === "checkbox";
  const labelNode = h("label", { for: id }, label);
  return h("div", { class: `${className}${isCheck ? " check" : ""}` },
    isCheck ? [control, labelNode] : [labelNode], hintNode, isCheck ? null : control, error);
}

/** Clear every error shown in ``form``. */
export function clearErrors(form) {
  for (const node of form.querySelectorAll(".error")) {
    node.hidden = true;
    node.textContent = "";
  }
  for (const control of form.querySelectorAll("[aria-invalid]")) {
    control.removeAttribute("aria-invalid");
    const hint = document.getElementById(`${control.id}-hint`);
    if (hint) control.setAttribute("aria-describedby", hint.id);
    else control.removeAttribute("aria-describedby");
  }
  const summary = form.querySelector(".form-errors");
  if (summary) summary.replaceChildren();
}

/** Show ``message`` on ``control`` (aria-invalid, described by the message). */
export function showError(control, message) {
  const error = document.getElementById(`${control.id}-error`);
  control.setAttribute("aria-invalid", "true");
  if (!error) return;
  const previous = error.hidden ? "" : `${error.textContent} `;
  error.textContent = previous + message;
  error.hidden = false;
  const ids = new Set((control.getAttribute("aria-describedby") || "").split(" ").filter(Boolean));
  ids.add(error.id);
  control.setAttribute("aria-describedby", [...ids].join(" "));
}

/** The control that reports errors at ``loc`` (the longest matching prefix), or null. */
function controlFor(form, loc) {
  for (let n = loc.length; n > 0; n--) {
    const key = loc.slice(0, n).join(".");
    const control = [...form.querySelectorAll("[data-loc]")].find((c) => c.dataset.loc === key && !c.disabled && !c.closest("[hidden]"));
    if (control) return control;
  }
  return null;
}

/**
 * Show a 422's errors on their fields (``[{loc, msg}]``); those no field matches go to the form's
 * summary. Focuses the first field in error and announces how many problems there are.
 */
export function showFieldErrors(form, errors) {
  const summary = form.querySelector(".form-errors");
  let first = null;
  for (const { loc, msg } of errors) {
    const control = controlFor(form, loc);
    if (control) {
      showError(control, msg);
      first = first || control;
    } else if (summary) {
      summary.append(h("li", {}, loc.length ? `${loc.join(".")}: ${msg}` : msg));
    }
  }
  if (first) first.focus();
  else if (summary && summary.firstChild) summary.focus();
  announce(`${errors.length} problem${errors.length === 1 ? "" : "s"} to fix`, true);
}

/** A list for errors that belong to no single field (focusable, so it can be announced). */
export function formErrors() {
  return h("ul", { class: "form-errors", tabindex: "-1", "aria-label": "Problems" });
}

/** ``KEY=value`` lines as an object; throws with the bad line. */
export function parsePairs(text) {
  const pairs = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line) continue;
    const at = line.indexOf("=");
    if (at <= 0) throw new Error(`"${line}" is not KEY=value`);
    pairs[line.slice(0, at).trim()] = line.slice(at + 1);
  }
  return pairs;
}
