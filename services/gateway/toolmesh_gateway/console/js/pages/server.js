// One server: its details, tools (held ones can be approved), its connection history as a timeline
// that grows as events arrive, and for a server behind per-user OAuth whether your account is connected.

import { ApiError } from "../api.js";
import { announce, describe, fill, formatMs, h, notice, pageTitle, statusBadge, timeElement } from "../dom.js";
import { act, needsAuthorization, why } from "./servers.js";
import { approve } from "./approvals.js";

const SERVERS = "/api/v1/aggregator/servers";

/** What the stream says, as a history row (the projector writes the same rows). */
function historyOf(event) {
  const data = event.data;
  if (event.type === "server.status_changed") {
    return { event_type: data.history, timestamp: event.occurred_at,
      details: { status: data.status, previous_status: data.previous_status, ...data.details,
        ...(data.error_message ? { error_message: data.error_message } : {}) } };
  }
  if (event.type === "tools.discovered") {
    return { event_type: "TOOLS_DISCOVERED", timestamp: event.occurred_at, details: { tool_count: data.tool_count } };
  }
  if (event.type === "tools.changed") {
    return { event_type: "TOOLS_CHANGED", timestamp: event.occurred_at,
      details: { changes: data.changes.map((c) => `${c.original_name} (${c.reason})`) } };
  }
  if (event.type === "tools.approved") {
    return { event_type: "TOOLS_APPROVED", timestamp: event.occurred_at,
      details: { tools: data.tools.map((t) => t.original_name) } };
  }
  return null;
}

function entry(item) {
  return h("li", { class: `event event-${String(item.event_type).toLowerCase()}` },
    h("span", { class: "when" }, timeElement(item.timestamp)),
    h("span", { class: "what" }, item.event_type),
    h("span", { class: "details" }, describe(item.details)));
}

