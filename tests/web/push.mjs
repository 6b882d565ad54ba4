// The push path up to the service worker, against a server with a VAPID
// key that may push to loopback endpoints (tests/api/web_client.rs spawns it so).
//
// 1. With the browser's own push service: "Enable notifications" (a click) registers /sw.js,
//    whose scope covers the page, and subscribes. Chromium here cannot reach its push service
//    (no network), so `pushManager.subscribe` fails: the page says so next to the button and
//    leaves notifications off, and the server holds no subscription. (Should it ever succeed,
//    the subscription must be on the server.)
// 2. With a stand-in push service, the only thing between the page and the worker that is not
//    the real one: `pushManager.subscribe` answers with an endpoint on this script's own push
//    service (RFC 8030's receiving side) and keys this script holds. The page's own code PUTs
//    it and the server lists it; bob's message makes the server push to it; the stand-in checks
//    the VAPID token (RFC 8292) against the server's key and decrypts the body (RFC 8291), and
//    hands the plaintext to alice's worker through DevTools (`ServiceWorker.deliverPushMessage`)
//    while no window of the app is open: the worker shows the notification with the sender and
//    the preview. The same push while a window is visible shows none. A click (the worker's
//    click handler, called with the shown notification) brings the room up in alice's window.
//    When the push service replaces the subscription, the worker subscribes again with the old
//    options and the open window PUTs the new one (the event's handler is run in the worker
//    through DevTools, its push manager stood in as the page's is). Turning notifications off takes the
//    subscription off the server.
import crypto from "node:crypto";
import { mkdirSync } from "node:fs";
import http from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { base, check, openPage, run, signIn, step } from "./harness.mjs";
import { api, devToken, until } from "./server_api.mjs";

const shots =
  process.env.TABLETALK_WEB_SCREENSHOTS || join(dirname(fileURLToPath(import.meta.url)), "..", "..", "target", "web-screenshots");
mkdirSync(shots, { recursive: true });

const b64u = (bytes) => Buffer.from(bytes).toString("base64url");
const fromB64u = (text) => Buffer.from(text, "base64url");

// ---- the stand-in push service ----------------------------------------------------------------

/** RFC 8291's keys for one record: content-encryption key and nonce. */
function derive(ecdh, auth, uaPublic, asPublic, salt) {
  const info = Buffer.concat([Buffer.from("WebPush: info\0"), uaPublic, asPublic]);
  const ikm = Buffer.from(crypto.hkdfSync("sha256", ecdh, auth, info, 32));
  const cek = Buffer.from(crypto.hkdfSync("sha256", ikm, salt, Buffer.from("Content-Encoding: aes128gcm\0"), 16));
  const nonce = Buffer.from(crypto.hkdfSync("sha256", ikm, salt, Buffer.from("Content-Encoding: nonce\0"), 12));
  return { cek, nonce };
}

/** Decrypts an aes128gcm body of one record with the subscription's private key. */
function decrypt(ua, auth, body) {
  const salt = body.subarray(0, 16);
  const idLength = body[20];
  const asPublic = body.subarray(21, 21 + idLength);
  const sealed = body.subarray(21 + idLength);
  const { cek, nonce } = derive(ua.computeSecret(asPublic), auth, ua.getPublicKey(), asPublic, salt);
  const decipher = crypto.createDecipheriv("aes-128-gcm", cek, nonce);
  decipher.setAuthTag(sealed.subarray(sealed.length - 16));
  let plain = Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - 16)), decipher.final()]);
  let end = plain.length;
  while (end > 0 && plain[end - 1] === 0) end--;
  check(plain[end - 1] === 2, "the last record's delimiter");
  return plain.subarray(0, end - 1).toString("utf8");
}

/** Checks `Authorization: vapid t=<jwt>, k=<key>` (RFC 8292): ES256 by `k`, audience our origin. */
function checkVapid(header, origin, expectedKey) {
  const match = /^vapid t=([^,\s]+),\s*k=([^,\s]+)$/.exec(header ?? "");
  check(match, `a VAPID authorization header: ${header}`);
  const [, jwt, k] = match;
  check(k === expectedKey, "k is the server's VAPID public key");
  const [head, claims, signature] = jwt.split(".");
  const point = fromB64u(k);
  const key = crypto.createPublicKey({
    key: { kty: "EC", crv: "P-256", x: b64u(point.subarray(1, 33)), y: b64u(point.subarray(33, 65)) },
    format: "jwk",
  });
  const valid = crypto.verify("sha256", Buffer.from(`${head}.${claims}`), { key, dsaEncoding: "ieee-p1363" }, fromB64u(signature));
  check(valid, "the VAPID token's ES256 signature verifies against k");
  const body = JSON.parse(fromB64u(claims).toString("utf8"));
  check(body.aud === origin, `aud is the push service's origin: ${body.aud}`);
  check(body.exp * 1000 > Date.now(), "the token has not expired");
}

