// A form from a tool's JSON Schema (inputSchema): one labelled control per property, values read
// back as the JSON arguments of the call, problems shown on their field.

import { h } from "./dom.js";
import { clearErrors, field, showError } from "./forms.js";

/** The schema of a property with ``$ref`` followed and ``Optional[...]`` (anyOf with null) unwrapped. */
function resolve(schema, root) {
  let current = schema || {};
  for (let depth = 0; depth < 5 && current.$ref; depth++) {
    const path = current.$ref.replace(/^#\//, "").split("/");
    current = path.reduce((node, key) => (node ? node[key] : undefined), root) || {};
  }
  const options = current.anyOf || current.oneOf;
  if (options) {
    const real = options.filter((o) => o.type !== "null");
    if (real.length === 1) return { ...current, ...resolve(real[0], root), anyOf: undefined, oneOf: undefined, nullable: true };
  }
  return current;
}

function kindOf(schema) {
  if (Array.isArray(schema.enum)) return "enum";
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  return ["string", "integer", "number", "boolean"].includes(type) ? type : "json";
}

function control(kind, schema) {
  const initial = schema.default;
  if (kind === "enum") {
    return h("select", {}, h("option", { value: "" }, "–"),
      schema.enum.map((v) => h("option", { value: JSON.stringify(v), selected: initial === v }, String(v))));
  }
  if (kind === "boolean") return h("input", { type: "checkbox", checked: initial === true });
  if (kind === "integer" || kind === "number") {
    return h("input", { type: "number", step: kind === "integer" ? "1" : "any", value: initial ?? "",
      min: schema.minimum, max: schema.maximum });
  }
  if (kind === "string") {
    const long = (schema.maxLength || 0) > 200 || schema.format === "textarea";
    return long ? h("textarea", { rows: 4, value: initial ?? "" }) : h("input", { type: "text", value: initial ?? "", autocomplete: "off" });
  }
  return h("textarea", { rows: 4, class: "json", spellcheck: "false",
    value: initial === undefined ? "" : JSON.stringify(initial, null, 2) });
}

/** ``{element, read}``: the fields, and ``read()`` -> the arguments, or null after showing problems. */
export function schemaForm(schema, prefix = "arg") {
  const root = schema || {};
  const properties = root.properties || {};
  const required = new Set(root.required || []);
  const inputs = [];
  const fields = Object.entries(properties).map(([name, raw], i) => {
    const spec = resolve(raw, root);
    const kind = kindOf(spec);
    const input = control(kind, spec);
    if (required.has(name) && kind !== "boolean") input.required = true;
    inputs.push({ name, kind, input, required: required.has(name) });
    const type = kind === "json" ? "JSON" : kind === "enum" ? "one of the options" : kind;
    const hint = [spec.description || raw.description, `${type}${required.has(name) ? ", required" : ""}`].filter(Boolean).join(" · ");
    const titled = spec.title && spec.title.toLowerCase().replaceAll(" ", "_") !== name.toLowerCase();
    return field({ id: `${prefix}-${i}`, label: titled ? `${name} (${spec.title})` : name,
      loc: name, control: input, hint });
  });
  const element = h("div", { class: "schema-form" },
    fields.length ? fields : h("p", { class: "hint" }, "This tool takes no arguments."));

  function read(form) {
    clearErrors(form);
    const args = {};
    let first = null;
    const fail = (input, message) => {
      showError(input, message);
      first = first || input;
    };
    for (const { name, kind, input, required: needed } of inputs) {
      if (kind === "boolean") {
        args[name] = input.checked;
        continue;
      }
      const text = input.value.trim();
      if (!text) {
        if (needed) fail(input, "Required.");
        continue;
      }
      if (kind === "enum") args[name] = JSON.parse(text);
      else if (kind === "integer" || kind === "number") {
        const number = Number(text);
        if (!Number.isFinite(number) || (kind === "integer" && !Number.isInteger(number))) fail(input, `Must be ${kind === "integer" ? "a whole number" : "a number"}.`);
        else args[name] = number;
      } else if (kind === "string") args[name] = input.value;
      else {
        try {
          args[name] = JSON.parse(text);
        } catch {
          fail(input, "Must be valid JSON.");
        }
      }
    }
    if (first) {
      first.focus();
      return null;
    }
    return args;
  }

  return { element, read };
}