export default {
  path: "servers/:id",
  title: "Server",
  nav: false,
  parent: "servers",
  async mount(main, ctx) {
    const id = ctx.params.id;
    const base = `${SERVERS}/${encodeURIComponent(id)}`;
    const manages = ctx.identity.manages;
    let server = null;
    let lastShown = null;
    let account = null; // GET .../authorization of a per-user OAuth server (null: not one, or not read yet)

    const heading = pageTitle("Server");
    const messages = h("div", { class: "messages" });
    const facts = h("dl", { class: "facts" });
    const actions = h("div", { class: "actions" });
    const toolsBody = h("tbody");
    const timeline = h("ol", { class: "timeline", "aria-label": "Connection history, oldest first" });
    fill(main,
      h("p", { class: "crumbs" }, h("a", { href: "#/servers" }, "Servers")),
      h("div", { class: "page-head" }, heading, actions), messages, facts,
      h("section", { "aria-labelledby": "tools-title" }, h("h2", { id: "tools-title" }, "Tools"),
        h("div", { class: "table-wrap" }, h("table", {},
          h("thead", {}, h("tr", {}, ["Tool", "Description", "Skills", "State", ""].map((t) => h("th", { scope: "col" }, t)))),
          toolsBody))),
      h("section", { "aria-labelledby": "history-title" }, h("h2", { id: "history-title" }, "Connection history"), timeline));

    function renderServer() {
      fill(heading, server.name, " ", statusBadge(server.status), why(server));
      const rows = [
        ["Id", server.id], ["Namespace", server.namespace], ["Transport", server.transport_type],
        ["Description", server.description || "–"],
        ["Connection", h("code", {}, JSON.stringify(server.connection_config || {}))],
        ["Tools", String(server.tool_count ?? 0)],
        ["Health check", server.health_check_url || "MCP ping"],
        ["Last check", timeElement(server.last_health_check)],
        ["Failed checks in a row", String(server.consecutive_failures ?? 0)],
        ["Last response time", formatMs(server.last_response_time_ms)],
        ["Registered", timeElement(server.registered_at)],
        ["Connected", timeElement(server.connected_at)],
        ["Error", server.error_message || server.last_error || "–"],
      ];
      fill(facts, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
      if (perUser()) facts.append(h("dt", {}, "Your account"), h("dd", { id: "your-account" }, accountLine()));
      if (!manages) return;
      const connected = ["CONNECTED", "DEGRADED"].includes(server.status);
      const busy = ["CONNECTING", "DISCONNECTING"].includes(server.status);
      const button = (action, label, cls = "secondary") => h("button", {
        type: "button", class: cls, dataset: { action }, disabled: busy && action !== "remove", onclick: () => run(action),
      }, label);
      const focused = actions.contains(document.activeElement) ? document.activeElement.dataset.action : null;
      const first = needsAuthorization(server) ? button("authorize", "Connect account", "")
        : connected ? button("disconnect", "Disconnect") : button("connect", "Connect");
      fill(actions, first,
        button("refresh", "Refresh tools"), button("remove", "Remove", "danger"));
      if (focused) (actions.querySelector(`[data-action="${focused}"]`) || actions.querySelector("button")).focus();
    }

    function perUser() {
      return server.connection_config?.auth?.identity === "per_user";
    }

    /** Whether this key's own account is connected upstream, and the button that connects it. */
    function accountLine() {
      const connect = h("button", { type: "button", class: account?.authorized ? "secondary" : "",
        dataset: { action: "authorize-own" }, onclick: () => run("authorize") },
        account?.authorized ? "Connect again" : "Connect your account");
      if (account === null) return ["…"];
      return account.authorized
        ? [h("span", { class: "badge ok" }, "connected"), " since ", timeElement(account.authorized_at), " ", connect]
        : [h("span", { class: "badge held" }, "not connected"), " ", connect];
    }

    async function loadAccount() {
      if (!perUser()) return;
      account = await ctx.api.get(`${base}/authorization`);
      renderServer();
    }

    async function run(action) {
      messages.replaceChildren();
      try {
        if (action === "refresh") {
          const reply = await ctx.api.post(`${base}/tools/refresh`);
          announce(`${server.name}: ${reply.message}`);
        } else if ((await act(ctx, server, action)) && action === "remove") {
          location.hash = "#/servers";
        }
      } catch (error) {
        messages.append(notice("error", `${error.message} (${error.code})`));
      }
    }

    function renderTools(tools) {
      fill(toolsBody, tools.map((tool) => {
        const held = tool.held;
        const state = held
          ? h("span", { class: "badge held" }, held.reason === "new" ? "held: new" : `held: ${held.fields.join(", ")} changed`)
          : h("span", { class: "badge ok" }, "listed");
        const approveButton = held && manages
          ? h("button", { type: "button", class: "secondary", "aria-label": `Approve ${tool.original_name}`,
            onclick: async () => {
              try {
                await approve(ctx, server, [tool.original_name]);
                await loadTools();
              } catch (error) {
                messages.append(notice("error", `${error.message} (${error.code})`));
              }
            } }, "Approve")
          : null;
        const tryLink = held ? null : h("a", {
          href: `#/playground/${encodeURIComponent(server.id)}/${encodeURIComponent(tool.original_name)}`,
          "aria-label": `Try ${tool.name} in the playground`,
        }, "Try");
        return h("tr", {},
          h("th", { scope: "row" }, h("code", {}, tool.name)),
          h("td", {}, tool.description || "–"),
          h("td", {}, tool.skill_ids.join(", ") || "–"),
          h("td", {}, state), h("td", {}, approveButton || tryLink));
      }));
      if (!tools.length) toolsBody.append(h("tr", {}, h("td", { colspan: 5 }, "No tools discovered yet.")));
    }

    async function loadTools() {
      renderTools((await ctx.api.get(`${base}/tools`)).tools);
    }

    async function load() {
      try {
        server = ctx.live.overlay(await ctx.api.get(base));
        const history = await ctx.api.get(`${base}/history`);
        renderServer();
        fill(timeline, history.map(entry));
        lastShown = history.length ? history[history.length - 1].timestamp : null;
        await loadTools();
        await loadAccount();
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        fill(main, pageTitle("Server not found"), notice("error", `${error.message} (${error.code})`),
          h("p", {}, h("a", { href: "#/servers" }, "Back to the servers")));
      }
    }

    const unsubscribe = ctx.live.subscribe((type, event) => {
      if (type === "ready") return load();
      if (!server || !event || event.server_id !== id) return;
      if (type === "server.removed") {
        fill(messages, notice("error", `${server.name} was removed.`));
        announce(`${server.name} was removed`, true);
        return;
      }
      server = ctx.live.overlay(server);
      renderServer();
      const item = historyOf(event);
      if (item && (!lastShown || Date.parse(item.timestamp) > Date.parse(lastShown))) {
        timeline.append(entry(item));
        lastShown = item.timestamp;
      }
      if (type === "server.status_changed") announce(`${server.name} is ${event.data.status}`);
      if (type === "server.authorized") loadAccount().catch(() => {});
      if (type.startsWith("tools.")) loadTools().catch(() => {});
    });
    await load();
    return unsubscribe;
  },
};
