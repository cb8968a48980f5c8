// The REST API with the signed-in key. Every failure is an ApiError with the contract's body.

export class ApiError extends Error {
  constructor(status, body) {
    super(ApiError.message(status, body));
    this.status = status;
    this.body = body;
  }

  static message(status, body) {
    if (body && typeof body.detail === "string") return body.detail;
    if (body && Array.isArray(body.detail)) return body.detail.map((d) => d.msg).join("; ");
    return status ? `HTTP ${status}` : "toolmesh did not answer";
  }

  /** The contract's error code (``VALIDATION_ERROR``, ``FORBIDDEN``, ...). */
  get code() {
    return (this.body && this.body.error_code) || String(this.status);
  }

  /** A 422's errors as ``[{loc: ["connection_config", "url"], msg}]`` (``body`` left out of ``loc``). */
  get fieldErrors() {
    if (this.status !== 422 || !this.body || !Array.isArray(this.body.detail)) return [];
    return this.body.detail.map((d) => ({
      loc: (d.loc || []).filter((part, i) => !(i === 0 && (part === "body" || part === "query"))).map(String),
      msg: String(d.msg || "invalid").replace(/^Value error, /, ""),
    }));
  }
}

export class Api {
  /** ``onUnauthorized`` runs when the key stops working (revoked, or never valid). Without a token,
   * requests carry only what the browser adds itself (the consent page's sign-in cookie). */
  constructor(token, onUnauthorized = () => {}) {
    this.token = token;
    this.onUnauthorized = onUnauthorized;
  }

  get headers() {
    return this.token ? { Authorization: `Bearer ${this.token}` } : {};
  }

  async request(method, path, body = undefined) {
    const init = { method, headers: { ...this.headers }, cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch {
      throw new ApiError(0, null);
    }
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = { detail: text };
    }
    if (!response.ok) {
      if (response.status === 401) this.onUnauthorized();
      throw new ApiError(response.status, data);
    }
    return data;
  }

  get(path) { return this.request("GET", path); }
  post(path, body) { return this.request("POST", path, body); }
  delete(path) { return this.request("DELETE", path); }

  /** Every server of the caller (all pages), optionally with their tools. */
  async servers(includeTools = false) {
    const servers = [];
    for (;;) {
      const page = await this.get(`/api/v1/aggregator/servers?limit=1000&offset=${servers.length}&include_tools=${includeTools}`);
      servers.push(...page.servers);
      if (!page.servers.length || servers.length >= page.total) return servers;
    }
  }
}

/** Who a key belongs to (``GET /api/v1/auth/me``); throws ApiError for a key that does not work. */
export async function identify(token) {
  return new Api(token).get("/api/v1/auth/me");
}

const KEY = "toolmesh.key";

/** The key of this browser tab's session (sessionStorage only: gone when the tab closes). */
export const session = {
  token: () => sessionStorage.getItem(KEY),
  keep: (token) => sessionStorage.setItem(KEY, token),
  forget: () => sessionStorage.removeItem(KEY),
};
