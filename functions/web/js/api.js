// The HTTP API: one `request` that adds the bearer token, turns an error answer into an
// ApiError ({status, code, message} as the server's `{code, message}` body says), and retries
// what is safe to retry (network failures, 502/503/504 and 429, with growing waits and jitter)
// for idempotent methods only. A send is not retried here: the outbox (outbox.js) retries it
// with the same clientId, which is what makes that safe. Each operation of the API the page
// uses is one small method below, named after its OpenAPI operationId.

import { apiBase } from "./config.js";

/** The path of a room, and of one of its messages (ids percent-encoded). */
export const room = (id) => `/api/rooms/${encodeURIComponent(id)}`;
export const message = (roomId, id) => `${room(roomId)}/messages/${encodeURIComponent(id)}`;

/** A query string of the parameters that are set (`""` when none is). */
export const query = (params) => {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null));
  const s = q.toString();
  return s ? `?${s}` : "";
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
  /** A network failure or an answer that says "try again" (the request may have landed). */
  get transient() {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }
}

const IDEMPOTENT = new Set(["GET", "PUT", "DELETE", "HEAD"]);
/**
 * How long a request may take before it counts as a network failure. A browser's fetch has no
 * limit of its own, and one that never answers (a half-dead connection) would hold whatever
 * waits on it, e.g. scroll-back, for good.
 */
const TIMEOUT_MS = 30000;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits of 250 ms, 500 ms, 1 s, … up to `cap`, each with ±30 % jitter. */
export function backoff(attempt, base = 250, cap = 8000) {
  const wait = Math.min(cap, base * 2 ** attempt);
  return wait * (0.7 + Math.random() * 0.6);
}

/** A request that got no (whole) answer: the network failed or the time ran out. */
const networkFailure = (e) => new ApiError(0, e.name === "TimeoutError" ? "TIMEOUT" : "NETWORK", e.message);

export function createApi({ token, onUnauthorized = () => {} }) {
  async function once(method, path, body) {
    let response;
    try {
      response = await fetch(apiBase + path, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
    } catch (e) {
      throw networkFailure(e);
    }
    if (response.status === 204) return null;
    const text = await response.text().catch((e) => {
      throw networkFailure(e);
    });
    const data = text ? safeJson(text) : null;
    if (!response.ok) {
      if (response.status === 401) onUnauthorized();
      throw new ApiError(response.status, data?.code ?? "HTTP", data?.message ?? text);
    }
    return data;
  }

  async function request(method, path, body, { retries = IDEMPOTENT.has(method) ? 4 : 0 } = {}) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await once(method, path, body);
      } catch (e) {
        if (!(e instanceof ApiError) || !e.transient || attempt >= retries) throw e;
        await sleep(backoff(attempt));
      }
    }
  }


  return {
    request,
    listRooms: () => request("GET", "/api/rooms"),
    getRoom: (id) => request("GET", room(id)),
    createRoom: (input) => request("POST", "/api/rooms", input),
    roomDirectory: (q, cursor) => request("GET", `/api/rooms/directory${query({ q, cursor, limit: 50 })}`),
    joinRoom: (id) => request("POST", `${room(id)}/join`, undefined, { retries: 2 }),
    openDirect: (userId) => request("POST", "/api/dms", { userId }, { retries: 2 }),
    createInvitation: (id, userId) => request("POST", `${room(id)}/invites`, { userId }),
    listMyInvitations: () => request("GET", "/api/invites"),
    acceptInvitation: (id) => request("POST", `/api/invites/${encodeURIComponent(id)}/accept`, undefined, { retries: 2 }),
    listMembers: (id) => request("GET", `${room(id)}/members`),
    readMessages: (id, { cursor, limit = 50, order = "desc" } = {}) =>
      request("GET", `${room(id)}/messages${query({ order, cursor, limit })}`),
    readAround: (id, messageId, limit = 50) =>
      request("GET", `${room(id)}/messages${query({ around: messageId, limit })}`),
    getMessage: (roomId, id) => request("GET", message(roomId, id)),
    /** One attempt: the outbox decides about retrying (same clientId). */
    createMessage: (id, input) => request("POST", `${room(id)}/messages`, input, { retries: 0 }),
    editMessage: (roomId, id, text, format) => request("PATCH", message(roomId, id), { text, format }, { retries: 2 }),
    deleteMessage: (roomId, id) => request("DELETE", message(roomId, id)),
    listCommands: (id) => request("GET", `${room(id)}/commands`),
    listRoomEmoji: (id) => request("GET", `${room(id)}/emoji`),
    suggestEmoji: (q) => request("GET", `/api/emoji${query({ q, limit: 8 })}`, undefined, { retries: 0 }),
    /** One attempt: a command is never repeated by the page (its clientId runs it once). */
    runCommand: (id, input) => request("POST", `${room(id)}/commands`, input, { retries: 0 }),
    addReaction: (roomId, id, emoji) => request("PUT", `${message(roomId, id)}/reactions/${encodeURIComponent(emoji)}`),
    removeReaction: (roomId, id, emoji) =>
      request("DELETE", `${message(roomId, id)}/reactions/${encodeURIComponent(emoji)}`),
    typing: (id) => request("POST", `${room(id)}/typing`, undefined, { retries: 0 }),
    markRead: (id, messageId) => request("POST", `${room(id)}/read`, messageId ? { messageId } : {}, { retries: 2 }),
    listReceipts: (id) => request("GET", `${room(id)}/receipts`),
    negotiate: () => request("POST", "/api/negotiate", undefined, { retries: 3 }),
    viewRoom: (connectionId, roomId) => request("PUT", "/api/live/view", { connectionId, roomId }, { retries: 0 }),
  };
}

/** The development sign-in of a local server (404 anywhere else). */
export async function devSignIn(userId, name) {
  const response = await fetch(`${apiBase}/api/dev/signin`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ userId, name: name || undefined }),
  });
  const data = safeJson(await response.text());
  if (!response.ok) throw new ApiError(response.status, data?.code, data?.message);
  return data.token;
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
