// The playground: pick a tool, fill the form its input schema describes, call it
// (POST /api/v1/tools/call) and read the result.

import { ApiError } from "../api.js";
import { announce, fill, formatMs, h, notice, pageTitle } from "../dom.js";
import { clearErrors, field, formErrors, showFieldErrors } from "../forms.js";
import { schemaForm } from "../schema_form.js";

const SERVERS = "/api/v1/aggregator/servers";

function content(item) {
  if (item.type === "text") return h("pre", { class: "output" }, item.text);
  if (item.type === "image" && typeof item.data === "string") {
    return h("img", { src: `data:${item.mimeType || "image/png"};base64,${item.data}`, alt: "Image returned by the tool" });
  }
  return h("pre", { class: "output" }, JSON.stringify(item, null, 2));
}

function result(reply) {
  const meta = reply.metadata;
  return [
    h("p", { class: reply.isError ? "notice error" : "notice ok" },
      reply.isError ? "The tool reported an error." : "The call succeeded."),
    reply.content.map(content),
    reply.structuredContent ? [h("h3", {}, "Structured content"), h("pre", { class: "output" }, JSON.stringify(reply.structuredContent, null, 2))] : null,
    h("dl", { class: "facts" },
      h("dt", {}, "Routed to"), h("dd", {}, meta.routed_to),
      h("dt", {}, "Execution"), h("dd", {}, formatMs(meta.execution_time_ms)),
      h("dt", {}, "Total"), h("dd", {}, formatMs(meta.total_time_ms)),
      meta.warning ? [h("dt", {}, "Warning"), h("dd", {}, meta.warning)] : null),
  ];
}

async function picker(main, ctx) {
  const servers = (await ctx.api.servers(true)).filter((s) => (s.tools || []).some((t) => !t.held));
  const select = h("select", { id: "pick-tool" }, h("option", { value: "" }, "Choose a tool"),
    servers.map((s) => h("optgroup", { label: s.name }, s.tools.filter((t) => !t.held).map((t) =>
      h("option", { value: `${encodeURIComponent(s.id)}/${encodeURIComponent(t.original_name)}` }, t.name)))));
  const form = h("form", { class: "card" }, field({ id: "pick-tool", label: "Tool", control: select }),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Open")));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (select.value) location.hash = `#/playground/${select.value}`;
  });
  fill(main, pageTitle("Playground"), h("p", { class: "lead" }, "Call any tool you may use, with a form made from its input schema."),
    servers.length ? form : h("p", { class: "empty" }, "No connected server has tools yet."));
}

export const chooser = {
  path: "playground",
  title: "Playground",
  nav: true,
  mount: picker,
};

export default {
  path: "playground/:server/:tool",
  title: "Playground",
  nav: false,
  parent: "playground",
  async mount(main, ctx) {
    const { server: serverId, tool: toolName } = ctx.params;
    let server;
    let tool;
    try {
      server = await ctx.api.get(`${SERVERS}/${encodeURIComponent(serverId)}`);
      const tools = (await ctx.api.get(`${SERVERS}/${encodeURIComponent(serverId)}/tools?include_schemas=true`)).tools;
      tool = tools.find((t) => t.original_name === toolName);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
    }
    if (!server || !tool) {
      fill(main, pageTitle("Tool not found"), h("p", {}, h("a", { href: "#/playground" }, "Choose another tool")));
      return;
    }
    const form = schemaForm(tool.input_schema || {}, "arg");
    const timeout = h("input", { type: "number", min: "1", max: "3600", step: "any" });
    const call = h("button", { type: "submit" }, "Call");
    const output = h("section", { class: "card result", "aria-labelledby": "result-title", hidden: true },
      h("h2", { id: "result-title", tabindex: "-1" }, "Result"), h("div", { id: "result-body" }));
    const element = h("form", { class: "card", novalidate: true, "aria-labelledby": "arguments-title" },
      h("h2", { id: "arguments-title" }, "Arguments"), formErrors(), form.element,
      field({ id: "call-timeout", label: "Timeout (seconds)", loc: "timeout_seconds", control: timeout,
        hint: "Optional; the deployment's default otherwise" }),
      h("div", { class: "actions" }, call));
    fill(main,
      h("p", { class: "crumbs" }, h("a", { href: "#/playground" }, "Playground"), " / ",
        h("a", { href: `#/servers/${encodeURIComponent(server.id)}` }, server.name)),
      pageTitle(h("code", {}, tool.name)),
      h("p", { class: "lead" }, tool.description || "No description."),
      tool.held ? notice("error", "This tool is held for approval and cannot be called until an admin approves it.") : null,
      element, output);

    element.addEventListener("submit", async (event) => {
      event.preventDefault();
      const args = form.read(element);
      if (!args) return;
      clearErrors(element);
      const request = { name: tool.name, server_id: server.id, arguments: args };
      if (timeout.value) request.timeout_seconds = Number(timeout.value);
      call.disabled = true;
      call.textContent = "Calling…";
      const body = output.querySelector("#result-body");
      try {
        const reply = await ctx.api.post("/api/v1/tools/call", request);
        fill(body, result(reply));
        announce(reply.isError ? "The tool reported an error" : `Call finished in ${formatMs(reply.metadata.total_time_ms)}`);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        if (error.status === 422) {
          showFieldErrors(element, error.fieldErrors.map((e) => ({ ...e, loc: e.loc[0] === "arguments" ? e.loc.slice(1) : e.loc })));
        }
        fill(body, notice("error", `${error.message} (${error.code})`));
        announce(`The call failed: ${error.message}`, true);
      } finally {
        call.disabled = false;
        call.textContent = "Call";
      }
      output.hidden = false;
      output.querySelector("#result-title").focus();
    });
  },
};
