// Where the API is and who the page is. A host that embeds the page (a Functions deployment
// with its own sign-in, say) sets `window.TABLETALK = {apiBase, token}` before the page's
// modules load; a link may carry `#token=<jwt>` (taken once, then removed from the address bar).
// Otherwise the API is this page's origin and the token is the one the sign-in stored for this
// tab (sessionStorage: a second tab may sign in as someone else).

const KEY = "tabletalk.token";
const host = globalThis.TABLETALK ?? {};

/** The API's origin, without a trailing slash ("" means this page's origin). */
export const apiBase = String(host.apiBase ?? "").replace(/\/+$/, "");

/** Whether the host gave the token (then the page has no sign-in or sign-out of its own). */
export const hostToken = Boolean(host.token);

function tokenFromHash() {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (!match) return null;
  const rest = location.hash.replace(/(^#|&)token=[^&]+/, "$1").replace(/^#&/, "#");
  history.replaceState(null, "", location.pathname + location.search + (rest === "#" ? "" : rest));
  return decodeURIComponent(match[1]);
}

export function loadToken() {
  if (host.token) return host.token;
  const fromHash = tokenFromHash();
  if (fromHash) sessionStorage.setItem(KEY, fromHash);
  return fromHash ?? sessionStorage.getItem(KEY);
}

export function saveToken(token) {
  if (token) sessionStorage.setItem(KEY, token);
  else sessionStorage.removeItem(KEY);
}

/** The claims of a JWT (unverified: only to show who is signed in; the server checks it). */
export function claims(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(decodeURIComponent(escape(atob(part))));
  } catch {
    return {};
  }
}
