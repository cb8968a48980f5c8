// Tools: every tool of the caller's servers, or what a search finds (hybrid BM25 + embeddings),
// narrowed by skills, categories and servers as facets.

import { ApiError } from "../api.js";
import { announce, fill, h, notice, pageTitle } from "../dom.js";

const LIMIT = 50;

function playgroundLink(serverId, originalName, name) {
  return h("a", { href: `#/playground/${encodeURIComponent(serverId)}/${encodeURIComponent(originalName)}`,
    "aria-label": `Try ${name} in the playground` }, "Try");
}

export default {
  path: "tools",
  title: "Tools",
  nav: true,
  async mount(main, ctx) {
    const query = h("input", { type: "search", id: "tool-query", name: "q", value: ctx.query.get("q") || "",
      "aria-describedby": "tool-query-hint", autocomplete: "off" });
    const form = h("form", { role: "search", class: "search", "aria-label": "Tools" },
      h("label", { for: "tool-query" }, "Search tools"),
      h("p", { class: "hint", id: "tool-query-hint" }, "Describe what you want to do, e.g. “echo a message”. Empty lists every tool."),
      h("div", { class: "inline" }, query, h("button", { type: "submit" }, "Search")));
    const facets = h("div", { class: "facets" });
    const status = h("p", { class: "counts", id: "tool-count" });
    const messages = h("div", { class: "messages" });
    const results = h("tbody");
    const table = h("table", { "aria-describedby": "tool-count" },
      h("thead", {}, h("tr", {}, ["Tool", "Server", "Description", "Skills", "Score", ""].map((t) => h("th", { scope: "col" }, t)))),
      results);
    fill(main, pageTitle("Tools"), form,
      h("div", { class: "with-facets" }, h("aside", { "aria-label": "Filters" }, facets),
        h("div", {}, messages, status, h("div", { class: "table-wrap" }, table))));

    let rows = []; // {name, original_name, server_id, server_name, description, skills, category, score}
    let skillNames = {};
    const chosen = { skill: new Set(), category: new Set(), server: new Set() };
    const pick = { skill: (r) => r.skills, category: (r) => (r.category ? [r.category] : []), server: (r) => [r.server_name] };

    async function load() {
      messages.replaceChildren();
      const text = query.value.trim();
      try {
        if (text) {
          const found = await ctx.api.post("/api/v1/search", { query: text, limit: LIMIT });
          skillNames = Object.fromEntries(found.matched_skills.map((s) => [s.id, s.name]));
          rows = found.tools.map((t) => ({ name: t.name, original_name: t.original_name, server_id: t.source_server.id,
            server_name: t.source_server.name, description: t.description, skills: t.skill_ids, category: t.category,
            score: t.score }));
        } else {
          skillNames = {};
          rows = (await ctx.api.servers(true)).flatMap((s) => (s.tools || []).filter((t) => !t.held).map((t) => ({
            name: t.name, original_name: t.original_name, server_id: s.id, server_name: s.name,
            description: t.description, skills: t.skill_ids, category: t.category, score: null })));
        }
        for (const kind of Object.keys(chosen)) {
          const present = new Set(rows.flatMap(pick[kind]));
          for (const value of [...chosen[kind]]) if (!present.has(value)) chosen[kind].delete(value);
        }
        renderFacets();
        renderRows();
        announce(`${shown().length} tools${text ? ` found for “${text}”` : ""}`);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        messages.append(notice("error", `Search failed: ${error.message} (${error.code})`));
      }
    }

    function shown() {
      return rows.filter((r) => Object.keys(chosen).every(
        (kind) => !chosen[kind].size || pick[kind](r).some((value) => chosen[kind].has(value))));
    }

    function facet(kind, legend, values, label) {
      if (!values.size) return null;
      const boxes = [...values.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([value, count], i) => {
        const id = `facet-${kind}-${i}`;
        const box = h("input", { type: "checkbox", id, value, checked: chosen[kind].has(value),
          onchange: () => {
            if (box.checked) chosen[kind].add(value);
            else chosen[kind].delete(value);
            renderRows();
            announce(`${shown().length} tools shown`);
          } });
        return h("div", { class: "check" }, box, h("label", { for: id }, `${label(value)} (${count})`));
      });
      return h("fieldset", { class: "facet" }, h("legend", {}, legend), boxes);
    }

    function renderFacets() {
      const count = (values) => rows.reduce((map, r) => {
        for (const v of values(r)) map.set(v, (map.get(v) || 0) + 1);
        return map;
      }, new Map());
      fill(facets,
        facet("skill", "Skills", count(pick.skill), (id) => skillNames[id] || id.replaceAll("_", " ")),
        facet("category", "Categories", count(pick.category), (name) => name),
        facet("server", "Servers", count(pick.server), (name) => name));
    }

    function renderRows() {
      const list = shown();
      status.textContent = `${list.length} of ${rows.length} tools`;
      fill(results, list.map((r) => h("tr", {},
        h("th", { scope: "row" }, h("code", {}, r.name)),
        h("td", {}, h("a", { href: `#/servers/${encodeURIComponent(r.server_id)}` }, r.server_name)),
        h("td", {}, r.description || "–"),
        h("td", {}, r.skills.map((s) => skillNames[s] || s).join(", ") || "–"),
        h("td", { class: "num" }, r.score === null ? "–" : r.score.toFixed(3)),
        h("td", {}, playgroundLink(r.server_id, r.original_name, r.name)))));
    }

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = query.value.trim();
      history.replaceState(null, "", text ? `#/tools?q=${encodeURIComponent(text)}` : "#/tools");
      load();
    });

    const unsubscribe = ctx.live.subscribe((type) => {
      if (type === "ready" || type === "tools.discovered" || type === "server.removed") {
        if (!query.value.trim()) load();
      }
    });
    await load();
    return unsubscribe;
  },
};
