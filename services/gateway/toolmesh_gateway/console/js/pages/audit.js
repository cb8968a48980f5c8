// The audit log (admins): operations and tool calls, newest first, filtered and paged.

import { ApiError } from "../api.js";
import { describe, fill, h, notice, pageTitle, timeElement } from "../dom.js";
import { clearErrors, field, formErrors, showFieldErrors } from "../forms.js";

const PAGE = 50;
const EVENTS = ["server.registered", "server.status_changed", "server.removed", "tool.called",
  "tools.changed", "tools.approved", "key.created", "key.revoked", "server.config_resealed"];

export default {
  path: "audit",
  title: "Audit log",
  nav: true,
  manages: true,
  async mount(main, ctx) {
    const owner = ctx.identity.role === "owner";
    const actor = h("input", { type: "text", autocomplete: "off" });
    const kind = h("input", { type: "text", autocomplete: "off", list: "audit-events" });
    const namespace = owner ? h("input", { type: "text", autocomplete: "off" }) : null;
    const form = h("form", { class: "card filters", novalidate: true, "aria-label": "Filter the audit log" }, formErrors(),
      h("div", { class: "columns three" },
        field({ id: "audit-actor", label: "Actor", loc: "actor", control: actor, hint: "A key's name" }),
        field({ id: "audit-event", label: "Event", loc: "event", control: kind, hint: "e.g. tool.called" }),
        owner ? field({ id: "audit-namespace", label: "Namespace", loc: "namespace", control: namespace }) : null),
      h("datalist", { id: "audit-events" }, EVENTS.map((e) => h("option", { value: e }))),
      h("div", { class: "actions" }, h("button", { type: "submit" }, "Filter")));
    const status = h("p", { class: "counts", id: "audit-count", "aria-live": "polite" });
    const messages = h("div", { class: "messages" });
    const body = h("tbody");
    const newer = h("button", { type: "button", class: "secondary" }, "Newer");
    const older = h("button", { type: "button", class: "secondary" }, "Older");
    const refresh = h("button", { type: "button", class: "secondary" }, "Refresh");
    fill(main, h("div", { class: "page-head" }, pageTitle("Audit log"), refresh), form, messages, status,
      h("div", { class: "table-wrap" }, h("table", { "aria-describedby": "audit-count" },
        h("thead", {}, h("tr", {}, ["Time", "Event", "Server", "Actor", "Namespace", "Details"].map((t) => h("th", { scope: "col" }, t)))),
        body)),
      h("nav", { class: "pager", "aria-label": "Audit pages" }, newer, older));

    let offset = 0;

    async function load() {
      clearErrors(form);
      messages.replaceChildren();
      const params = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
      if (actor.value.trim()) params.set("actor", actor.value.trim());
      if (kind.value.trim()) params.set("event", kind.value.trim());
      if (namespace && namespace.value.trim()) params.set("namespace", namespace.value.trim());
      try {
        const page = await ctx.api.get(`/api/v1/audit?${params}`);
        fill(body, page.entries.map((e) => h("tr", {},
          h("td", {}, timeElement(e.timestamp)), h("td", {}, h("code", {}, e.event)),
          h("td", {}, e.server_id && e.server_name ? h("a", { href: `#/servers/${e.server_id}` }, e.server_name) : e.server_name || "–"),
          h("td", {}, e.actor || "–"), h("td", {}, e.namespace), h("td", { class: "details" }, describe(e.details)))));
        const last = Math.min(offset + page.entries.length, page.total);
        status.textContent = page.total ? `Entries ${offset + 1}–${last} of ${page.total}` : "No entries";
        newer.disabled = offset === 0;
        older.disabled = last >= page.total;
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        if (error.status === 422) showFieldErrors(form, error.fieldErrors);
        else messages.append(notice("error", `Cannot read the audit log: ${error.message} (${error.code})`));
      }
    }

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      offset = 0;
      load();
    });
    newer.addEventListener("click", () => {
      offset = Math.max(0, offset - PAGE);
      load();
    });
    older.addEventListener("click", () => {
      offset += PAGE;
      load();
    });
    refresh.addEventListener("click", load);
    await load();
  },
};
