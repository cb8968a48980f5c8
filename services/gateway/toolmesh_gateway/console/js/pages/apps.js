// Connected apps: MCP clients allowed (on the consent page) to act as a key at one MCP endpoint.
// Every role sees its own; an admin sees its namespace's, the owner every one. Disconnecting ends
// the app's tokens at once on every gateway.

import { ApiError } from "../api.js";
import { announce, confirmDialog, fill, h, notice, pageTitle, timeElement } from "../dom.js";

const APPS = "/api/v1/auth/apps";

/** The endpoint path of a resource URL (``http://host/mcp/docs`` -> ``/mcp/docs``). */
function endpoint(resource) {
  try {
    return new URL(resource).pathname;
  } catch {
    return resource;
  }
}

export default {
  path: "apps",
  title: "Connected apps",
  nav: true,
  manages: false,
  async mount(main, ctx) {
    const messages = h("div", { class: "messages" });
    const count = h("p", { class: "counts", id: "apps-count" });
    const body = h("tbody");
    const table = h("div", { class: "table-wrap" }, h("table", {},
      h("caption", { class: "visually-hidden" }, "Connected apps"),
      h("thead", {}, h("tr", {}, ["Client", "Key", "Endpoint", "Created", "Last refreshed", ""].map((t) => h("th", { scope: "col" }, t)))),
      body));
    fill(main, pageTitle("Connected apps"),
      h("p", { class: "lead" }, "MCP clients that signed in with OAuth and act as a key at one MCP endpoint. "
        + (ctx.identity.manages ? "You see every app of the keys you manage." : "You see the apps of your key.")),
      messages, count, table);

    async function load() {
      try {
        const { apps, total } = await ctx.api.get(APPS);
        count.textContent = total === 1 ? "1 app" : `${total} apps`;
        table.hidden = !apps.length;
        if (!apps.length) count.replaceChildren(h("span", { class: "empty" }, "No app is connected."));
        fill(body, apps.map((app) => {
          const client = app.client_name || app.client_id;
          return h("tr", { dataset: { app: client } },
            h("th", { scope: "row" }, client, app.client_name ? h("span", { class: "namespace" }, ` ${app.client_id}`) : null),
            h("td", {}, app.key_name, " ", h("span", { class: "namespace" }, `${app.role} · ${app.namespace}`)),
            h("td", {}, h("code", {}, endpoint(app.resource))),
            h("td", {}, timeElement(app.created_at)),
            h("td", {}, timeElement(app.refreshed_at)),
            h("td", {}, h("button", { type: "button", class: "danger", "aria-label": `Disconnect ${client}`,
              onclick: () => disconnect(app, client) }, "Disconnect")));
        }));
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        messages.append(notice("error", `Cannot list connected apps: ${error.message} (${error.code})`));
      }
    }

    async function disconnect(app, client) {
      const question = `Disconnect ${client}? Its tokens stop working at once; it must ask for consent again.`;
      if (!(await confirmDialog(question, "Disconnect"))) return;
      messages.replaceChildren();
      try {
        await ctx.api.delete(`${APPS}/${encodeURIComponent(app.id)}`);
        announce(`Disconnected ${client}`);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        messages.append(notice("error", `${error.message} (${error.code})`));
      }
      await load();
      document.getElementById("page-title").focus();
    }

    // the stream tells managers of every app connected or disconnected; a user's list refreshes after its actions
    const unsubscribe = ctx.live.subscribe((type) => {
      if (type === "ready" || type === "app.connected" || type === "app.disconnected") load();
    });
    await load();
    return unsubscribe;
  },
};
