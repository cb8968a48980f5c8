// Pending tool-definition changes: tools held back (changed after approval, new under
// "review", or flagged by the poisoning scan) until an admin approves their current definition.

import { ApiError } from "../api.js";
import { announce, fill, h, notice, pageTitle } from "../dom.js";

const SERVERS = "/api/v1/aggregator/servers";

/** Why a tool is held, for the table: a new tool, the changed parts, or the poisoning scan's findings. */
function whyHeld(held) {
  if (held.reason === "new") return "new tool";
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
        + "a server registered with review) is neither listed nor callable until its new definition is approved."),
      messages, list);

    async function load() {
      messages.replaceChildren();
      try {
        const servers = await ctx.api.servers();
        const held = [];
        for (const server of servers) {
          const tools = (await ctx.api.get(`${SERVERS}/${encodeURIComponent(server.id)}/tools`)).tools.filter((t) => t.held);
          if (tools.length) held.push({ server, tools });
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
      fill(list, held.map(({ server, tools }) => {
        const titleId = `held-${server.id}`;
        const all = h("button", { type: "button", class: "secondary", onclick: () => decide(server, null) },
          `Approve all ${tools.length} of ${server.name}`);
        return h("section", { class: "card", "aria-labelledby": titleId },
          h("div", { class: "page-head" }, h("h2", { id: titleId }, h("a", { href: `#/servers/${server.id}` }, server.name)), all),
          h("table", {},
            h("thead", {}, h("tr", {}, ["Tool", "Why held", "Current description", ""].map((t) => h("th", { scope: "col" }, t)))),
            h("tbody", {}, tools.map((tool) => h("tr", { dataset: { tool: tool.original_name } },
              h("th", { scope: "row" }, h("code", {}, tool.name)),
              h("td", {}, whyHeld(tool.held)),
              h("td", {}, tool.description || "–"),
              h("td", {}, h("button", { type: "button", "aria-label": `Approve ${tool.name}`,
                onclick: () => decide(server, [tool.original_name]) }, "Approve")))))));
      }));
    }

    async function decide(server, names) {
      try {
        await approve(ctx, server, names);
        await load();
        document.getElementById("page-title").focus();
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        messages.append(notice("error", `${error.message} (${error.code})`));
      }
    }

    const unsubscribe = ctx.live.subscribe((type) => {
      if (type === "ready" || type === "tools.changed" || type === "tools.approved" || type === "server.removed") load();
    });
    await load();
    return unsubscribe;
  },
};
