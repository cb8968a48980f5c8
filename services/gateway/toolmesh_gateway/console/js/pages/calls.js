// Tool calls waiting for a human (a policy asked for an approval): what will run, approve or reject
// with a comment; and the recent decisions. Admins of the namespace and the owner only.

import { ApiError } from "../api.js";
import { announce, fill, h, notice, pageTitle, timeElement } from "../dom.js";

const APPROVALS = "/api/v1/approvals";

export default {
  path: "calls",
  title: "Call approvals",
  nav: true,
  manages: true,
  async mount(main, ctx) {
    const messages = h("div", { class: "messages" });
    const pending = h("div", { class: "call-approvals" });
    const recent = h("tbody");
    fill(main, pageTitle("Call approvals"),
      h("p", { class: "lead" }, "A tool call that a policy puts before a human waits here until you approve or reject it, "
        + "or until its deadline passes (the caller then gets an error)."),
      messages, pending,
      h("h2", {}, "Recent decisions"),
      h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, ["Created", "Call", "Caller", "State", "Decided by", "Comment"].map((t) => h("th", { scope: "col" }, t)))),
        recent)));

    async function load() {
      messages.replaceChildren();
      try {
        const { approvals } = await ctx.api.get(APPROVALS);
        render(approvals.filter((a) => a.state === "pending"), approvals.filter((a) => a.state !== "pending"));
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        messages.append(notice("error", `Cannot load the approvals: ${error.message} (${error.code})`));
      }
    }

    function card(approval) {
      const titleId = `call-${approval.id}`;
      const comment = h("input", { type: "text", id: `comment-${approval.id}`, autocomplete: "off", maxlength: "2000" });
      const what = `${approval.server}.${approval.tool}`;
      return h("section", { class: "card", "aria-labelledby": titleId, dataset: { approval: approval.id } },
        h("h2", { id: titleId }, h("code", {}, what), ` by ${approval.caller}`),
        h("dl", {},
          h("dt", {}, "Why"), h("dd", {}, `${approval.reason} (policy ${approval.policy}, from ${approval.surface})`),
          h("dt", {}, "Arguments"), h("dd", {}, h("pre", {}, JSON.stringify(approval.arguments, null, 2))),
          h("dt", {}, "Deadline"), h("dd", {}, timeElement(approval.deadline))),
        h("label", { for: comment.id }, "Comment (optional)"), comment,
        h("div", { class: "actions" },
          h("button", { type: "button", "aria-label": `Approve ${what} by ${approval.caller}`,
            onclick: () => decide(approval, "approve", comment.value) }, "Approve"),
          h("button", { type: "button", class: "secondary", "aria-label": `Reject ${what} by ${approval.caller}`,
            onclick: () => decide(approval, "reject", comment.value) }, "Reject")));
    }

    function render(waiting, decided) {
      fill(pending, waiting.length ? waiting.map(card) : h("p", { class: "empty" }, "No tool call is waiting for a decision."));
      fill(recent, decided.map((a) => h("tr", { dataset: { approval: a.id } },
        h("td", {}, timeElement(a.created)), h("td", {}, h("code", {}, `${a.server}.${a.tool}`)), h("td", {}, a.caller),
        h("td", {}, a.state), h("td", {}, a.decided_by || "–"), h("td", {}, a.comment || "–"))));
    }

    async function decide(approval, verb, comment) {
      try {
        const body = comment.trim() ? { comment: comment.trim() } : undefined;
        const done = await ctx.api.post(`${APPROVALS}/${encodeURIComponent(approval.id)}/${verb}`, body);
        announce(`${done.server}.${done.tool} ${done.state}`);
        await load();
        document.getElementById("page-title").focus();
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        messages.append(notice("error", `${error.message} (${error.code})`));
        await load();
      }
    }

    const unsubscribe = ctx.live.subscribe((type) => {
      if (type === "ready" || type === "approval.requested" || type === "approval.decided") load();
    });
    await load();
    return unsubscribe;
  },
};
