// The form that imports an MCP Registry server.json: paste it, read it (POST .../import-registry/plan
// says which packages and remotes it has and which inputs it takes), fill the inputs, import
// (POST .../import-registry registers it). The conversion is the API's, the same as `toolmesh import`.

import { ApiError } from "../api.js";
import { announce, h } from "../dom.js";
import { clearErrors, field, formErrors, showError, showFieldErrors } from "../forms.js";

const PLAN = "/api/v1/aggregator/servers/import-registry/plan";
const IMPORT = "/api/v1/aggregator/servers/import-registry";

/** The control of one input: a select for choices, a password field for a secret, else text. */
function inputControl(spec) {
  if (spec.choices.length) {
    const select = h("select", {}, spec.required ? null : h("option", { value: "" }, "(not set)"),
      spec.choices.map((choice) => h("option", { value: choice, selected: choice === spec.default }, choice)));
    return select;
  }
  return h("input", {
    type: spec.secret ? "password" : "text", autocomplete: "off", spellcheck: "false",
    placeholder: spec.placeholder || spec.default || "", required: spec.required,
  });
}

function inputHint(spec) {
  const parts = [spec.description, `${spec.kind}${spec.required ? ", required" : ""}${spec.secret ? ", secret (sealed)" : ""}`];
  if (spec.default !== null) parts.push(`default: ${spec.default}`);
  if (spec.format !== "string") parts.push(`format: ${spec.format}`);
  return parts.filter(Boolean).join(" · ");
}

/** ``{toggle, panel}``: a button that opens the import form, and the form's panel. */
export function importRegistryForm(ctx, onCreated) {
  const document_ = h("textarea", { rows: 8, spellcheck: "false", required: true });
  const read = h("button", { type: "button", class: "secondary" }, "Read entry");
  const option = h("select", {});
  const name = h("input", { type: "text", autocomplete: "off", spellcheck: "false" });
  const autoConnect = h("input", { type: "checkbox", checked: true });
  const inputs = h("div", { class: "group" });
  const details = h("div", { hidden: true },
    field({ id: "imp-option", label: "Run or connect to", control: option }),
    field({ id: "imp-name", label: "Server name", loc: "name", control: name,
      hint: "Default: the registry name's last part" }),
    h("h3", {}, "Inputs"), inputs,
    field({ id: "imp-connect", label: "Connect after importing", loc: "auto_connect", control: autoConnect }));
  const submit = h("button", { type: "submit", disabled: true }, "Import");
  const cancel = h("button", { type: "button", class: "secondary" }, "Cancel");
  const form = h("form", { class: "card register", novalidate: true, "aria-labelledby": "import-title" },
    h("h2", { id: "import-title" }, "Import from the MCP Registry"),
    formErrors(),
    field({ id: "imp-document", label: "server.json", loc: "document", control: document_,
      hint: 'A server.json, or the registry API\'s {"server": {...}}' }),
    h("div", { class: "actions" }, read),
    details,
    h("div", { class: "actions" }, cancel, submit));
  const panel = h("section", { hidden: true, id: "import-panel" }, form);
  const toggle = h("button", { type: "button", "aria-expanded": "false", "aria-controls": "import-panel" },
    "Import from the registry");
  let controls = new Map();

  function open(show) {
    panel.hidden = !show;
    toggle.setAttribute("aria-expanded", String(show));
    if (show) document_.focus();
    else toggle.focus();
  }

  function parsed() {
    try {
      return JSON.parse(document_.value);
    } catch (error) {
      showError(document_, `Not valid JSON: ${error.message}`);
      document_.focus();
      return null;
    }
  }

  function chosen() {
    const [kind, index] = (option.value || "").split(":");
    return kind ? { [kind]: Number(index) } : {};
  }

  function showPlan(plan) {
    option.replaceChildren(...plan.options.map((o) => h("option", {
      value: `${o.kind}:${o.index}`, disabled: Boolean(o.problem),
      selected: o.kind === plan.option.kind && o.index === plan.option.index,
    }, `${o.kind} ${o.index}: ${o.label}${o.problem ? ` (${o.problem})` : ""}`)));
    if (!name.value.trim()) name.placeholder = plan.name;
    controls = new Map();
    inputs.replaceChildren(...plan.inputs.map((spec, i) => {
      const control = inputControl(spec);
      control.dataset.loc = `inputs.${spec.name}`;
      controls.set(spec.name, control);
      return field({ id: `imp-input-${i}`, label: spec.name, control, hint: inputHint(spec) });
    }));
    if (!plan.inputs.length) inputs.append(h("p", { class: "hint" }, "This entry takes no inputs."));
    details.hidden = false;
    submit.disabled = false;
  }

  function showRefusal(error) {
    if (error.status === 422 && error.fieldErrors.length) {
      showFieldErrors(form, error.fieldErrors);
      return;
    }
    const missing = (error.body && error.body.context && error.body.context.missing_inputs) || [];
    const located = missing.filter((n) => controls.has(n)).map((n) => ({ loc: ["inputs", n], msg: "A value is required" }));
    showFieldErrors(form, [...located, { loc: [], msg: `${error.message} (${error.code})` }]);
  }

  async function readEntry() {
    clearErrors(form);
    const doc = parsed();
    if (doc === null) return;
    read.disabled = true;
    try {
      showPlan(await ctx.api.post(PLAN, { document: doc, ...chosen() }));
      announce("Entry read: fill its inputs and import");
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      details.hidden = true;
      submit.disabled = true;
      showRefusal(error);
    } finally {
      read.disabled = false;
    }
  }

  read.addEventListener("click", readEntry);
  option.addEventListener("change", readEntry);
  document_.addEventListener("input", () => { option.replaceChildren(); details.hidden = true; submit.disabled = true; });
  toggle.addEventListener("click", () => open(panel.hidden));
  cancel.addEventListener("click", () => open(false));
  form.addEventListener("keydown", (event) => {
    if (event.key === "Escape") open(false);
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    const doc = parsed();
    if (doc === null) return;
    const values = {};
    for (const [key, control] of controls) if (control.value !== "") values[key] = control.value;
    const request = { document: doc, inputs: values, auto_connect: autoConnect.checked, ...chosen() };
    if (name.value.trim()) request.name = name.value.trim();
    submit.disabled = true;
    try {
      const created = await ctx.api.post(IMPORT, request);
      announce(`Imported ${created.name}: ${created.status}`);
      form.reset();
      details.hidden = true;
      open(false);
      onCreated(created);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      submit.disabled = false;
      if (error.code === "SERVER_ALREADY_EXISTS") showFieldErrors(form, [{ loc: ["name"], msg: error.message }]);
      else showRefusal(error);
    }
  });
  return { toggle, panel };
}
