// API keys (admins): create one (its token is shown once), list them, revoke one.

import { ApiError } from "../api.js";
import { announce, confirmedRemoval, fill, h, notice, pageTitle, timeElement } from "../dom.js";
import { clearErrors, field, formErrors, showFieldErrors } from "../forms.js";

const KEYS = "/api/v1/auth/keys";

export default {
  path: "keys",
  title: "Keys",
  nav: true,
  manages: true,
  async mount(main, ctx) {
    const owner = ctx.identity.role === "owner";
    const name = h("input", { type: "text", autocomplete: "off", spellcheck: "false", required: true });
    const role = h("select", {}, ["user", "admin", ...(owner ? ["owner"] : [])].map((r) => h("option", { value: r }, r)));
    const namespace = owner ? h("input", { type: "text", autocomplete: "off", placeholder: ctx.identity.namespace }) : null;
    const create = h("button", { type: "submit" }, "Create key");
    const form = h("form", { class: "card", novalidate: true, "aria-labelledby": "create-title" },
      h("h2", { id: "create-title" }, "Create a key"), formErrors(),
      h("div", { class: "columns three" },
        field({ id: "key-name", label: "Name", loc: "name", control: name, hint: "Letters, digits, . _ @ -" }),
        field({ id: "key-role", label: "Role", loc: "role", control: role,
          hint: "user: list, search, call · admin: also manage servers, keys, audit" }),
        owner ? field({ id: "key-namespace", label: "Namespace", loc: "namespace", control: namespace, hint: "Default: yours" }) : null),
      h("div", { class: "actions" }, create));
    const created = h("div", { class: "created" });
    const messages = h("div", { class: "messages" });
    const body = h("tbody");
    fill(main, pageTitle("API keys"), form, created, messages,
      h("div", { class: "table-wrap" }, h("table", {},
        h("caption", { class: "visually-hidden" }, "API keys (tokens are never shown again)"),
        h("thead", {}, h("tr", {}, ["Name", "Role", "Namespace", "Created", "By", ""].map((t) => h("th", { scope: "col" }, t)))),
        body)));

    function showToken(key) {
      const token = h("input", { type: "text", readonly: true, value: key.token, id: "new-token", class: "token",
        "aria-describedby": "new-token-hint" });
      const copy = h("button", { type: "button", class: "secondary", onclick: async () => {
        try {
          await navigator.clipboard.writeText(key.token);
          announce("Token copied");
        } catch {
          token.select();
          announce("Select the token and copy it", true);
        }
      } }, "Copy");
      const title = h("h2", { tabindex: "-1", id: "token-title" }, `Token of ${key.name}`);
      fill(created, h("section", { class: "card token-box", "aria-labelledby": "token-title" }, title,
        h("p", { id: "new-token-hint", class: "hint" }, "Copy it now: it is shown this once (only its hash is kept)."),
        h("label", { for: "new-token", class: "visually-hidden" }, "Token"),
        h("div", { class: "inline" }, token, copy),
        h("div", { class: "actions" }, h("button", { type: "button", class: "secondary", onclick: () => {
          created.replaceChildren();
          name.focus();
        } }, "Done"))));
      title.focus();
    }

    async function load() {
      try {
        const { keys } = await ctx.api.get(KEYS);
        fill(body, keys.map((key) => h("tr", { dataset: { key: key.name } },
          h("th", { scope: "row" }, key.name, key.id === ctx.identity.key_id ? h("span", { class: "badge ok" }, "you") : null),
          h("td", {}, key.role), h("td", {}, key.namespace), h("td", {}, timeElement(key.created_at)),
          h("td", {}, key.created_by || "–"),
          h("td", {}, h("button", { type: "button", class: "danger", "aria-label": `Revoke ${key.name}`,
            onclick: () => revoke(key) }, "Revoke")))));
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        messages.append(notice("error", `Cannot list keys: ${error.message} (${error.code})`));
      }
    }

    async function revoke(key) {
      const yours = key.id === ctx.identity.key_id ? " This is the key you are signed in with." : "";
      await confirmedRemoval({
        question: `Revoke ${key.name}?${yours} Every gateway refuses it at once.`,
        label: "Revoke",
        remove: () => ctx.api.delete(`${KEYS}/${encodeURIComponent(key.id)}`),
        done: `Revoked ${key.name}`,
        reload: load,
        messages,
      });
    }

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors(form);
      const request = { name: name.value.trim(), role: role.value };
      if (namespace && namespace.value.trim()) request.namespace = namespace.value.trim();
      create.disabled = true;
      try {
        const key = await ctx.api.post(KEYS, request);
        form.reset();
        announce(`Created ${key.role} key ${key.name}`);
        showToken(key);
        await load();
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        if (error.status === 422) showFieldErrors(form, error.fieldErrors);
        else if (error.code === "KEY_ALREADY_EXISTS") showFieldErrors(form, [{ loc: ["name"], msg: error.message }]);
        else showFieldErrors(form, [{ loc: [], msg: `${error.message} (${error.code})` }]);
      } finally {
        create.disabled = false;
      }
    });

    const unsubscribe = ctx.live.subscribe((type) => {
      if (type === "ready" || type === "key.created" || type === "key.revoked") load();
    });
    await load();
    return unsubscribe;
  },
};
