// Every page of the console, in menu order. A page is one module exporting
// {path, title, nav, manages, public, mount(main, ctx)}: ``path`` may hold ":param" segments,
// ``manages`` hides it from keys that may not manage (their API calls would answer 403 anyway),
// ``public`` opens it signed out too (``ctx`` then holds only ``params``, ``query`` and ``signIn``),
// ``mount`` renders into ``main`` and may return a cleanup function. Adding a page is one module
// and one line here.

import approvals from "./approvals.js";
import apps from "./apps.js";
import audit from "./audit.js";
import calls from "./calls.js";
import consent from "./consent.js";
import endpoints from "./endpoints.js";
import keys from "./keys.js";
import playground, { chooser } from "./playground.js";
import policies from "./policies.js";
import quotas from "./quotas.js";
import server from "./server.js";
import servers from "./servers.js";
import tools from "./tools.js";

export const PAGES = [servers, server, tools, chooser, playground, endpoints, policies, quotas, approvals, calls, keys, apps, audit, consent];
