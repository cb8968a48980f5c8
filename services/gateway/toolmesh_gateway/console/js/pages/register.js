// The form that registers a server (POST /api/v1/aggregator/servers); the API's 422 errors are
// shown on the field they name.

import { ApiError } from "../api.js";
import { announce, h } from "../dom.js";
import { clearErrors, field, formErrors, parsePairs, showError, showFieldErrors } from "../forms.js";

const TRANSPORTS = [
  ["STDIO", "STDIO: a command this host runs"],
  ["SSE", "SSE: a URL (Server-Sent Events)"],
  ["HTTP", "HTTP: a Streamable HTTP URL"],
  ["OPENAPI", "OpenAPI: the URL of an API's OpenAPI document (each operation is a tool)"],
];

const URL_FIELD = { SSE: "url", HTTP: "base_url", OPENAPI: "spec_url" };

function lines(text) {
  return text.split("\n").map((l) => l.trim()).filter(Boolean);
}

/** ``{toggle, panel}``: a button that opens the form, and the form's panel. */
export function registerForm(ctx, onCreated) {
  const owner = ctx.identity.role === "owner";
  const input = (attrs = {}) => h("input", { type: "text", autocomplete: "off", spellcheck: "false", ...attrs });
  const area = (attrs = {}) => h("textarea", { rows: 3, spellcheck: "false", ...attrs });

  const name = input({ required: true });
  const description = input();
  const command = input();
  const args = area();
  const env = area();
  const url = input({ type: "url" });
  const headers = area();
  const credentials = area();
  const healthUrl = input({ type: "url" });
  const newTools = h("select", {}, h("option", { value: "auto" }, "listed at once"), h("option", { value: "review" }, "held for review"));
  const autoConnect = h("input", { type: "checkbox", checked: true });
  const insecure = h("input", { type: "checkbox" });
  const namespace = owner ? input({ placeholder: ctx.identity.namespace }) : null;

  const radios = TRANSPORTS.map(([value, label], i) => {
    const radio = h("input", { type: "radio", name: "transport_type", id: `transport-${value}`, value, checked: i === 0 });
    radio.dataset.loc = "transport_type";
    return h("div", { class: "check" }, radio, h("label", { for: radio.id }, label));
  });
  const transport = h("fieldset", { class: "field" }, h("legend", {}, "Transport"), radios,
    h("p", { class: "error", id: "transport-STDIO-error", hidden: true }));

  const stdio = h("div", { class: "group" },
    field({ id: "reg-command", label: "Command", loc: "connection_config.command", control: command,
      hint: "The program to start, e.g. npx or /usr/bin/python3" }),
    field({ id: "reg-args", label: "Arguments", loc: "connection_config.args", control: args, hint: "One per line" }),
    field({ id: "reg-env", label: "Environment", loc: "connection_config.env", control: env,
      hint: "KEY=value, one per line; ${VAR} is expanded by the worker" }));
  const remote = h("div", { class: "group", hidden: true },
    field({ id: "reg-url", label: "URL", loc: "connection_config.url", control: url, hint: "https:// unless loopback" }),
    field({ id: "reg-headers", label: "Headers", loc: "connection_config.headers", control: headers,
      hint: "Name=value, one per line" }));
  const openapi = h("div", { class: "group", hidden: true },
    field({ id: "reg-credentials", label: "Credentials", loc: "connection_config.credentials", control: credentials,
      hint: "Security scheme=value, one per line: an API key, a bearer token, or user:password for basic" }));

  const submit = h("button", { type: "submit" }, "Register");
  const cancel = h("button", { type: "button", class: "secondary" }, "Cancel");
  const form = h("form", { class: "card register", novalidate: true, "aria-labelledby": "register-title" },
    h("h2", { id: "register-title" }, "Register a server"),
    formErrors(),
    h("div", { class: "columns" },
      h("div", {},
        field({ id: "reg-name", label: "Name", loc: "name", control: name,
          hint: "Lowercase letters, digits, - and _; starts with a letter. Tools are named name.tool" }),
        field({ id: "reg-description", label: "Description", loc: "description", control: description }),
        transport, stdio, remote, openapi),
      h("div", {},
        field({ id: "reg-health", label: "Health check URL", loc: "health_check_url", control: healthUrl,
          hint: "Optional; otherwise an MCP ping checks health" }),
        field({ id: "reg-new-tools", label: "Tools that appear later are", loc: "new_tools", control: newTools }),
        owner ? field({ id: "reg-namespace", label: "Namespace", loc: "namespace", control: namespace,
          hint: "Default: your own" }) : null,
        field({ id: "reg-connect", label: "Connect now", loc: "auto_connect", control: autoConnect }),
        field({ id: "reg-insecure", label: "Allow plain http:// to a remote host", loc: "allow_insecure", control: insecure }))),
    h("div", { class: "actions" }, cancel, submit));
  const panel = h("section", { hidden: true, id: "register-panel" }, form);
  const toggle = h("button", { type: "button", "aria-expanded": "false", "aria-controls": "register-panel" }, "Register a server");

  function selected() {
    return form.querySelector("input[name=transport_type]:checked").value;
  }

  function showTransport() {
    const isStdio = selected() === "STDIO";
    stdio.hidden = !isStdio;
    remote.hidden = isStdio;
    openapi.hidden = selected() !== "OPENAPI";
    url.dataset.loc = `connection_config.${URL_FIELD[selected()]}`;
  }

  function open(show) {
    panel.hidden = !show;
    toggle.setAttribute("aria-expanded", String(show));
    if (show) name.focus();
    else toggle.focus();
  }

  function body() {
    const config = {};
    if (selected() === "STDIO") {
      if (command.value.trim()) config.command = command.value.trim();
      if (lines(args.value).length) config.args = lines(args.value);
      const pairs = parsePairs(env.value);
      if (Object.keys(pairs).length) config.env = pairs;
    } else {
      config[URL_FIELD[selected()]] = url.value.trim();
      const pairs = parsePairs(headers.value);
      if (Object.keys(pairs).length) config.headers = pairs;
      let secrets = {};
      try {
        secrets = selected() === "OPENAPI" ? parsePairs(credentials.value) : {};
      } catch (error) {
        error.control = credentials;
        throw error;
      }
      if (Object.keys(secrets).length) config.credentials = secrets;
    }
    const request = {
      name: name.value.trim(),
      transport_type: selected(),
      connection_config: config,
      auto_connect: autoConnect.checked,
      new_tools: newTools.value,
      allow_insecure: insecure.checked,
    };
    if (description.value.trim()) request.description = description.value.trim();
    if (healthUrl.value.trim()) request.health_check_url = healthUrl.value.trim();
    if (namespace && namespace.value.trim()) request.namespace = namespace.value.trim();
    return request;
  }

  for (const radio of form.querySelectorAll("input[name=transport_type]")) radio.addEventListener("change", showTransport);
  toggle.addEventListener("click", () => open(panel.hidden));
  cancel.addEventListener("click", () => open(false));
  form.addEventListener("keydown", (event) => {
    if (event.key === "Escape") open(false);
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    let request;
    try {
      request = body();
    } catch (error) {
      const control = selected() === "STDIO" ? env : (error.control || headers);
      showError(control, error.message);
      control.focus();
      return;
    }
    submit.disabled = true;
    try {
      const created = await ctx.api.post("/api/v1/aggregator/servers", request);
      announce(`Registered ${created.name}: ${created.status}`);
      form.reset();
      showTransport();
      open(false);
      onCreated(created);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (error.status === 422) showFieldErrors(form, error.fieldErrors);
      else if (error.code === "SERVER_ALREADY_EXISTS") showFieldErrors(form, [{ loc: ["name"], msg: error.message }]);
      else showFieldErrors(form, [{ loc: [], msg: `${error.message} (${error.code})` }]);
    } finally {
      submit.disabled = false;
    }
  });
  showTransport();
  return { toggle, panel };
}
