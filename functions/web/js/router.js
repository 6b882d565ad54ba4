// The address: `#/rooms/<roomId>` shows a room, `#/rooms/<roomId>/messages/<messageId>` a
// permalink to one of its messages. Other hashes are left alone (in-page anchors).

export function parseRoute(hash = location.hash) {
  const match = /^#\/rooms\/([^/]+)(?:\/messages\/([^/]+))?\/?$/.exec(hash);
  if (!match) return null;
  return { roomId: decodeURIComponent(match[1]), messageId: match[2] ? decodeURIComponent(match[2]) : null };
}

export function roomHref(roomId, messageId) {
  return `#/rooms/${encodeURIComponent(roomId)}${messageId ? `/messages/${encodeURIComponent(messageId)}` : ""}`;
}

/** Calls `show(route)` now and whenever the hash names a room or a message. */
export function watchRoutes(show) {
  const go = () => {
    const route = parseRoute();
    if (route) show(route);
  };
  addEventListener("hashchange", go);
  go();
}
