// Durable quotas: tool calls per minute, UTC day and UTC month of a key, the namespace or a server.
// Admins set and remove them; everyone sees the namespace's quotas and how much of each is used.

import { ApiError } from "../api.js";
import { announce, confirmedRemoval, fill, h, notice, pageTitle } from "../dom.js";
import { clearErrors, field, formErrors, showFieldErrors } from "../forms.js";

const QUOTAS = "/api/v1/quotas";
const WINDOWS = ["minute", "day", "month"];

/** "used / limit" of one window ("–" when the quota does not limit it). */
function usage(quota, window) {
  const limit = quota[`per_${window}`];
  if (limit == null) return "–";
  const used = quota.usage[window];
  return `${used == null ? "?" : used} / ${limit}`;
}

export default {
  path: "quotas",
  title: "Quotas",
  nav: true,
  manages: false,
  async mount(main, ctx) {
    const manages = ctx.identity.role === "owner" || ctx.identity.role === "admin";
    const scope = h("select", {}, ["key", "namespace", "server"].map((s) => h("option", { value: s }, s)));
    const target = h("input", { type: "text", autocomplete: "off", spellcheck: "false" });
    const limits = Object.fromEntries(WINDOWS.map((w) => [w, h("input", { type: "number", min: "1", step: "1" })]));
    const create = h("button", { type: "submit" }, "Set quota");
    const form = manages ? h("form", { class: "card", novalidate: true, "aria-labelledby": "quota-title" },
      h("h2", { id: "quota-title" }, "Set a quota"), formErrors(),
      h("div", { class: "columns" },
        field({ id: "quota-scope", label: "Scope", loc: "scope", control: scope }),
        field({ id: "quota-target", label: "Target", loc: "target", control: target,
          hint: "The key's or the server's name; empty for the namespace" })),
      h("div", { class: "columns three" }, WINDOWS.map((w) => field({ id: `quota-${w}`, label: `Calls per ${w}`,
        loc: `per_${w}`, control: limits[w], hint: w === "minute" ? "UTC windows; empty: not limited" : null }))),
      h("div", { class: "actions" }, create)) : null;
    const messages = h("div", { class: "messages" });
    const body = h("tbody");
    const refresh = h("button", { type: "button", class: "secondary", onclick: () => load() }, "Refresh usage");
    fill(main, pageTitle("Quotas"), h("div", { class: "actions" }, refresh), form, messages,
      h("div", { class: "table-wrap" }, h("table", {},
        h("caption", { class: "visually-hidden" }, "Quotas of your namespace, each window as used / limit"),
        h("thead", {}, h("tr", {}, ["Scope", "Target", "Namespace", "Minute", "Day (UTC)", "Month (UTC)", ""]
          .map((t) => h("th", { scope: "col" }, t)))),
        body)));

    async function load() {
      try {
        const { quotas } = await ctx.api.get(QUOTAS);
        fill(body, quotas.map((quota) => h("tr", { dataset: { quota: `${quota.scope}:${quota.target}` } },
          h("th", { scope: "row" }, quota.scope), h("td", {}, quota.target), h("td", {}, quota.namespace),
          WINDOWS.map((w) => h("td", {}, usage(quota, w))),
          h("td", {}, manages ? h("button", { type: "button", class: "danger",
            "aria-label": `Remove the ${quota.scope} quota of ${quota.target}`, onclick: () => remove(quota) }, "Remove") : null))));
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        messages.append(notice("error", `Cannot list quotas: ${error.message} (${error.code})`));
      }
    }

    async function remove(quota) {
      await confirmedRemoval({
        question: `Remove the ${quota.scope} quota of ${quota.target}?`,
        label: "Remove",
        remove: () => ctx.api.delete(`${QUOTAS}/${encodeURIComponent(quota.id)}`),
        done: `Removed the ${quota.scope} quota of ${quota.target}`,
        reload: load,
        messages,
      });
    }

    form?.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors(form);
      const request = { scope: scope.value };
      if (target.value.trim()) request.target = target.value.trim();
      for (const w of WINDOWS) if (limits[w].value) request[`per_${w}`] = Number(limits[w].value);
      create.disabled = true;
      try {
        const saved = await ctx.api.post(QUOTAS, request);
        form.reset();
        announce(`Set the ${saved.scope} quota of ${saved.target}`);
        await load();
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        if (error.status === 422) showFieldErrors(form, error.fieldErrors);
        else showFieldErrors(form, [{ loc: [], msg: `${error.message} (${error.code})` }]);
      } finally {
        create.disabled = false;
      }
    });

    const unsubscribe = ctx.live.subscribe((type) => {
      if (type === "ready") load();
    });
    await load();
    return unsubscribe;
  },
};
