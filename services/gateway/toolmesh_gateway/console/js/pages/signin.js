// Sign in with an API key (kept in this tab's sessionStorage only).

import { identify } from "../api.js";
import { announce, h } from "../dom.js";

/**
 * The "API key" form: checks the key with ``GET /api/v1/auth/me``, then ``signIn(token, identity)``.
 * ``heading`` is the form's title element (the sign-in page's h1, or a section's h2).
 */
export function keyForm(heading, signIn) {
  const input = h("input", {
    id: "token", name: "token", type: "password", autocomplete: "off", spellcheck: "false", required: true,
    "aria-describedby": "token-hint",
  });
  const error = h("p", { class: "error", id: "token-error", hidden: true });
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h("form", { class: "card signin", novalidate: true },
    heading,
    h("div", { class: "field" },
      h("label", { for: "token" }, "API key"),
      h("p", { class: "hint", id: "token-hint" },
        "A key from `toolmesh keys create`, or the admin token of `toolmesh up`. It stays in this tab only."),
      input, error),
    button);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    error.hidden = true;
    input.removeAttribute("aria-invalid");
    if (!token) return fail("Enter an API key.");
    button.disabled = true;
    try {
      const identity = await identify(token);
      announce(`Signed in as ${identity.name}`);
      await signIn(token, identity);
    } catch (e) {
      fail(e.status === 401 ? "This key is not valid." : `Cannot sign in: ${e.message}`);
    } finally {
      button.disabled = false;
    }
  });

  function fail(text) {
    error.textContent = text;
    error.hidden = false;
    input.setAttribute("aria-invalid", "true");
    input.setAttribute("aria-describedby", "token-hint token-error");
    input.focus();
    announce(text, true);
  }

  return { form, input };
}

export default {
  mount(main, { signIn }) {
    const { form, input } = keyForm(h("h1", { tabindex: "-1", id: "page-title" }, "Sign in to toolmesh"), signIn);
    main.append(form);
    input.focus();
  },
};
