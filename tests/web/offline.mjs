// One person goes offline (docs/CATCHUP.md). Alice and Bob share a
// room of 40 messages; Bob scrolls up, and goes offline: his context is set offline AND his
// live WebSocket is cut. (Playwright's `setOffline` fails new requests, but an open WebSocket
// stays open: no close, no `disconnected`, its frames held back — a probe showed it. So the
// test routes Bob's WebSockets through `routeWebSocket`, closes them on both sides, and
// refuses new ones until he is back.) "Reconnecting…" shows; offline, Bob sends a message
// and starts a draft. Meanwhile Alice edits, deletes, reacts and sends 30 messages.
// Back online — no reload — Bob's page shows exactly the room's current state as the API
// answers it (every message's text, edited and deleted state, reactions; no pending entry
// left), his offline send is stored exactly once although its first answer was lost (the
// network comes back before the live connection; the request reached the server, its answer
// was dropped, and the outbox sent it again with the same clientId), and his scroll position,
// draft and focus are as he left them. With the network up, a live connection that drops
// alone (its WebSocket cut) catches up too once it is back: a new connection, and an edit and
// a reaction made meanwhile appear.
//
// Then the history cache (IndexedDB): a reload shows the cached history while the room's read
// is held back, before the network answers; the cache equals the room; a cursor ahead of the
// room's counter comes back RESET and the cache drops its stale copy and syncs afresh; and
// after Alice removes Bob, the feed answers NO_ACCESS: the copy is dropped and the room leaves
// his sidebar. Signing out deletes his cache from the device.
import { acceptInvitation, check, createRoomAndInvite, losesNetworkOnPurpose, run, step, user } from "./harness.mjs";

const message = (page, text) => page.locator("[data-testid=message]:not([data-pending])").filter({ hasText: text });

/** Sends `text` through the composer and waits until it is stored (no longer pending). */
async function send(page, text) {
  const input = page.getByTestId("composer-input");
  await input.fill(text);
  await input.press("Enter");
}

async function waitStored(page) {
  await page.waitForFunction(() => !document.querySelector("#messages [data-pending]"), null, { timeout: 30000 });
}

/** The room as the API answers it now: every message, oldest first, in the shape compared. */
function apiState(page, roomId) {
  return page.evaluate(async (roomId) => {
    const all = [];
    let cursor;
    for (;;) {
      const p = await tabletalk.api.readMessages(roomId, { cursor, limit: 100 });
      all.push(...p.messages);
      if (!p.hasMore) break;
      cursor = p.nextCursor;
    }
    const plain = (html) => new DOMParser().parseFromString(html, "text/html").body.textContent;
    return all
      .map((m) => ({
        id: m.id,
        deleted: Boolean(m.deletedAt),
        edited: Boolean(m.editedAt) && !m.deletedAt,
        text: m.deletedAt ? "" : ["Message", "Webhook"].includes(m.type) ? plain(m.text) : m.text,
        reactions: m.deletedAt ? [] : (m.reactions ?? []).map((r) => `${r.emoji} ${r.count}`),
      }))
      .sort((a, b) => (a.id > b.id ? -1 : 1));
  }, roomId);
}

/** What the page shows: every drawn message, oldest first, and the pending entries. */
function domState(page) {
  return page.evaluate(() => {
    const shown = [...document.querySelectorAll("#messages [data-testid=message]")];
    return {
      pending: shown.filter((el) => el.dataset.pending).map((el) => el.textContent),
      messages: shown
        .filter((el) => !el.dataset.pending)
        .map((el) => ({
          id: el.dataset.messageId,
          deleted: el.dataset.deleted === "true",
          edited: Boolean(el.querySelector("[data-testid=edited]")),
          text: el.dataset.deleted === "true" ? "" : el.querySelector("[data-testid=message-text]").textContent,
          reactions: [...el.querySelectorAll("[data-testid=reaction]")].map((r) => r.textContent),
        })),
    };
  });
}

/**
 * Waits until the page shows exactly what the API answers; fails with the difference. Reads
 * never return tombstones, while a page that saw a delete (live or through the change feed)
 * shows its message as deleted: a deleted message on the page must be one the API no longer
 * lists, and every other must equal the API's.
 */
