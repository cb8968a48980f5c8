// The console: sign in with a key, then one page at a time (hash routes), live from the event stream.

import { Api, identify, session } from "./api.js";
import { announce, fill, h } from "./dom.js";
import { Live } from "./live.js";
import { PAGES } from "./pages/index.js";
import signIn from "./pages/signin.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");

let ctx = null; // {api, identity, live}
let cleanup = null;
let rendering = 0;

/** The page and its parameters for the current hash (``#/servers/ID`` -> servers/:id, {id}). */
function route() {
  const [path, query = ""] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (!parts.length) parts.push("servers");
  for (const page of PAGES) {
    const pattern = page.path.split("/");
    if (pattern.length !== parts.length) continue;
    const params = {};
    if (pattern.every((seg, i) => (seg.startsWith(":") ? ((params[seg.slice(1)] = parts[i]), true) : seg === parts[i]))) {
      return { page, params, query: new URLSearchParams(query) };
    }
  }
  return null;
}

function allowed(page) {
  return !page.manages || ctx.identity.manages;
}

function renderNav(current) {
  const active = current && (current.nav ? current : PAGES.find((p) => p.path === current.parent));
  const links = PAGES.filter((p) => p.nav && allowed(p)).map((p) =>
    h("li", {}, h("a", { href: `#/${p.path}`, "aria-current": p === active ? "page" : null }, p.title)),
  );
  fill(nav, h("ul", {}, links));
}

function renderWho() {
  const { identity } = ctx;
  const feed = h("span", { class: `feed feed-${ctx.live.state}`, id: "feed" }, feedText(ctx.live.state));
  const out = h("button", { type: "button", class: "secondary", onclick: signOut }, "Sign out");
  fill(who, feed, h("span", { class: "identity" }, `${identity.name} · ${identity.role} · ${identity.namespace}`), out);
}

function feedText(state) {
  return { live: "Live", reconnecting: "Reconnecting…", connecting: "Connecting…" }[state] || state;
}

async function render(focus) {
  const serial = ++rendering;
  if (cleanup) cleanup();
  cleanup = null;
  if (!ctx) {
    fill(nav);
    fill(who);
    fill(main);
    const open = route();
    if (open && open.page.public) {
      document.title = `${open.page.title} · toolmesh`;
      await open.page.mount(main, { params: open.params, query: open.query, signIn: start });
      return;
    }
    document.title = "Sign in · toolmesh";
    signIn.mount(main, { signIn: start });
    return;
  }
  const found = route();
  renderNav(found && found.page);
  if (!found || !allowed(found.page)) {
    document.title = "Not found · toolmesh";
    fill(main, h("h1", { tabindex: "-1", id: "page-title" }, "Not found"),
      h("p", {}, found ? "Your key's role may not open this page." : "There is no such page."),
      h("p", {}, h("a", { href: "#/servers" }, "Back to the servers")));
  } else {
    document.title = `${found.page.title} · toolmesh`;
    fill(main);
    const result = await found.page.mount(main, { ...ctx, params: found.params, query: found.query });
    if (serial !== rendering) {
      if (typeof result === "function") result();
      return;
    }
    cleanup = typeof result === "function" ? result : null;
  }
  if (focus) {
    const title = document.getElementById("page-title");
    if (title) title.focus();
  }
}

/** Start a signed-in session; ``focus`` moves focus to the page's heading (not on a fresh page load). */
async function start(token, identity, focus = true) {
  session.keep(token);
  const api = new Api(token, () => signOut("Your key no longer works (revoked or expired). Sign in again."));
  const live = new Live(api);
  ctx = { api, identity, live };
  live.subscribe((type, event) => {
    if (type === "state") {
      const feed = document.getElementById("feed");
      if (feed) {
        feed.className = `feed feed-${event.state}`;
        feed.textContent = feedText(event.state);
      }
    }
  });
  live.start();
  renderWho();
  if (!location.hash || location.hash === "#/signin") history.replaceState(null, "", "#/servers");
  await render(focus);
}

function signOut(reason) {
  if (!ctx) return;
  ctx.live.stop();
  ctx = null;
  session.forget();
  render(true);
  if (typeof reason === "string") announce(reason, true);
  else announce("Signed out");
}

window.addEventListener("hashchange", () => render(true));

document.querySelector(".skip").addEventListener("click", (event) => {
  event.preventDefault();
  main.focus();
});

async function boot() {
  const token = session.token();
  if (token) {
    try {
      await start(token, await identify(token), false);
      return;
    } catch {
      session.forget();
    }
  }
  render(false);
}

boot();
