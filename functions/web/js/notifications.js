// Push notifications, enabled from a click and never on load: the button registers the service
// worker (/sw.js, whose scope is the page's), asks the browser's permission, reads the
// server's VAPID key (`GET /api/push/vapidPublicKey`, 404 where push is not configured),
// subscribes with it (`userVisibleOnly`, as Chromium requires) and PUTs the subscription's
// JSON to the API (subscribePush). Clicking again turns them off (unsubscribePush, then the
// browser's unsubscribe). Every way this can fail — no support, permission refused, push not
// configured, the browser's push service unreachable — is said in the status next to the
// button and leaves notifications off: messages still arrive live while the page is open.
//
// The worker tells an open window to show a room when its notification is clicked
// ({type: "tabletalk:open-room", roomId}); this module listens for that on every load.

import { roomHref } from "./router.js";

const WORKER_URL = "/sw.js";
/** Who enabled this browser's notifications: only their pages tell the server of the
 * subscription again (tabs may be signed in as different people). */
const OWNER_KEY = "tabletalk.push.owner";
/** How long the browser's push service may take to give a subscription. (Chromium with a
 * profile but no network never answers; an off-the-record profile refuses at once.) */
const SUBSCRIBE_TIMEOUT_MS = 20_000;

/** `promise`, or a rejection naming `what` after `ms`. */
function within(promise, ms, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** base64url -> bytes, for `applicationServerKey`. */
export function keyBytes(base64url) {
  const base64 = base64url.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(base64url.length / 4) * 4, "=");
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}

const supported = () => "serviceWorker" in navigator && "PushManager" in globalThis && "Notification" in globalThis;

export function addNotifications({ api, me }) {
  const mine = () => localStorage.getItem(OWNER_KEY) === me.userId;
  const wrap = document.createElement("div");
  wrap.className = "notifications";
  const button = document.createElement("button");
  button.type = "button";
  button.id = "notifications-toggle";
  button.dataset.testid = "notifications-toggle";
  button.setAttribute("aria-describedby", "notifications-status");
  // What happened, below the button until dismissed (a success goes by itself).
  const note = document.createElement("div");
  note.className = "notifications-note";
  note.hidden = true;
  const status = document.createElement("p");
  status.id = "notifications-status";
  status.className = "notifications-status";
  status.dataset.testid = "notifications-status";
  status.setAttribute("role", "status");
  const dismiss = document.createElement("button");
  dismiss.type = "button";
  dismiss.textContent = "Dismiss";
  dismiss.dataset.testid = "notifications-dismiss";
  dismiss.addEventListener("click", () => {
    note.hidden = true;
    button.focus();
  });
  note.append(status, dismiss);
  wrap.append(button, note);
  document.getElementById("signout").before(wrap);

  let busy = false;
  let fade = null;
  function show(state, text = "") {
    wrap.dataset.state = state;
    button.dataset.state = state;
    button.textContent = state === "on" ? "Turn off notifications" : "Enable notifications";
    status.textContent = text;
    note.hidden = !text;
    note.dataset.tone = state === "on" || state === "off" || state === "working" ? "info" : "problem";
    clearTimeout(fade);
    if (text && (state === "on" || state === "off")) fade = setTimeout(() => (note.hidden = true), 5000);
  }

  async function current() {
    if (!supported()) return null;
    const registration = await navigator.serviceWorker.getRegistration("/");
    return (await registration?.pushManager.getSubscription()) ?? null;
  }

  async function enable() {
    if (!supported()) return show("unsupported", "This browser cannot show notifications from a web page.");
    show("working", "Enabling notifications…");
    const registration = await navigator.serviceWorker.register(WORKER_URL, { scope: "/" });
    await navigator.serviceWorker.ready;
    const permission = await Notification.requestPermission();
    if (permission !== "granted") {
      return show("denied", "Notifications are blocked for this site: allow them in the browser's site settings.");
    }
    let key;
    try {
      key = (await api.request("GET", "/api/push/vapidPublicKey")).publicKey;
    } catch (e) {
      if (e.status === 404) return show("unavailable", "This server sends no push notifications.");
      throw e;
    }
    let subscription;
    try {
      subscription =
        (await registration.pushManager.getSubscription()) ??
        (await within(
          registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(key) }),
          SUBSCRIBE_TIMEOUT_MS,
          "the push service",
        ));
    } catch (e) {
      // Chromium without a reachable push service (offline, or a build without one) ends here.
      return show(
        "push-unreachable",
        `This browser could not reach its push service (${e.message || e.name}): notifications stay off; messages still arrive live while the page is open.`,
      );
    }
    await api.request("PUT", "/api/push/subscriptions", subscription.toJSON());
    localStorage.setItem(OWNER_KEY, me.userId);
    show("on", "Notifications are on for this browser.");
  }

  async function disable() {
    show("working", "Turning notifications off…");
    const subscription = await current();
    if (subscription) {
      await api.request("DELETE", "/api/push/subscriptions", { endpoint: subscription.endpoint });
      await subscription.unsubscribe();
    }
    localStorage.removeItem(OWNER_KEY);
    show("off", "Notifications are off.");
  }

  button.addEventListener("click", async () => {
    if (busy) return;
    busy = true;
    button.disabled = true;
    const turnOff = button.dataset.state === "on";
    try {
      await (turnOff ? disable() : enable());
    } catch (e) {
      show(turnOff ? "on" : "off", `Could not ${turnOff ? "turn notifications off" : "enable notifications"}: ${e.message}`);
    } finally {
      busy = false;
      button.disabled = false;
    }
  });

  show("off");
  // What this browser already has (no registering, no prompt): a subscription from before, which
  // the server is told again (a PUT of the same subscription changes nothing): the push service
  // may have replaced it while no window was open to pass the new one on.
  current()
    .then(async (subscription) => {
      if (!subscription || Notification.permission !== "granted" || !mine()) return;
      show("on", "");
      await api.request("PUT", "/api/push/subscriptions", subscription.toJSON());
    })
    .catch(() => {});

  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.addEventListener("message", (event) => {
      if (event.data?.type === "tabletalk:open-room" && event.data.roomId) location.hash = roomHref(event.data.roomId);
      // The worker renewed the subscription the push service replaced (sw.js).
      if (event.data?.type === "tabletalk:push-renewed" && event.data.subscription && mine()) {
        api.request("PUT", "/api/push/subscriptions", event.data.subscription).catch(() => {});
      }
    });
    navigator.serviceWorker.startMessages?.();
  }
}
