// Files behind tabletalk's own URLs (an attachment, a thumbnail, a room's emoji): each needs
// the bearer token, so it is fetched (the redirect to the store's short-lived link is
// followed) and handed to the browser as a blob URL, once per URL for the page's life.

import { apiBase } from "./config.js";

export function createFiles(me) {
  const blobs = new Map();
  return {
    /** Where tabletalk's own paths are served from. */
    base: apiBase,
    /** The file at tabletalk's `path` as a blob URL; a failure is forgotten, so it is asked again. */
    blob(path) {
      if (!blobs.has(path)) {
        const url = /^https?:/.test(path) ? path : apiBase + path;
        const got = fetch(url, { headers: { authorization: `Bearer ${me.token}` } }).then(async (r) => {
          if (!r.ok) throw new Error(`HTTP ${r.status}`);
          return URL.createObjectURL(await r.blob());
        });
        got.catch(() => blobs.delete(path));
        blobs.set(path, got);
      }
      return blobs.get(path);
    },
  };
}