/** A push service on loopback: records each decrypted push, answers 201 as RFC 8030 says. */
async function standInPushService(vapidKey) {
  const ua = crypto.createECDH("prime256v1");
  ua.generateKeys();
  const auth = crypto.randomBytes(16);
  const received = [];
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on("data", (c) => chunks.push(c));
    request.on("end", () => {
      try {
        check(request.method === "POST", `a push is a POST: ${request.method}`);
        check(request.headers["content-encoding"] === "aes128gcm", "the body is aes128gcm");
        check(Number(request.headers.ttl) > 0, `a TTL: ${request.headers.ttl}`);
        checkVapid(request.headers.authorization, origin, vapidKey);
        received.push(decrypt(ua, auth, Buffer.concat(chunks)));
        response.writeHead(201).end();
      } catch (e) {
        received.push(e);
        response.writeHead(400).end(String(e.message));
      }
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  return {
    endpoint: `${origin}/push/alice-1`,
    keys: { p256dh: b64u(ua.getPublicKey()), auth: b64u(auth) },
    received,
    close: () => server.close(),
  };
}

// ---- the test ---------------------------------------------------------------------------------

/** The worker of `context`, once /sw.js runs there (asked each time: an idle worker is stopped and a push starts it again). */
async function workerOf(context) {
  return (
    context.serviceWorkers().find((w) => w.url().endsWith("/sw.js")) ??
    (await context.waitForEvent("serviceworker", { predicate: (w) => w.url().endsWith("/sw.js") }))
  );
}

/**
 * Waits until the worker of `context` has handled the push of `messageId` (sw.js
 * `handledPushes`); whether it showed a notification. Reading the notifications before then
 * would race the one being shown, and Chromium deletes a notification read that way.
 */
const handled = (context, messageId) =>
  until(
    async () =>
      (await (await workerOf(context)).evaluate((id) => handledPushes.find((p) => p.messageId === id), messageId)) ?? null,
    `the worker to handle the push of ${messageId}`,
  );

const notificationsOf = async (context) =>
  (await workerOf(context)).evaluate(async () =>
    (await self.registration.getNotifications()).map((n) => ({ title: n.title, body: n.body, tag: n.tag, data: n.data })),
  );


await run(async (browser) => {
  const bobToken = await devToken("bob", "Bob");
  const { publicKey: vapidKey } = await api(bobToken, "GET", "/api/push/vapidPublicKey");

  await step("the browser's own push service: the page says it cannot be reached, and stays off", async () => {
    // A context of its own: Chromium itself logs a console error when an off-the-record
    // profile (every Playwright context) subscribes; that one is expected, any other fails.
    const context = await browser.newContext();
    const page = await context.newPage();
    const errors = [];
    page.on("console", (m) => m.type() === "error" && !/Push API in incognito mode/.test(m.text()) && errors.push(m.text()));
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`${base}/`);
    await page.context().grantPermissions(["notifications"], { origin: base });
    await signIn(page, "carol", "Carol");
    const toggle = page.getByTestId("notifications-toggle");
    check((await toggle.textContent()) === "Enable notifications", "the button offers to enable");
    check(!(await page.evaluate(() => navigator.serviceWorker.getRegistration("/"))), "nothing is registered on load");
    await toggle.click();
    const state = await until(async () => {
      const s = await toggle.getAttribute("data-state");
      return s !== "off" && s !== "working" && s;
    }, "the enable to finish", 600);
    const status = await page.getByTestId("notifications-status").textContent();
    console.log(`the browser's own subscribe: ${state}: ${status}`);
    const scope = await page.evaluate(async () => (await navigator.serviceWorker.getRegistration("/"))?.scope);
    check(scope === `${base}/`, `the worker's scope is the page's: ${scope}`);
    const carolToken = await page.evaluate(() => sessionStorage.getItem("tabletalk.token"));
    const listed = await api(carolToken, "GET", "/api/push/subscriptions");
    if (state === "on") {
      check(listed.length === 1, `the subscription is on the server: ${JSON.stringify(listed)}`);
    } else {
      check(state === "push-unreachable", `subscribe failed for another reason: ${state}: ${status}`);
      check(/could not reach its push service/.test(status), `the page says why: ${status}`);
      check(await page.getByTestId("notifications-status").isVisible(), "what it says shows next to the button");
      await page.screenshot({ path: join(shots, "notifications-unreachable-desktop.png") });
      check(listed.length === 0, "no subscription reached the server");
      check((await toggle.textContent()) === "Enable notifications", "the button still offers to enable");
    }
    check(errors.length === 0, `console errors: ${errors.join("; ")}`);
    await context.close();
  });

  const pushService = await standInPushService(vapidKey);
  let roomId;
  const aliceToken = await devToken("alice", "Alice");

  await step("bob makes a room and alice is in it", async () => {
    roomId = (await api(bobToken, "POST", "/api/rooms", { name: "push-room" })).id;
    await api(bobToken, "POST", `/api/rooms/${roomId}/invites`, { userId: "alice" });
    await api(aliceToken, "POST", `/api/invites/${roomId}/accept`);
  });

  const page = await openPage(browser, "/", { label: "alice" });
  const context = page.context();
  await context.grantPermissions(["notifications"], { origin: base });
  // The browser's push service, stood in: subscribe answers with the stand-in's endpoint and keys.
  await context.addInitScript(({ endpoint, keys }) => {
    // The browser keeps a subscription across loads: here, this tab's sessionStorage does.
    const json = { endpoint, expirationTime: null, keys };
    const held = () => ({
      endpoint,
      expirationTime: null,
      toJSON: () => json,
      unsubscribe: async () => (sessionStorage.removeItem("standIn.subscribed"), true),
    });
    PushManager.prototype.subscribe = async function (options) {
      const key = new Uint8Array(options.applicationServerKey);
      globalThis.standInSubscribed = { userVisibleOnly: options.userVisibleOnly, key: btoa(String.fromCharCode(...key)) };
      sessionStorage.setItem("standIn.subscribed", "1");
      return held();
    };
    PushManager.prototype.getSubscription = async function () {
      return sessionStorage.getItem("standIn.subscribed") ? held() : null;
    };
  }, { endpoint: pushService.endpoint, keys: pushService.keys });
  await page.reload();
  await signIn(page, "alice", "Alice");

  await step("enable notifications: the worker registers and the subscription reaches the server", async () => {
    await page.getByTestId("notifications-toggle").click();
    await page.locator("[data-testid=notifications-toggle][data-state=on]").waitFor();
    const asked = await page.evaluate(() => globalThis.standInSubscribed);
    check(asked.userVisibleOnly === true, "subscribed with userVisibleOnly");
    check(
      Buffer.from(asked.key, "base64").equals(fromB64u(vapidKey)),
      "subscribed with the server's VAPID key as applicationServerKey",
    );
    const listed = await api(aliceToken, "GET", "/api/push/subscriptions");
    check(listed.length === 1 && listed[0].endpoint === pushService.endpoint, `listed: ${JSON.stringify(listed)}`);
    check(listed[0].keys.p256dh === pushService.keys.p256dh && listed[0].keys.auth === pushService.keys.auth, "with its keys");
    await workerOf(context);
    await page.waitForFunction(() => navigator.serviceWorker.controller?.scriptURL.endsWith("/sw.js"));
  });

  const cdp = await context.newCDPSession(page);
  const registrations = new Map();
  cdp.on("ServiceWorker.workerRegistrationUpdated", ({ registrations: list }) => {
    for (const r of list) if (!r.isDeleted) registrations.set(r.scopeURL, r.registrationId);
  });
  await cdp.send("ServiceWorker.enable");
  const registrationId = await until(() => registrations.get(`${base}/`), "the registration's id");
  const deliver = (data) => cdp.send("ServiceWorker.deliverPushMessage", { origin: base, registrationId, data });

  await step("a push while a window of the app is visible shows no notification", async () => {
    const payload = { roomId: "visible-room", messageId: "1", senderName: "Bob", preview: "seen live", mentioned: false };
    await deliver(JSON.stringify(payload));
    check((await handled(context, payload.messageId)).shown === false, "the worker sees a visible window and shows nothing");
  });

  let payload;
  await step("bob's message, with no window of alice's open, is pushed through the stand-in", async () => {
    await page.goto("about:blank");
    await until(async () => (await api(aliceToken, "GET", "/api/me/status")).state === "away", "alice to be offline");
    await api(bobToken, "POST", `/api/rooms/${roomId}/messages`, { text: "are you there, alice?" });
    const plaintext = await until(() => pushService.received[0], "the server's push");
    check(!(plaintext instanceof Error), `the push is a valid Web Push request: ${plaintext?.message}`);
    payload = JSON.parse(plaintext);
    check(payload.roomId === roomId && payload.senderName === "Bob", `the payload: ${plaintext}`);
    check(payload.preview.includes("are you there"), `the payload previews the message: ${plaintext}`);
  });

  await step("the push dispatched to the worker shows the notification", async () => {
    const windows = () => self.clients.matchAll({ type: "window", includeUncontrolled: true });
    check((await (await workerOf(context)).evaluate(windows)).length === 0, "no window is open");
    await deliver(JSON.stringify(payload));
    check((await handled(context, payload.messageId)).shown === true, "the worker shows a notification");
    const shown = await notificationsOf(context);
    check(shown.length === 1, `one notification (none for the visible push): ${JSON.stringify(shown)}`);
    const [n] = shown;
    check(n.title === "New message from Bob", `its title: ${n.title}`);
    check(n.body.includes("are you there"), `its body: ${n.body}`);
    check(n.tag === `room-${roomId}` && n.data.roomId === roomId, `it names the room: ${JSON.stringify(n)}`);
  });

  await step("a click on the notification brings the room up in alice's window", async () => {
    await page.goto(`${base}/`);
    await page.locator("html[data-ready=true]").waitFor();
    check((await page.getByTestId("room-title").textContent()) === "No room open", "no room is open yet");
    await page.waitForFunction(() => navigator.serviceWorker.controller !== null);
    await (await workerOf(context)).evaluate(async () => {
      const [n] = await self.registration.getNotifications();
      await onNotificationClick(n);
    });
    await page.getByTestId("room-title").filter({ hasText: "push-room" }).waitFor();
    check(page.url().endsWith(`#/rooms/${roomId}`), `the address names the room: ${page.url()}`);
    check((await notificationsOf(context)).length === 0, "the clicked notification is gone");
  });

  await step("a subscription the push service replaces is renewed in the worker and reaches the server", async () => {
    // The worker's push manager, stood in as the page's is: a fresh subscription on another
    // endpoint of the stand-in, made with the options the old one had.
    const renewed = `${pushService.endpoint}-renewed`;
    const worker = await workerOf(context);
    await worker.evaluate(
      async ({ endpoint, keys, oldEndpoint }) => {
        const old = { endpoint: oldEndpoint, options: { userVisibleOnly: true, applicationServerKey: new Uint8Array([4, 1, 2]) } };
        PushManager.prototype.subscribe = async function (options) {
          globalThis.renewedWith = [...new Uint8Array(options.applicationServerKey)];
          return { endpoint, toJSON: () => ({ endpoint, expirationTime: null, keys }) };
        };
        // The event's handler, called as the browser calls it (as the click test does).
        await renewSubscription(old, null);
      },
      { endpoint: renewed, keys: pushService.keys, oldEndpoint: pushService.endpoint },
    );
    await until(
      async () => (await api(aliceToken, "GET", "/api/push/subscriptions")).some((s) => s.endpoint === renewed),
      "the renewed subscription on the server",
    );
    const options = await worker.evaluate(() => globalThis.renewedWith);
    check(JSON.stringify(options) === "[4,1,2]", `subscribed again with the old options: ${JSON.stringify(options)}`);
    await api(aliceToken, "DELETE", "/api/push/subscriptions", { endpoint: renewed });
  });

  await step("turning notifications off takes the subscription off the server", async () => {
    const toggle = page.getByTestId("notifications-toggle");
    // This load found the subscription: the button offers to turn them off.
    check((await toggle.textContent()) === "Turn off notifications", `the button: ${await toggle.textContent()}`);
    await toggle.click();
    await page.locator("[data-testid=notifications-toggle][data-state=off]").waitFor();
    check((await api(aliceToken, "GET", "/api/push/subscriptions")).length === 0, "no subscription is left");
  });

  pushService.close();
});