async function showsExactly(page, reader, roomId, { whole = true, timeout = 30000 } = {}) {
  const until = Date.now() + timeout;
  let last;
  for (;;) {
    let [want, got] = [await apiState(reader, roomId), await domState(page)];
    // Not the whole room: the page shows its newest messages, down to its first one drawn.
    const first = got.messages.find((m) => !m.deleted)?.id;
    if (!whole && first) want = want.filter((m) => m.id <= first);
    const listed = new Set(want.map((m) => m.id));
    const live = got.messages.filter((m) => !m.deleted);
    const deleted = got.messages.filter((m) => m.deleted);
    const same =
      got.pending.length === 0 && JSON.stringify(want) === JSON.stringify(live) && deleted.every((m) => !listed.has(m.id));
    if (same) return { want, deleted };
    last = { want, got };
    if (Date.now() > until) break;
    await page.waitForTimeout(250);
  }
  const wantIds = new Map(last.want.map((m) => [m.id, m]));
  const gotIds = new Map(last.got.messages.map((m) => [m.id, m]));
  const diff = [
    ...last.want.filter((m) => JSON.stringify(m) !== JSON.stringify(gotIds.get(m.id))).map((m) => ({ api: m, page: gotIds.get(m.id) })),
    ...last.got.messages.filter((m) => !wantIds.has(m.id) && !m.deleted).map((m) => ({ api: null, page: m })),
  ];
  throw new Error(`the page does not show the room's state: pending ${JSON.stringify(last.got.pending)}; ${JSON.stringify(diff.slice(0, 8), null, 1)}`);
}

/** The cache's copy of a room: [{id, version, deleted}] oldest first. */
function cachedCopy(page, roomId) {
  return page.evaluate(async (roomId) => (await tabletalk.history.messages(roomId)).map((m) => ({ id: m.id, version: m.version, deleted: Boolean(m.deletedAt) })), roomId);
}

