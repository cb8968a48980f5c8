// Consent for an MCP client signing in with OAuth: /authorize sends the browser here with the
// request's id. Signed out, the page asks for the API key itself (the person stays signed in after)
// or, when one is configured, sends the person to sign in at the identity provider (which brings them
// back here, signed in for this request only); signed in, it shows what the client asks and as whom,
// and "Allow" or "Deny" sends the browser back to the client's redirect URI.

import { Api, ApiError } from "../api.js";
import { announce, fill, h, notice, pageTitle, timeElement } from "../dom.js";
import { keyForm } from "./signin.js";

const REQUESTS = "/api/v1/oauth/requests";
const SCOPES = {
  mcp: "use the MCP endpoint: list and call its tools as you",
  offline_access: "stay signed in (refresh its access without asking again)",
};

/** The host of a URL (``127.0.0.1:8976``), or the text itself when it is not one. */
function host(url) {
  try {
    return new URL(url).host || url;
  } catch {
    return url;
  }
}

export default {
  path: "consent/:id",
  title: "Allow an MCP client",
  nav: false,
  public: true,
  async mount(main, ctx) {
    const id = ctx.params.id;
    if (ctx.api) {
      const messages = h("div", { class: "messages" });
      const request = await describe(ctx.api, id, messages);
      const { identity } = ctx;
      answer(main, ctx.api, id, request, messages, `${identity.name} · ${identity.role} · ${identity.namespace}`);
      return;
    }
    // Signed out: the person may have signed in at the identity provider for this very request (the
    // browser holds its cookie); else they sign in here, with an API key or at the identity provider.
    const person = new Api(null);
    const signedIn = await describe(person, id, h("div"));
    if (signedIn && signedIn.signed_in_as) {
      const who = signedIn.signed_in_as;
      answer(main, person, id, signedIn, h("div", { class: "messages" }), `${who.name} · ${who.role} · ${who.namespace}`);
      return;
    }
    const { form, input } = keyForm(h("h2", { id: "signin-title" }, "Sign in to answer"), ctx.signIn);
    form.classList.add("in-page");
    const failed = ctx.query.get("sign_in_error");
    const options = await person.get("/api/v1/oauth/sign-in").catch(() => ({}));
    const provider = options.identity_provider
      ? h("p", { class: "actions" }, h("a", { class: "button", id: "sign-in-provider",
        href: `${options.sign_in_path}?request=${encodeURIComponent(id)}` }, `Sign in with ${options.identity_provider}`))
      : null;
    fill(main, pageTitle("Allow an MCP client?"),
      h("p", { class: "lead" }, "An MCP client asks to use toolmesh as you. Sign in to see what it asks, then allow "
        + "or deny it."),
      failed ? notice("error", failed) : null,
      provider,
      form);
    input.focus();
  },
};

/** The request and the "Allow"/"Deny" buttons, answering as ``as`` through ``api``; a request that
 * cannot be answered (``request`` null) says so, with the reason in ``messages``. */
function answer(main, api, id, request, messages, as) {
  if (!request) {
    fill(main, pageTitle("This request cannot be answered"), messages,
      h("p", {}, "Start signing in again from the MCP client: it opens a new request."),
      h("p", {}, h("a", { href: "#/servers" }, "Go to the console")));
    return;
  }
  const client = request.client_name || request.client_id;
  const facts = [
    ["Client", [client, request.client_name ? h("span", { class: "namespace" }, ` (${request.client_id})`) : null]],
    request.client_uri ? ["Website", h("code", {}, request.client_uri)] : null,
    ["Sends you back to", h("code", { id: "consent-redirect" }, host(request.redirect_uri))],
    ["Endpoint", h("code", { id: "consent-endpoint" }, request.endpoint)],
    ["Asks to", h("ul", { class: "scopes" }, request.scopes.map((s) => h("li", {}, h("code", {}, s), " — ", SCOPES[s] || s)))],
    ["As", h("span", { id: "consent-identity" }, as)],
    ["Expires", timeElement(request.expires_at)],
  ].filter(Boolean);
  const deny = h("button", { type: "button", class: "secondary", onclick: () => decide(false) }, "Deny");
  const allow = h("button", { type: "button", onclick: () => decide(true) }, "Allow");
  fill(main, pageTitle(`Allow ${client} to use toolmesh as you?`),
    h("section", { class: "card consent", "aria-labelledby": "page-title" },
      h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      h("p", { class: "hint" }, "It acts with your role and namespace, only at this endpoint, until you "
        + "disconnect it under Connected apps."),
      messages,
      h("div", { class: "actions" }, deny, allow)));

  async function decide(allowed) {
    messages.replaceChildren();
    deny.disabled = allow.disabled = true;
    try {
      const { redirect_to: target } = await api.post(`${REQUESTS}/${encodeURIComponent(id)}/decision`, { allow: allowed });
      const text = `${allowed ? "Allowed" : "Denied"}. Sending you back to ${host(request.redirect_uri)}…`;
      messages.append(notice("ok", text));
      announce(text);
      location.href = target;
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      messages.append(notice("error", `${error.message} (${error.code})`));
      const gone = error.code === "AUTHORIZATION_REQUEST_NOT_FOUND";
      deny.disabled = gone;
      allow.disabled = gone || error.status === 403 || error.code === "ENDPOINT_NOT_FOUND";
    }
  }
}

/** The request's details, or null with the reason shown in ``messages``. */
async function describe(api, id, messages) {
  try {
    return await api.get(`${REQUESTS}/${encodeURIComponent(id)}`);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    messages.append(notice("error", `${error.message} (${error.code})`));
    return null;
  }
}
