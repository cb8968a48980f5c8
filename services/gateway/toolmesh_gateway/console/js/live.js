// The live feed: GET /api/v1/events read with fetch() streaming (EventSource cannot send the
// Authorization header, and the key never goes in a URL), parsed as Server-Sent Events, and the
// latest facts about each server since the stream last said "ready".

const RETRY_MS = [500, 1000, 2000, 5000];

/** Split a Server-Sent Events text stream into messages ``{event, data, id}``. */
export class SseParser {
  constructor(onMessage) {
    this.onMessage = onMessage;
    this.buffer = "";
    this.reset();
  }

  reset() {
    this.event = "message";
    this.data = [];
    this.id = null;
  }

  push(text) {
    this.buffer += text;
    const lines = this.buffer.split(/\r\n|\r|\n/);
    this.buffer = lines.pop();
    for (const line of lines) this.line(line);
  }

  line(line) {
    if (line === "") {
      if (this.data.length) this.onMessage({ event: this.event, data: this.data.join("\n"), id: this.id });
      this.reset();
      return;
    }
    if (line.startsWith(":")) return; // a comment: keepalive
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id") this.id = value;
  }
}

/** What the events say about one server, merged over what the API listed. */
function facts(server, type, event) {
  const data = event.data;
  switch (type) {
    case "server.registered":
      return {
        ...server, id: event.server_id, name: data.name, description: data.description, namespace: event.namespace,
        transport_type: data.transport_type, status: server.status || "DISCONNECTED", tool_count: server.tool_count || 0,
        registered_at: event.occurred_at, removed: false,
      };
    case "server.status_changed":
      return {
        ...server, status: data.status, error_message: data.status === "ERROR" ? data.error_message : null,
        connected_at: data.status === "CONNECTED" ? event.occurred_at : server.connected_at,
      };
    case "server.removed":
      return { ...server, removed: true };
    case "tools.discovered":
      return { ...server, tool_count: data.tool_count };
    case "health.checked":
      return {
        ...server, last_health_check: event.occurred_at, consecutive_failures: data.consecutive_failures,
        last_response_time_ms: data.healthy ? data.response_time_ms : server.last_response_time_ms,
        healthy: data.healthy, last_error: data.error,
      };
    default:
      return server;
  }
}

export class Live {
  constructor(api) {
    this.api = api;
    this.servers = new Map(); // server id -> facts from events since "ready"
    this.listeners = new Set();
    this.state = "connecting"; // "live" | "reconnecting" | "stopped"
    this.controller = null;
  }

  /** ``listener(type, event)`` for each event, ``("ready")`` after each (re)connect; returns an unsubscribe. */
  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A server as listed by the API, with what the events said since (events win: they are newer). */
  overlay(server) {
    const seen = this.servers.get(server.id);
    return seen ? { ...server, ...seen } : server;
  }

  start() {
    this.controller = new AbortController();
    this.run(this.controller.signal);
  }

  stop() {
    this.state = "stopped";
    if (this.controller) this.controller.abort();
  }

  setState(state) {
    this.state = state;
    this.emit("state", { state });
  }

  emit(type, event) {
    for (const listener of [...this.listeners]) {
      try {
        listener(type, event);
      } catch (error) {
        console.error(error);
      }
    }
  }

  receive(message) {
    if (message.event === "ready") {
      this.servers.clear();
      this.setState("live");
      this.emit("ready", JSON.parse(message.data));
      return;
    }
    const event = JSON.parse(message.data);
    if (event.server_id) {
      this.servers.set(event.server_id, facts(this.servers.get(event.server_id) || {}, event.type, event));
    }
    this.emit(event.type, event);
  }

  async run(signal) {
    let attempt = 0;
    while (!signal.aborted) {
      try {
        const response = await fetch("/api/v1/events", { headers: this.api.headers, signal, cache: "no-store" });
        if (response.status === 401) {
          this.api.onUnauthorized();
          return;
        }
        if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
        attempt = 0;
        const parser = new SseParser((message) => this.receive(message));
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          parser.push(value);
        }
      } catch (error) {
        if (signal.aborted) return;
      }
      this.setState("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS[Math.min(attempt++, RETRY_MS.length - 1)]));
    }
  }
}
