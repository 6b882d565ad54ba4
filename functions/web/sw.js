// The push service worker, served at /sw.js so that its scope (/) covers the page. It does three
// things: a push shows a notification unless one of the app's windows is visible (the person
// sees the message live there); a click on the notification brings up the room — in a
// window of the app that is already open when there is one, in a new one otherwise; and when
// the browser's push service replaces the subscription (`pushsubscriptionchange`), it
// subscribes again with the old options and hands the new subscription to the app's windows,
// which PUT it to the API with the signed-in person's token (a token the worker never holds);
// with none open, the page PUTs the browser's subscription on its next load.
//
// The payload is the notification function's JSON (shared/src/notify/mod.rs, `Payload`):
//   { roomId, messageId, senderName, preview, mentioned }
// It carries ids, the sender's name and a short preview only. A push without a readable
// payload still ends in a notification: Chromium requires one for every push
// (`userVisibleOnly`).

self.addEventListener("install", () => self.skipWaiting());
// Control the page that registered us at once, so a click can reach it without a reload.
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

/** The push's JSON, or a generic one when it has none or it is not JSON. */
function readPayload(data) {
  try {
    const json = data?.json();
    if (json && typeof json === "object") return json;
  } catch {
    // fall through
  }
  return { roomId: null, messageId: null, senderName: "Someone", preview: "", mentioned: false };
}

/** The app's windows of this origin, controlled or not. */
function appWindows() {
  return self.clients.matchAll({ type: "window", includeUncontrolled: true });
}

/** The notification a payload makes: its title, and options carrying the room to open. */
function notificationFor(payload) {
  const sender = payload.senderName || "Someone";
  const title = payload.mentioned ? `${sender} mentioned you` : `New message from ${sender}`;
  return {
    title,
    options: {
      body: payload.preview || "Open tabletalk to read it",
      // One notification per room: a newer message replaces the older one, and still alerts.
      tag: payload.roomId ? `room-${payload.roomId}` : "tabletalk",
      renotify: true,
      data: { roomId: payload.roomId, messageId: payload.messageId },
    },
  };
}

/** Shows the push's notification unless a window of the app is visible. Resolves with whether it showed one. */
async function showUnlessVisible(payload) {
  const windows = await appWindows();
  if (windows.some((w) => w.visibilityState === "visible")) return false;
  const { title, options } = notificationFor(payload);
  await self.registration.showNotification(title, options);
  return true;
}

/** The page's address of a room (router.js `roomHref`). */
function roomUrl(roomId) {
  const hash = roomId ? `#/rooms/${encodeURIComponent(roomId)}` : "";
  return new URL(`/${hash}`, self.location.origin).href;
}

/**
 * Brings up `roomId`: an open window of the app is told to show it (it keeps its state: no
 * reload) and focused; with none, a new window opens at the room. (Focusing and opening a
 * window are allowed while a notification click is handled.)
 */
async function openRoom(roomId) {
  const windows = await appWindows();
  const target = windows.find((w) => w.focused) ?? windows.find((w) => w.visibilityState === "visible") ?? windows[0];
  if (target) {
    target.postMessage({ type: "tabletalk:open-room", roomId });
    try {
      await target.focus();
    } catch {
      // Not allowed outside a click: the window shows the room all the same.
    }
    return target;
  }
  return self.clients.openWindow(roomUrl(roomId));
}

/**
 * What this worker did with each push it handled, newest last: `{messageId, shown}`, once the
 * notification (if any) is shown. To read in DevTools, and for tests/web/push.mjs, which waits
 * for its push here before it reads the notifications: Chromium drops a notification that a
 * `getNotifications()` call reads while the notification is still on its way to the screen
 * (under load that read finds it not displayed yet, counts it as closed and deletes it).
 */
const handledPushes = [];

self.addEventListener("push", (event) => {
  const payload = readPayload(event.data);
  event.waitUntil(
    showUnlessVisible(payload).then((shown) => {
      handledPushes.push({ messageId: payload.messageId, shown });
    }),
  );
});

/** A click on one of our notifications: it goes, and its room comes up. */
function onNotificationClick(notification) {
  notification.close();
  return openRoom(notification.data?.roomId ?? null);
}

self.addEventListener("notificationclick", (event) => {
  event.waitUntil(onNotificationClick(event.notification));
});

/**
 * The subscription the push service replaced, renewed: the new one the event carries, else one
 * made with the old one's options (its `applicationServerKey`, the server's VAPID key).
 * Resolves with the new subscription's JSON, once every open window of the app has it.
 */
async function renewSubscription(oldSubscription, newSubscription) {
  const manager = self.registration.pushManager;
  const options = oldSubscription?.options ?? (await manager.getSubscription())?.options;
  const renewed =
    newSubscription ??
    (await manager.subscribe({ userVisibleOnly: true, applicationServerKey: options?.applicationServerKey }));
  const subscription = renewed.toJSON();
  for (const window of await appWindows()) window.postMessage({ type: "tabletalk:push-renewed", subscription });
  return subscription;
}

self.addEventListener("pushsubscriptionchange", (event) => {
  event.waitUntil(renewSubscription(event.oldSubscription, event.newSubscription));
});
