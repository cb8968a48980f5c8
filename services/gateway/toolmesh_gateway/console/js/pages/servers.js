// Servers: live status and health from the event stream, and (for admins) register, connect,
// disconnect, remove, and connect the account of a server behind OAuth.

import { ApiError } from "../api.js";
import { announce, confirmDialog, fill, formatMs, h, notice, pageTitle, statusBadge, timeElement } from "../dom.js";
import { importRegistryForm } from "./import_registry.js";
import { registerForm } from "./register.js";

const SERVERS = "/api/v1/aggregator/servers";
const ORDER = ["CONNECTED", "DEGRADED", "CONNECTING", "DISCONNECTING", "DISCONNECTED", "ERROR"];

function health(server) {
  if (!server.last_health_check && server.consecutive_failures === undefined) return "–";
  if (server.consecutive_failures > 0) {
    return h("span", { class: "health bad" }, `${server.consecutive_failures} failed check${server.consecutive_failures === 1 ? "" : "s"}`);
  }
  if (!server.last_health_check) return "–";
  return h("span", { class: "health good" }, `ok · ${formatMs(server.last_response_time_ms)}`);
}

/** True when the server waits for an owner or admin to authorize it at its OAuth authorization server. */
export function needsAuthorization(server) {
  return server.status === "ERROR" && (server.error_message || "").includes("needs authorization:");
}

/** The state line under a server's status badge: "needs authorization", else its error. */
export function why(server) {
  if (needsAuthorization(server)) return h("span", { class: "why", title: server.error_message }, "needs authorization");
  return server.status === "ERROR" && server.error_message ? h("span", { class: "why" }, server.error_message) : null;
}

/** Start the OAuth authorization and open its URL in a new tab (opened at the click, so no popup blocker). */
async function authorize(ctx, server, path) {
  const tab = window.open("", "_blank");
  try {
    const reply = await ctx.api.post(`${path}/authorize`);
    if (reply.authorized) { // the caller's own token was exchanged: nothing to open
      if (tab) tab.close();
      announce(`${server.name}: your account is connected`);
      return;
    }
    if (tab) {
      tab.opener = null;
      tab.location.href = reply.authorization_url;
    }
    announce(`${server.name}: sign in on the new tab within ${reply.expires_in} s; the server connects by itself`);
  } catch (error) {
    if (tab) tab.close();
    throw error;
  }
}

/** Server-side actions of one row (or of the detail page): connect, disconnect, remove, authorize. */
export async function act(ctx, server, action) {
  const path = `${SERVERS}/${encodeURIComponent(server.id)}`;
  if (action === "authorize") {
    await authorize(ctx, server, path);
  } else if (action === "connect") {
    const reply = await ctx.api.post(`${path}/connect`);
    announce(`${server.name}: ${reply.message}`);
  } else if (action === "disconnect") {
    const reply = await ctx.api.post(`${path}/disconnect`, { force: false });
    announce(`${server.name}: ${reply.message}`);
  } else if (action === "remove") {
    if (!(await confirmDialog(`Remove ${server.name}, with its tools and history?`, "Remove"))) return false;
    await ctx.api.delete(path);
    announce(`Removed ${server.name}`);
  }
  return true;
}

