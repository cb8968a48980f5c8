// Endpoints (bundles): named selections of tools, prompts and resources served at /mcp/{name}.
// Admins create and delete them; everyone sees the namespace's endpoints and their paths.

import { ApiError } from "../api.js";
import { announce, confirmedRemoval, fill, h, notice, pageTitle, timeElement } from "../dom.js";
import { clearErrors, field, formErrors, showFieldErrors } from "../forms.js";

const ENDPOINTS = "/api/v1/endpoints";

/** Patterns typed one per line (or comma-separated). */
function patterns(text) {
  return text.split(/[\n,]/).map((p) => p.trim()).filter(Boolean);
}

export default {
  path: "endpoints",
  title: "Endpoints",
  nav: true,
  manages: false,
  async mount(main, ctx) {
    const manages = ctx.identity.role !== "user";
    const name = h("input", { type: "text", autocomplete: "off", spellcheck: "false", required: true });
    const description = h("input", { type: "text", autocomplete: "off" });
    const include = h("textarea", { rows: 3, spellcheck: "false", required: true, placeholder: "github.*\ndocs.search" });
    const exclude = h("textarea", { rows: 2, spellcheck: "false", placeholder: "github.delete_repo" });
    const overrides = h("textarea", { rows: 3, spellcheck: "false",
      placeholder: '{"github.create_issue": {"name": "file_bug", "description": "File a bug"}}' });
    const create = h("button", { type: "submit" }, "Create endpoint");
    const form = manages ? h("form", { class: "card", novalidate: true, "aria-labelledby": "endpoint-title" },
      h("h2", { id: "endpoint-title" }, "Create an endpoint"), formErrors(),
      h("div", { class: "columns" },
        field({ id: "endpoint-name", label: "Name", loc: "name", control: name, hint: "Served at /mcp/{name}" }),
        field({ id: "endpoint-description", label: "Description", loc: "description", control: description })),
      h("div", { class: "columns" },
        field({ id: "endpoint-include", label: "Include", loc: "include", control: include,
          hint: "Patterns over server.tool, server.prompt, server.<resource URI>; one per line" }),
        field({ id: "endpoint-exclude", label: "Exclude", loc: "exclude", control: exclude, hint: "Wins over include" })),
      field({ id: "endpoint-overrides", label: "Overrides (JSON)", loc: "overrides", control: overrides,
        hint: 'By server.tool: {"name", "description", "enabled"}' }),
      h("div", { class: "actions" }, create)) : null;
    const messages = h("div", { class: "messages" });
    const body = h("tbody");
    fill(main, pageTitle("Endpoints"), form, messages,
      h("div", { class: "table-wrap" }, h("table", {},
        h("caption", { class: "visually-hidden" }, "Endpoints of your namespace"),
        h("thead", {}, h("tr", {}, ["Name", "Path", "Includes", "Excludes", "Overrides", "Updated", ""]
          .map((t) => h("th", { scope: "col" }, t)))),
        body)));

    async function load() {
      try {
        const { endpoints } = await ctx.api.get(ENDPOINTS);
        fill(body, endpoints.map((endpoint) => h("tr", { dataset: { endpoint: endpoint.name } },
          h("th", { scope: "row" }, endpoint.name, endpoint.description ? h("p", { class: "hint" }, endpoint.description) : null),
          h("td", {}, h("code", {}, endpoint.path)),
          h("td", {}, endpoint.include.join(", ")),
          h("td", {}, endpoint.exclude.join(", ") || "–"),
          h("td", {}, String(Object.keys(endpoint.overrides).length)),
          h("td", {}, timeElement(endpoint.updated_at)),
          h("td", {}, manages ? h("button", { type: "button", class: "danger", "aria-label": `Delete ${endpoint.name}`,
            onclick: () => remove(endpoint) }, "Delete") : null))));
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        messages.append(notice("error", `Cannot list endpoints: ${error.message} (${error.code})`));
      }
    }

    async function remove(endpoint) {
      await confirmedRemoval({
        question: `Delete the endpoint ${endpoint.name}? Its clients lose its tools.`,
        label: "Delete",
        remove: () => ctx.api.delete(`${ENDPOINTS}/${encodeURIComponent(endpoint.id)}`),
        done: `Deleted ${endpoint.name}`,
        reload: load,
        messages,
      });
    }

    form?.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors(form);
      let parsed = {};
      if (overrides.value.trim()) {
        try {
          parsed = JSON.parse(overrides.value);
        } catch {
          showFieldErrors(form, [{ loc: ["overrides"], msg: "Overrides must be a JSON object" }]);
          return;
        }
      }
      const request = { name: name.value.trim(), include: patterns(include.value), exclude: patterns(exclude.value),
        overrides: parsed };
      if (description.value.trim()) request.description = description.value.trim();
      create.disabled = true;
      try {
        const created = await ctx.api.post(ENDPOINTS, request);
        form.reset();
        announce(`Created ${created.name} at ${created.path}`);
        await load();
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        if (error.status === 422) showFieldErrors(form, error.fieldErrors);
        else if (error.code === "ENDPOINT_ALREADY_EXISTS") showFieldErrors(form, [{ loc: ["name"], msg: error.message }]);
        else showFieldErrors(form, [{ loc: [], msg: `${error.message} (${error.code})` }]);
      } finally {
        create.disabled = false;
      }
    });

    const unsubscribe = ctx.live.subscribe((type) => {
      if (type === "ready" || type === "endpoint.saved" || type === "endpoint.deleted") load();
    });
    await load();
    return unsubscribe;
  },
};
