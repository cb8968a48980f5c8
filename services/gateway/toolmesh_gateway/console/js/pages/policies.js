// Policies on tool calls: CEL expressions over a call and the effect when they are true (deny,
// require approval, allow, redact). Admins manage their namespace's, the owner also the global ones.

import { ApiError } from "../api.js";
import { announce, confirmedRemoval, fill, h, notice, pageTitle, timeElement } from "../dom.js";
import { clearErrors, field, formErrors, showFieldErrors } from "../forms.js";

const POLICIES = "/api/v1/policies";
const EFFECTS = ["deny", "require_approval", "allow", "redact"];

/** Field paths typed comma-separated or one per line. */
function fields(text) {
  return text.split(/[\n,]/).map((p) => p.trim()).filter(Boolean);
}

export default {
  path: "policies",
  title: "Policies",
  nav: true,
  manages: true,
  async mount(main, ctx) {
    const owner = ctx.identity.role === "owner";
    const name = h("input", { type: "text", autocomplete: "off", spellcheck: "false", required: true });
    const namespace = h("input", { type: "text", autocomplete: "off", spellcheck: "false",
      value: owner ? "" : ctx.identity.namespace, readOnly: !owner });
    const expression = h("textarea", { rows: 3, spellcheck: "false", required: true,
      placeholder: 'server.name == "github" && tool.name.startsWith("delete_") && principal.role == "user"' });
    const effect = h("select", {}, EFFECTS.map((e) => h("option", { value: e }, e)));
    const reason = h("input", { type: "text", autocomplete: "off" });
    const redact = h("input", { type: "text", autocomplete: "off", spellcheck: "false", placeholder: "owner.email, token" });
    const dryRun = h("input", { type: "checkbox" });
    const create = h("button", { type: "submit" }, "Add policy");
    const form = h("form", { class: "card", novalidate: true, "aria-labelledby": "policy-title" },
      h("h2", { id: "policy-title" }, "Add a policy"), formErrors(),
      h("div", { class: "columns" },
        field({ id: "policy-name", label: "Name", loc: "name", control: name }),
        field({ id: "policy-namespace", label: "Namespace", loc: "namespace", control: namespace,
          hint: owner ? "Empty: every namespace (a global policy)" : "Your namespace" })),
      field({ id: "policy-expression", label: "Expression (CEL)", loc: "expression", control: expression,
        hint: "Over principal, endpoint, surface, server, tool, args, now" }),
      h("div", { class: "columns" },
        field({ id: "policy-effect", label: "Effect", loc: "effect", control: effect }),
        field({ id: "policy-reason", label: "Reason", loc: "reason", control: reason, hint: "Shown to the caller" })),
      h("div", { class: "columns" },
        field({ id: "policy-redact", label: "Redacted fields", loc: "redact", control: redact,
          hint: "For a redact policy: keys of the result, dotted for nesting" }),
        field({ id: "policy-dry-run", label: "Dry run (log and audit only)", loc: "mode", control: dryRun })),
      h("div", { class: "actions" }, create));
    const messages = h("div", { class: "messages" });
    const body = h("tbody");
    fill(main, pageTitle("Policies"), form, messages,
      h("div", { class: "table-wrap" }, h("table", {},
        h("caption", { class: "visually-hidden" }, "Policies on tool calls"),
        h("thead", {}, h("tr", {}, ["Name", "Namespace", "Effect", "Mode", "Expression", "Version", "Updated", ""]
          .map((t) => h("th", { scope: "col" }, t)))),
        body)));

    async function load() {
      try {
        const { policies } = await ctx.api.get(POLICIES);
        fill(body, policies.map((policy) => h("tr", { dataset: { policy: policy.name } },
          h("th", { scope: "row" }, policy.name, policy.reason ? h("p", { class: "hint" }, policy.reason) : null),
          h("td", {}, policy.namespace ?? "every namespace"),
          h("td", {}, policy.effect + (policy.redact.length ? `: ${policy.redact.join(", ")}` : "")),
          h("td", {}, policy.mode === "dry_run" ? "dry run" : "enforced"),
          h("td", {}, h("code", {}, policy.expression)),
          h("td", {}, String(policy.version)),
          h("td", {}, timeElement(policy.updated_at)),
          h("td", {}, owner || policy.namespace !== null ? h("button", { type: "button", class: "danger",
            "aria-label": `Delete ${policy.name}`, onclick: () => remove(policy) }, "Delete") : null))));
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        messages.append(notice("error", `Cannot list policies: ${error.message} (${error.code})`));
      }
    }

    async function remove(policy) {
      await confirmedRemoval({
        question: `Delete the policy ${policy.name}? Calls stop being checked against it.`,
        label: "Delete",
        remove: () => ctx.api.delete(`${POLICIES}/${encodeURIComponent(policy.id)}`),
        done: `Deleted ${policy.name}`,
        reload: load,
        messages,
      });
    }

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors(form);
      const request = { name: name.value.trim(), expression: expression.value.trim(), effect: effect.value,
        namespace: namespace.value.trim() || null, redact: effect.value === "redact" ? fields(redact.value) : [],
        mode: dryRun.checked ? "dry_run" : "enforce" };
      if (reason.value.trim()) request.reason = reason.value.trim();
      create.disabled = true;
      try {
        const created = await ctx.api.post(POLICIES, request);
        form.reset();
        if (!owner) namespace.value = ctx.identity.namespace;
        announce(`Added policy ${created.name}`);
        await load();
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        if (error.status === 422) showFieldErrors(form, error.fieldErrors.length ? error.fieldErrors
          : [{ loc: [error.body?.context?.field].filter(Boolean), msg: error.message }]);
        else if (error.code === "POLICY_ALREADY_EXISTS") showFieldErrors(form, [{ loc: ["name"], msg: error.message }]);
        else showFieldErrors(form, [{ loc: [], msg: `${error.message} (${error.code})` }]);
      } finally {
        create.disabled = false;
      }
    });

    const unsubscribe = ctx.live.subscribe((type) => {
      if (type === "ready" || type === "policy.saved" || type === "policy.deleted") load();
    });
    await load();
    return unsubscribe;
  },
};
