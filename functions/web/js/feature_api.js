// The operations of the API that threads, pins, polls, attachments, presence and the room's
// emoji use, added to the page's one API object (api.js) so they share its token, its error
// answers and its retries of idempotent methods. Each is named after its OpenAPI operationId.

import { message, query, room } from "./api.js";

export function addFeatureApi(api) {
  const { request } = api;
  Object.assign(api, {
    readThread: (roomId, id, { cursor, limit = 50 } = {}) =>
      request("GET", `${message(roomId, id)}/thread${query({ cursor, limit })}`),
    followThread: (roomId, id) => request("PUT", `${message(roomId, id)}/follow`),
    unfollowThread: (roomId, id) => request("DELETE", `${message(roomId, id)}/follow`),
    markThreadRead: (roomId, id) => request("POST", `${message(roomId, id)}/thread/read`, undefined, { retries: 2 }),
    listMyThreads: () => request("GET", "/api/threads"),
    /** Pinning twice leaves it pinned, so a retry is safe. */
    pinMessage: (roomId, id) => request("POST", `${message(roomId, id)}/pin`, undefined, { retries: 2 }),
    unpinMessage: (roomId, id) => request("DELETE", `${message(roomId, id)}/pin`),
    listPins: (roomId, { cursor, limit = 50 } = {}) => request("GET", `${room(roomId)}/pins${query({ cursor, limit })}`),
    votePoll: (roomId, id, optionId) => request("PUT", `${message(roomId, id)}/vote`, { optionId }),
    createUpload: (roomId, file) => request("POST", `${room(roomId)}/uploads`, file, { retries: 2 }),
    createRoomEmoji: (roomId, emoji) => request("POST", `${room(roomId)}/emoji`, emoji),
    deleteRoomEmoji: (roomId, name) => request("DELETE", `${room(roomId)}/emoji/${encodeURIComponent(name)}`),
    getMyStatus: () => request("GET", "/api/me/status"),
    setMyStatus: (status) => request("PUT", "/api/me/status", status),
    clearMyStatus: () => request("DELETE", "/api/me/status"),
  });
  return api;
}