await run(async (browser) => {
  const alice = await user(browser, "alice", { name: "Alice" });
  // Bob's WebSockets go through the test, so it can cut them as a dropped network would.
  let bobOffline = false;
  const sockets = new Set();
  const bobContext = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await bobContext.routeWebSocket(/.*/, (ws) => {
    if (bobOffline) return ws.close({ code: 1001, reason: "offline" });
    const server = ws.connectToServer();
    const pair = { ws, server };
    sockets.add(pair);
    // With these handlers set, a close is no longer passed on by itself: pass it on.
    ws.onClose((code, reason) => {
      sockets.delete(pair);
      server.close({ code, reason });
    });
    server.onClose((code, reason) => {
      sockets.delete(pair);
      ws.close({ code, reason });
    });
  });
  losesNetworkOnPurpose("bob");
  const bob = await user(browser, "bob", { name: "Bob", context: bobContext });
  let roomId;

  await step("alice makes a room of 40 messages with bob in it", async () => {
    roomId = await createRoomAndInvite(alice, "offline", "bob");
    await acceptInvitation(bob, "offline");
    for (let i = 1; i <= 40; i++) await send(alice, `seed ${i}`);
    await waitStored(alice);
    await message(bob, "seed 40").waitFor();
    await showsExactly(bob, alice, roomId);
  });

  let anchor;
  await step("bob scrolls up, goes offline: Reconnecting… shows; he sends a message and starts a draft", async () => {
    await bob.evaluate(() => {
      const scroller = document.getElementById("timeline");
      scroller.scrollTop = Math.max(0, scroller.scrollHeight - scroller.clientHeight - 700);
    });
    // Let the timeline react to the scroll (it unsticks from the bottom).
    await bob.waitForFunction(() => {
      const s = document.getElementById("timeline");
      return s.scrollHeight - s.scrollTop - s.clientHeight > 600;
    });
    await bobContext.setOffline(true);
    bobOffline = true;
    for (const { ws, server } of [...sockets]) {
      sockets.clear();
      await ws.close({ code: 1001, reason: "offline" });
      await server.close({ code: 1001, reason: "offline" });
    }
    await bob.locator("[data-testid=connection-status][data-state=reconnecting]").filter({ hasText: "Reconnecting…" }).waitFor();
    const input = bob.getByTestId("composer-input");
    await input.focus();
    await input.fill("sent while offline");
    await input.press("Enter");
    await bob.locator("[data-pending=true]").filter({ hasText: "sent while offline" }).waitFor();
    await input.pressSequentially("a draft kept");
    anchor = await bob.evaluate(() => {
      const scroller = document.getElementById("timeline");
      const top = scroller.getBoundingClientRect().top;
      const el = [...document.querySelectorAll("#messages [data-message-id]")].find((e) => e.getBoundingClientRect().bottom > top + 1);
      return { id: el.dataset.messageId, offset: el.getBoundingClientRect().top - top };
    });
    check(await input.evaluate((el) => el === document.activeElement), "the focus is in the box");
  });

  await step("meanwhile alice edits, deletes, reacts and sends 30 messages", async () => {
    // Each action is dispatched on its button, without moving a pointer over the message.
    const edited = message(alice, "seed 38");
    await edited.getByTestId("action-edit").dispatchEvent("click");
    await alice.getByTestId("composer-input").fill("seed 38, edited offline");
    await alice.getByTestId("composer-input").press("Enter");
    await message(alice, "seed 38, edited offline").getByTestId("edited").waitFor();
    alice.once("dialog", (d) => d.accept());
    const deleted = message(alice, "seed 39");
    await deleted.getByTestId("action-delete").dispatchEvent("click");
    await message(alice, "seed 39").waitFor({ state: "detached" });
    const reacted = message(alice, "seed 37");
    await reacted.getByTestId("action-react-👍").dispatchEvent("click");
    await reacted.getByTestId("reaction").filter({ hasText: "👍 1" }).waitFor();
    for (let i = 1; i <= 30; i++) await send(alice, `burst ${i}`);
    await waitStored(alice);
    await message(alice, "burst 30").waitFor();
    const bobState = await domState(bob);
    check(!bobState.messages.some((m) => m.text.startsWith("burst")), "bob, offline, has not heard of the burst");
  });

  const posts = [];
  await step("back online, without a reload, bob shows exactly the room's current state", async () => {
    // The first send after the network returns reaches the server, and its answer is lost.
    // Until the page sends it again, the network stays slow for reads (the room's messages and
    // the change feed wait), so the send's own answer is all the page can learn of it from.
    let retried;
    const again = new Promise((resolve) => (retried = resolve));
    await bob.route("**/api/rooms/*/messages", async (route) => {
      const request = route.request();
      if (request.method() !== "POST") return route.fallback();
      posts.push(request.postDataJSON());
      if (posts.length === 1) {
        await route.fetch();
        return route.abort("connectionreset");
      }
      retried();
      return route.fallback();
    });
    const slowReads = async (route) => {
      await again;
      return route.fallback();
    };
    await bob.route("**/api/rooms/*/messages?**", slowReads);
    await bob.route("**/api/messageChanges", slowReads);
    // The live connection stays away meanwhile: its WebSockets are still refused.
    await bobContext.setOffline(false);
    await bob.waitForFunction(() => !document.querySelector("#messages [data-pending]"), null, { timeout: 30000 });
    check(posts.length >= 2, `the send was sent again after its answer was lost (${posts.length} attempts)`);
    await bob.unroute("**/api/rooms/*/messages?**", slowReads);
    await bob.unroute("**/api/messageChanges", slowReads);
    bobOffline = false;
    await bob.locator("[data-testid=connection-status][data-state=connected]").waitFor({ state: "attached", timeout: 30000 });
    const { want, deleted } = await showsExactly(bob, alice, roomId);
    check(deleted.length === 1, `the one message deleted meanwhile shows as deleted (${deleted.length})`);
    check(want.filter((m) => m.text.startsWith("burst ")).length === 30, "the 30 messages are there");
    check(want.some((m) => m.text === "seed 38, edited offline" && m.edited), "the edit is there");
    check(want.some((m) => m.text === "seed 37" && m.reactions.join() === "👍 1"), "the reaction is there");
  });

  await step("bob's offline send is stored once, sent again with the same clientId after its answer was lost", async () => {
    const state = await apiState(alice, roomId);
    const copies = state.filter((m) => m.text === "sent while offline");
    check(copies.length === 1, `the API holds ${copies.length} copies of the offline send`);
    check((await message(bob, "sent while offline").count()) === 1, "bob's page shows it once");
    check((await message(alice, "sent while offline").count()) === 1, "alice's page shows it once");
    check(new Set(posts.map((p) => p.clientId)).size === 1, `every attempt carries one clientId: ${JSON.stringify(posts)}`);
  });

  await step("bob's scroll position, draft and focus are as he left them", async () => {
    const input = bob.getByTestId("composer-input");
    check((await input.inputValue()) === "a draft kept", `the draft: ${await input.inputValue()}`);
    check(await input.evaluate((el) => el === document.activeElement), "the focus is still in the box");
    const now = await bob.evaluate((id) => {
      const scroller = document.getElementById("timeline");
      const el = document.querySelector(`#messages [data-message-id="${id}"]`);
      return el && el.getBoundingClientRect().top - scroller.getBoundingClientRect().top;
    }, anchor.id);
    check(now !== null && Math.abs(now - anchor.offset) <= 2, `the first message on screen stayed put: ${anchor.offset} then ${now}`);
  });

  await step("with the network up, a dropped live connection catches up when it is back", async () => {
    // A catch-up still running from the last reconnect would read the edit below over HTTP.
    await bob.evaluate(() => tabletalk.catchUp.settled());
    const before = await bob.evaluate(() => tabletalk.live.connectionId);
    check(before, "bob is connected");
    // Only the WebSocket goes: the browser stays online (no `online` event to catch up on).
    bobOffline = true;
    for (const { ws, server } of [...sockets]) {
      sockets.clear();
      await ws.close({ code: 1001, reason: "dropped" });
      await server.close({ code: 1001, reason: "dropped" });
    }
    // Each action is dispatched on its button, without moving a pointer over the message.
    const edited = message(alice, "burst 30");
    await edited.getByTestId("action-edit").dispatchEvent("click");
    await alice.getByTestId("composer-input").fill("burst 30, edited while bob's connection was down");
    await alice.getByTestId("composer-input").press("Enter");
    await message(alice, "burst 30, edited while bob's connection was down").getByTestId("edited").waitFor();
    const reacted = message(alice, "burst 29");
    await reacted.getByTestId("action-react-👍").dispatchEvent("click");
    await reacted.getByTestId("reaction").filter({ hasText: "👍 1" }).waitFor();
    check((await message(bob, "edited while bob's connection was down").count()) === 0, "bob has not heard of the edit");
    bobOffline = false;
    await bob.waitForFunction((before) => tabletalk.live.connectionId && tabletalk.live.connectionId !== before, before, { timeout: 60000 });
    await showsExactly(bob, alice, roomId);
    check((await message(bob, "edited while bob's connection was down").count()) === 1, "the edit is there");
  });

  await step("the history cache holds the room at its versions, as the API does", async () => {
    await bob.evaluate(() => tabletalk.catchUp.settled());
    const state = await apiState(alice, roomId);
    const versions = await alice.evaluate(async (roomId) => {
      const out = [];
      let cursor;
      for (;;) {
        const p = await tabletalk.api.readMessages(roomId, { cursor, limit: 100 });
        out.push(...p.messages.map((m) => ({ id: m.id, version: m.version, deleted: Boolean(m.deletedAt) })));
        if (!p.hasMore) break;
        cursor = p.nextCursor;
      }
      return out.sort((a, b) => (a.id > b.id ? -1 : 1));
    }, roomId);
    check(versions.length === state.length, "the API listing is complete");
    // Reads leave tombstones out; the cache keeps the feed's tombstone of the deleted one.
    const cached = await cachedCopy(bob, roomId);
    const live = cached.filter((m) => !m.deleted);
    const tombstones = cached.filter((m) => m.deleted);
    const listed = new Set(versions.map((m) => m.id));
    const differ = versions.filter((m, i) => JSON.stringify(m) !== JSON.stringify(live[i]));
    check(live.length === versions.length && !differ.length, `the cache equals the room (${live.length} of ${versions.length}): ${JSON.stringify(differ.slice(0, 3))}`);
    check(tombstones.length === 1 && !listed.has(tombstones[0].id), `the deleted message is cached as a tombstone: ${JSON.stringify(tombstones)}`);
  });

  await step("a reload shows the cached history before the network answers", async () => {
    let release;
    const released = new Promise((r) => (release = r));
    let held = 0;
    await bob.route("**/api/rooms/*/messages?**", async (route) => {
      if (route.request().method() !== "GET") return route.fallback();
      held++;
      await released;
      return route.fallback();
    });
    await bob.reload();
    await message(bob, "burst 30").waitFor();
    await message(bob, "seed 38, edited offline").getByTestId("edited").waitFor();
    check(held >= 1, "the room's read was held back while the cache was shown");
    release();
    await bob.locator("html[data-ready=true]").waitFor();
    // The first page read is the newest 50 (scroll-back reads the rest).
    const { want } = await showsExactly(bob, alice, roomId, { whole: false });
    check(want.length >= 40, `the newest messages are shown: ${want.length}`);
  });

  await step("a cursor ahead of the room's counter comes back RESET: the stale copy is dropped, the room synced afresh", async () => {
    await bob.evaluate(async (roomId) => {
      // As if the server had been restored from an older backup after this cursor was stored.
      await tabletalk.catchUp.settled();
      const db = await new Promise((resolve, reject) => {
        const r = indexedDB.open("tabletalk-history-bob");
        r.onsuccess = () => resolve(r.result);
        r.onerror = () => reject(r.error);
      });
      const tx = db.transaction(["messages", "rooms"], "readwrite");
      tx.objectStore("rooms").put({ roomId, cursor: "999999" });
      tx.objectStore("messages").put({ roomId, id: "0000000000000000001", text: "gone from the server", version: 999999, type: "Message" });
      await new Promise((resolve) => (tx.oncomplete = resolve));
      db.close();
    }, roomId);
    const resets = bob.evaluate(() => new Promise((resolve) => tabletalk.bus.on("history:reset", resolve)));
    await bob.evaluate((roomId) => tabletalk.catchUp.catchUp([roomId]), roomId);
    await resets;
    const cached = await cachedCopy(bob, roomId);
    check(!cached.some((m) => m.id === "0000000000000000001"), "the stale message is gone from the cache");
    const listed = (await apiState(alice, roomId)).map((m) => m.id).join();
    const live = cached.filter((m) => !m.deleted).map((m) => m.id).join();
    check(live === listed, "the cache holds the room afresh");
    check(cached.filter((m) => m.deleted).length === 1, "and the tombstone of the deleted one");
    const cursor = await bob.evaluate((roomId) => tabletalk.history.cursor(roomId), roomId);
    check(cursor && cursor !== "999999", `a new cursor is stored: ${cursor}`);
    await showsExactly(bob, alice, roomId, { whole: false });
  });

  await step("removed from the room, bob's catch-up gets NO_ACCESS: the copy is dropped and the room leaves his sidebar", async () => {
    // Bob looks at another room meanwhile (a page still showing a room it was just removed
    // from reads it and answers 404, which the browser logs as an error).
    const dm = await bob.evaluate(async () => (await tabletalk.api.openDirect("alice")).id);
    await bob.evaluate((id) => (location.hash = `#/rooms/${id}`), dm);
    await bob.getByTestId("room-title").filter({ hasText: "Alice" }).waitFor();
    await alice.evaluate((roomId) => tabletalk.api.request("POST", `/api/rooms/${roomId}/members/bob/kick`, {}), roomId);
    const gone = bob.evaluate(() => new Promise((resolve) => tabletalk.bus.on("history:no-access", resolve)));
    await bob.evaluate(() => tabletalk.catchUp.all());
    await gone;
    check((await cachedCopy(bob, roomId)).length === 0, "no message of the room is cached");
    const followed = await bob.evaluate(async () => (await tabletalk.history.rooms()).map((r) => r.roomId));
    check(!followed.includes(roomId), "the room is no longer synced");
    await bob.locator(`[data-testid=room-link][data-room-id="${roomId}"]`).waitFor({ state: "detached" });
  });

  await step("signing out deletes bob's history cache from the device", async () => {
    const before = await bob.evaluate(async () => (await indexedDB.databases()).map((d) => d.name));
    check(before.includes("tabletalk-history-bob"), `bob's cache is there before: ${before}`);
    await bob.getByTestId("signout").click();
    await bob.getByTestId("signin").waitFor();
    const names = await bob.evaluate(async () => (await indexedDB.databases()).map((d) => d.name));
    check(!names.includes("tabletalk-history-bob"), `no database of bob's is left: ${names}`);
  });
});
