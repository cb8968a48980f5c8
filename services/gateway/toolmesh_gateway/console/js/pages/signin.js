// Sign in with an API key (kept in this tab's sessionStorage only).

import { identify } from "../api.js";
import { announce, h } from "../dom.js";

export default {
  mount(main, { signIn }) {
    const input = h("input", {
      id: "token", name: "token", type: "password", autocomplete: "off", spellcheck: "false", required: true,
      "aria-describedby": "token-hint",
    });
    const error = h("p", { class: "error", id: "token-error", hidden: true });
    const button = h("button", { type: "submit" }, "Sign in");
    const form = h("form", { class: "card signin", novalidate: true },
      h("h1", { tabindex: "-1", id: "page-title" }, "Sign in to toolmesh"),
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

    main.append(form);
    input.focus();
  },
};
