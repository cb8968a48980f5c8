// Pending definition changes: tools and prompts held back (changed after approval, new under
// "review", or flagged by the poisoning scan) and resource templates flagged by the poisoning
// scan, until an admin approves their current definition.

import { ApiError } from "../api.js";
import { announce, fill, h, notice, pageTitle } from "../dom.js";

const SERVERS = "/api/v1/aggregator/servers";

/** Why a tool or prompt is held, for the table: a new one, the changed parts, or the poisoning scan's findings. */
function whyHeld(held, kind = "tool") {
  if (held.reason === "new") return `new ${kind}`;
  if (held.reason === "flagged") return h("ul", {}, held.fields.map((line) => h("li", {}, `flagged: ${line}`)));
  return `${held.fields.join(" and ")} changed`;
}

/** Approve held tools of one server (all of them when ``names`` is null). */
export async function approve(ctx, server, names) {
  const body = names ? { tools: names } : undefined;
  const reply = await ctx.api.post(`${SERVERS}/${encodeURIComponent(server.id)}/tools/approve`, body);
  announce(`Approved ${reply.approved.join(", ") || "nothing"} on ${server.name}`);
  return reply;
}

/** Approve held resource templates of one server, by URI template. */
async function approveTemplates(ctx, server, templates) {
  const reply = await ctx.api.post(`${SERVERS}/${encodeURIComponent(server.id)}/resources/approve`, { templates });
  announce(`Approved ${reply.approved.join(", ") || "nothing"} on ${server.name}`);
  return reply;
}

/** Approve held prompts of one server, by original name. */
async function approvePrompts(ctx, server, names) {
  const reply = await ctx.api.post(`${SERVERS}/${encodeURIComponent(server.id)}/prompts/approve`, { prompts: names });
  announce(`Approved ${reply.approved.join(", ") || "nothing"} on ${server.name}`);
  return reply;
}

/** The table of a server's held prompts (``held``: {name, reason, fields}). */
function promptsTable(ctx, server, held, decide) {
  return h("table", {},
    h("thead", {}, h("tr", {}, ["Prompt", "Why held", ""].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, held.map((p) => h("tr", { dataset: { prompt: p.name } },
      h("th", { scope: "row" }, h("code", {}, p.name)),
      h("td", {}, whyHeld(p, "prompt")),
      h("td", {}, h("button", { type: "button", "aria-label": `Approve ${server.name} prompt ${p.name}`,
        onclick: () => decide(() => approvePrompts(ctx, server, [p.name])) }, "Approve"))))));
}

/** The table of a server's held resource templates (``held``: {uri_template, findings}). */
function templatesTable(ctx, server, held, items, decide) {
  const described = new Map(items.map((t) => [t.uriTemplate, t.description]));
  return h("table", {},
    h("thead", {}, h("tr", {}, ["Resource template", "Why held", "Current description", ""].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, held.map((t) => h("tr", { dataset: { template: t.uri_template } },
      h("th", { scope: "row" }, h("code", {}, t.uri_template)),
      h("td", {}, h("ul", {}, t.findings.map((line) => h("li", {}, `flagged: ${line}`)))),
      h("td", {}, described.get(t.uri_template) || "–"),
      h("td", {}, h("button", { type: "button", "aria-label": `Approve ${server.name} ${t.uri_template}`,
        onclick: () => decide(() => approveTemplates(ctx, server, [t.uri_template])) }, "Approve"))))));
}

export default {
  path: "approvals",
  title: "Approvals",
  nav: true,
  manages: true,
  async mount(main, ctx) {
    const messages = h("div", { class: "messages" });
    const list = h("div", { class: "approvals" });
    fill(main, pageTitle("Pending approvals"),
      h("p", { class: "lead" }, "A tool whose description or input schema changed after it was approved (or a new tool of "
        + "a server registered with review) is neither listed nor callable until its new definition is approved; "
        + "a prompt held the same way is neither listed nor served; a resource template the poisoning scan flags is "
        + "neither listed, read nor subscribed to until it is approved."),
      messages, list);

    async function load() {
      messages.replaceChildren();
      try {
        const servers = await ctx.api.servers();
        const held = [];
        for (const server of servers) {
          const path = `${SERVERS}/${encodeURIComponent(server.id)}`;
          const tools = (await ctx.api.get(`${path}/tools`)).tools.filter((t) => t.held);
          const resources = await ctx.api.get(`${path}/resources`);
          const prompts = (await ctx.api.get(`${path}/prompts`)).held;
          if (tools.length || prompts.length || resources.held_templates.length) held.push({ server, tools, prompts, resources });
        }
        render(held);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        messages.append(notice("error", `Cannot load pending approvals: ${error.message} (${error.code})`));
      }
    }

    function render(held) {
      if (!held.length) {
        fill(list, h("p", { class: "empty" }, "Nothing is waiting for approval."));
        return;
      }
      fill(list, held.map(({ server, tools, prompts, resources }) => {
        const titleId = `held-${server.id}`;
        const all = tools.length ? h("button", { type: "button", class: "secondary",
          onclick: () => decide(() => approve(ctx, server, null)) }, `Approve all ${tools.length} of ${server.name}`) : null;
        const templates = resources.held_templates.length
          ? templatesTable(ctx, server, resources.held_templates, resources.resource_templates, decide) : null;
        const heldPrompts = prompts.length ? promptsTable(ctx, server, prompts, decide) : null;
        return h("section", { class: "card", "aria-labelledby": titleId },
          h("div", { class: "page-head" }, h("h2", { id: titleId }, h("a", { href: `#/servers/${server.id}` }, server.name)), all),
          !tools.length ? null : h("table", {},
            h("thead", {}, h("tr", {}, ["Tool", "Why held", "Current description", ""].map((t) => h("th", { scope: "col" }, t)))),
            h("tbody", {}, tools.map((tool) => h("tr", { dataset: { tool: tool.original_name } },
              h("th", { scope: "row" }, h("code", {}, tool.name)),
              h("td", {}, whyHeld(tool.held)),
              h("td", {}, tool.description || "–"),
              h("td", {}, h("button", { type: "button", "aria-label": `Approve ${tool.name}`,
                onclick: () => decide(() => approve(ctx, server, [tool.original_name])) }, "Approve")))))),
          heldPrompts,
          templates);
      }));
    }

    async function decide(approving) {
      try {
        await approving();
        await load();
        document.getElementById("page-title").focus();
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        messages.append(notice("error", `${error.message} (${error.code})`));
      }
    }

    const unsubscribe = ctx.live.subscribe((type) => {
      if (type === "ready" || type === "tools.changed" || type === "tools.approved" || type === "templates.approved"
        || type === "prompts.approved" || type === "prompts.discovered"
        || type === "server.removed") load();
    });
    await load();
    return unsubscribe;
  },
};