export default {
  path: "servers",
  title: "Servers",
  nav: true,
  async mount(main, ctx) {
    const rows = new Map(); // id -> {server, tr}
    const manages = ctx.identity.manages;
    const counts = h("p", { class: "counts", id: "server-counts" });
    const message = h("div", { class: "messages" });
    const body = h("tbody");
    const table = h("table", { class: "servers", "aria-describedby": "server-counts" },
      h("caption", { class: "visually-hidden" }, "Registered servers, updated live"),
      h("thead", {}, h("tr", {},
        ["Name", "Status", "Transport", "Tools", "Health", "Last check", manages ? "Actions" : null]
          .filter(Boolean).map((t) => h("th", { scope: "col" }, t)))),
      body);
    const empty = h("p", { class: "empty", hidden: true }, "No servers yet.");
    const register = manages ? registerForm(ctx, (created) => upsert(created, true)) : null;
    const imported = manages ? importRegistryForm(ctx, (created) => upsert(created, true)) : null;

    fill(main,
      h("div", { class: "page-head" }, pageTitle("Servers"), register ? h("div", { class: "actions" }, imported.toggle, register.toggle) : null),
      register ? register.panel : null, imported ? imported.panel : null, message, counts, h("div", { class: "table-wrap" }, table), empty);

    function cells(server) {
      const link = h("a", { href: `#/servers/${encodeURIComponent(server.id)}` }, server.name);
      const tds = [
        h("th", { scope: "row" }, link, server.namespace !== ctx.identity.namespace || ctx.identity.role === "owner"
          ? h("span", { class: "namespace" }, ` ${server.namespace}`) : null),
        h("td", { class: "status" }, statusBadge(server.status), why(server)),
        h("td", {}, server.transport_type),
        h("td", { class: "num" }, String(server.tool_count ?? 0)),
        h("td", {}, health(server)),
        h("td", {}, timeElement(server.last_health_check)),
      ];
      if (manages) tds.push(h("td", {}, h("div", { class: "actions row-actions" }, actions(server))));
      return tds;
    }

    function actions(server) {
      const busy = ["CONNECTING", "DISCONNECTING"].includes(server.status);
      const connected = ["CONNECTED", "DEGRADED"].includes(server.status);
      const button = (action, label, cls = "secondary") => h("button", {
        type: "button", class: cls, dataset: { action }, "aria-label": `${label} ${server.name}`,
        disabled: busy && action !== "remove",
        onclick: () => run(server.id, action),
      }, label);
      const first = needsAuthorization(server) ? button("authorize", "Connect account", "")
        : connected ? button("disconnect", "Disconnect") : button("connect", "Connect");
      return [first, button("remove", "Remove", "danger")];
    }

    async function run(id, action) {
      const entry = rows.get(id);
      if (!entry) return;
      message.replaceChildren();
      try {
        if ((await act(ctx, entry.server, action)) && action === "remove") drop(id);
      } catch (error) {
        message.append(notice("error", `${entry.server.name}: ${error.message} (${error.code})`));
      }
    }

    /** Insert or update one server's row, keeping focus on the button that had it. */
    function upsert(server, fresh = false) {
      server = ctx.live.overlay(server);
      if (server.removed) return drop(server.id);
      const entry = rows.get(server.id);
      const merged = entry && !fresh ? { ...entry.server, ...server } : server;
      const focused = entry && entry.tr.contains(document.activeElement) ? document.activeElement.dataset.action || "link" : null;
      const tr = h("tr", { dataset: { id: merged.id, name: merged.name } }, cells(merged));
      if (entry) entry.tr.replaceWith(tr);
      else insertSorted(tr, merged.name);
      rows.set(merged.id, { server: merged, tr });
      if (focused) {
        const again = focused === "link" ? tr.querySelector("a") : tr.querySelector(`[data-action="${focused}"]`) || tr.querySelector("button");
        if (again) again.focus();
      }
      summarise();
    }

    function insertSorted(tr, name) {
      const after = [...body.children].find((row) => row.dataset.name > name);
      body.insertBefore(tr, after || null);
    }

    function drop(id) {
      const entry = rows.get(id);
      if (!entry) return;
      const hadFocus = entry.tr.contains(document.activeElement);
      entry.tr.remove();
      rows.delete(id);
      summarise();
      if (hadFocus) document.getElementById("page-title").focus();
    }

    function summarise() {
      const by = {};
      for (const { server } of rows.values()) by[server.status] = (by[server.status] || 0) + 1;
      const parts = ORDER.filter((s) => by[s]).map((s) => `${by[s]} ${s.toLowerCase()}`);
      counts.textContent = `${rows.size} server${rows.size === 1 ? "" : "s"}${parts.length ? `: ${parts.join(", ")}` : ""}`;
      empty.hidden = rows.size > 0;
      table.hidden = rows.size === 0;
    }

    async function load() {
      try {
        const servers = await ctx.api.servers();
        const seen = new Set(servers.map((s) => s.id));
        for (const id of [...rows.keys()]) if (!seen.has(id)) drop(id);
        for (const server of servers) upsert(server, true);
        summarise();
      } catch (error) {
        if (error instanceof ApiError) message.append(notice("error", `Cannot list servers: ${error.message}`));
      }
    }

    const unsubscribe = ctx.live.subscribe((type, event) => {
      if (type === "ready") return load();
      if (!event || !event.server_id) return;
      if (type === "server.removed") return drop(event.server_id);
      const before = rows.get(event.server_id);
      if (!before && type !== "server.registered" && !ctx.live.servers.get(event.server_id)?.name) return;
      upsert({ ...(before ? before.server : {}), id: event.server_id });
      if (type === "server.status_changed") announce(`${rows.get(event.server_id)?.server.name} is ${event.data.status}`);
    });
    await load();
    return unsubscribe;
  },
};
