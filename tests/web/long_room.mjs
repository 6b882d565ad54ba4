// A room of 10,000 messages. Opening it shows the newest; scrolling back loads older pages
// as the top comes into view, each message shown once and in order, with never more than a
// window of messages in the DOM (the rest are spacers). A permalink opens at its message
// (readMessages?around=) and reads on to newer pages at the bottom. A reader with unread
// messages is offered "Jump to first unread", which brings the first one into view. The
// room is found and joined through the directory.
import { base, check, openPage, run, signIn, step, user } from "./harness.mjs";

const N = 10000;
const SCROLLED = 600;
const MAX_IN_DOM = 200;

async function api(token, method, path, body) {
  const response = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  return response.status === 204 ? null : response.json();
}
async function devToken(userId) {
  const r = await fetch(`${base}/api/dev/signin`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ userId }),
  });
  return (await r.json()).token;
}
/** Posts texts[i] in order of i (16 at a time, so ids are not strictly in i order: the test reads the page's order). */
async function post(token, roomId, texts) {
  let next = 0;
  const ids = new Array(texts.length);
  const worker = async () => {
    while (next < texts.length) {
      const i = next++;
      ids[i] = (await api(token, "POST", `/api/rooms/${roomId}/messages`, { text: `<p>${texts[i]}</p>` })).id;
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  return ids;
}

/** What a stalled scroll-back leaves to go on: the window, the loaded run, the scroll, the status line. */
const stateOf = (page) =>
  page.evaluate(() => {
    const { store, timeline } = globalThis.tabletalk;
    const t = store.timeline(timeline.roomId);
    const el = document.getElementById("timeline");
    const list = document.getElementById("messages");
    return {
      window: { first: list.dataset.first, total: list.dataset.total },
      run: { loaded: t.loaded, held: t.order.length, hasOlder: t.hasOlder, olderCursor: t.olderCursor },
      scroll: { top: el.scrollTop, height: el.scrollHeight, client: el.clientHeight },
      busy: list.getAttribute("aria-busy"),
      loading: timeline.loading,
      lastLoadError: timeline.lastLoadError,
      visibility: document.visibilityState,
      status: document.getElementById("connection-status").textContent,
    };
  });

/** What the page has in the DOM: message ids in order, and how many there are. */
const shown = (page) =>
  page.$$eval("[data-testid=message]:not([data-pending])", (els) => els.map((e) => e.dataset.messageId));

await run(async (browser) => {
  const alice = await devToken("alice");
  const bob = await devToken("bob");
  const room = await api(alice, "POST", "/api/rooms", { name: "archive", visibility: "public" });
  let ids;
  await step(`seed ${N} messages`, async () => {
    ids = await post(alice, room.id, Array.from({ length: N }, (_, i) => `message #${i}`));
  });

  let bobPage;
  const page = await openPage(browser, `/`, { label: "alice" });
  await signIn(page, "alice", "Alice");

  await step("the room opens at its newest messages with a window of them in the DOM", async () => {
    await page.goto(`${base}/#/rooms/${room.id}`);
    await page.locator(`[data-testid=room-title]`).filter({ hasText: "archive" }).waitFor();
    await page.locator(`[data-message-id]`).first().waitFor();
    const inDom = await shown(page);
    check(inDom.length > 0 && inDom.length <= MAX_IN_DOM, `${inDom.length} messages in the DOM`);
    const newest = await page.locator("[data-testid=message]").last().textContent();
    check(/message #\d+/.test(newest), `the newest is shown: ${newest}`);
  });

  await step(`scrolling back through ${SCROLLED} messages shows each once, in order, windowed`, async () => {
    await page.evaluate(() => {
      globalThis.__longest = 0;
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) globalThis.__longest = Math.max(globalThis.__longest, e.duration);
      }).observe({ type: "longtask", buffered: false });
    });
    const seen = new Set();
    let previous = null;
    let maxInDom = 0;
    for (let rounds = 0; seen.size < SCROLLED && rounds < 200; rounds++) {
      const inDom = await shown(page);
      maxInDom = Math.max(maxInDom, inDom.length);
      check(new Set(inDom).size === inDom.length, "no message is in the DOM twice");
      for (let i = 1; i < inDom.length; i++) check(inDom[i - 1] > inDom[i], "the DOM is oldest first");
      inDom.forEach((id) => seen.add(id));
      previous = inDom[0];
      // Scroll to the top: the top edge comes into view and the window moves up (or a page
      // loads). Polled on a timer, not per frame, so a page that draws no frames still counts.
      await page.$eval("#timeline", (el) => (el.scrollTop = 0));
      const moved = (first) => document.querySelector("[data-testid=message]")?.dataset.messageId !== first;
      try {
        await page.waitForFunction(moved, previous, { timeout: 60000, polling: 100 });
      } catch (e) {
        throw new Error(`scroll-back stalled after ${seen.size} messages: ${JSON.stringify(await stateOf(page))}`, { cause: e });
      }
    }
    check(seen.size >= SCROLLED, `saw ${seen.size} messages`);
    check(maxInDom <= MAX_IN_DOM, `at most ${maxInDom} messages were in the DOM at once`);
    // Every message between the newest and the oldest seen was seen: nothing skipped.
    const sorted = [...ids].sort().reverse(); // oldest first
    const oldestSeen = [...seen].sort()[seen.size - 1];
    const expected = sorted.slice(sorted.indexOf(oldestSeen));
    const missing = expected.filter((id) => !seen.has(id));
    check(missing.length === 0, `${missing.length} messages were skipped`);
    const longest = await page.evaluate(() => globalThis.__longest);
    console.log(`scrolled back through ${seen.size} messages, at most ${maxInDom} in the DOM at once; longest main-thread task ${Math.round(longest)} ms`);
  });

  await step("a permalink opens at its message, and newer pages load at the bottom", async () => {
    const target = ids[1234];
    await page.goto(`${base}/#/rooms/${room.id}/messages/${target}`);
    const el = page.locator(`[data-message-id="${target}"][data-permalink]`);
    await el.waitFor();
    check((await el.textContent()).includes("message #1234"), "the right message");
    const box = await el.boundingBox();
    const viewport = page.viewportSize();
    check(box && box.y >= 0 && box.y + box.height <= viewport.height, `it is in view: ${JSON.stringify(box)}`);
    const firstBefore = await shown(page);
    for (let i = 0; i < 4; i++) {
      await page.$eval("#timeline", (el) => (el.scrollTop = el.scrollHeight));
      await page.waitForTimeout(150);
    }
    const after = await shown(page);
    check(after[after.length - 1] < firstBefore[firstBefore.length - 1], "newer messages came in at the bottom");
  });

  await step("on a screen taller than a page, a room opens at its newest, loads older pages unscrolled and scrolls back to its first", async () => {
    // At first nothing scrolls here, so no scroll event and no edge crossing the observer's
    // margin: the page has to see for itself that the top is in view and more lies above it.
    // Both edges are near at once, so neither may cut the window at the other (they undid
    // each other in a loop that froze the page, or cut the newest messages off).
    const N_TALL = 200;
    const tallRoom = await api(alice, "POST", "/api/rooms", { name: "tall", visibility: "public" });
    await post(alice, tallRoom.id, Array.from({ length: N_TALL }, (_, i) => `tall #${i}`));
    const tall = await user(browser, "alice", { label: "alice-tall", name: "Alice", viewport: { width: 1280, height: 9000 } });
    await tall.goto(`${base}/#/rooms/${tallRoom.id}`);
    const newest = tall.locator("[data-testid=message]").filter({ hasText: new RegExp(`tall #${N_TALL - 1}\\b`) });
    await newest.waitFor({ timeout: 15000 });
    await tall.waitForFunction((n) => document.querySelectorAll("[data-testid=message]").length > n, 50, { timeout: 15000, polling: 100 });
    const answered = await Promise.race([tall.evaluate(() => true), new Promise((r) => setTimeout(() => r(false), 5000))]);
    check(answered, "the page answers (no loop of window moves holds it)");
    const box = await newest.boundingBox();
    check(box && box.y >= 0 && box.y + box.height <= 9000, `the newest message is in view: ${JSON.stringify(box)}`);
    const inDom = await shown(tall);
    check(inDom[inDom.length - 1] === [...inDom].sort()[0], "the newest message is the last in the DOM");
    const oldest = tall.locator("[data-testid=message]").filter({ hasText: /tall #0\b/ });
    for (let i = 0; i < 20 && !(await oldest.count()); i++) {
      await tall.$eval("#timeline", (el) => (el.scrollTop = 0));
      await tall.waitForTimeout(200);
    }
    check((await oldest.count()) === 1, "scrolled back to the room's first message");
    await tall.context().close();
  });

  await step("coming back to a room while its first page is slow leaves no hole in what it holds", async () => {
    // Reopening empties the list, which scrolls it: a page of the copy held from before,
    // asked for then, used to land in the fresh copy and cut a hole in it.
    await page.goto(`${base}/#/rooms/${room.id}`);
    await page.locator(`[data-message-id="${[...ids].sort()[0]}"]`).waitFor();
    const first = await page.$eval("[data-testid=message]", (el) => el.dataset.messageId);
    await page.$eval("#timeline", (el) => (el.scrollTop = 0));
    await page.waitForFunction((f) => document.querySelector("[data-testid=message]")?.dataset.messageId !== f, first, { timeout: 60000, polling: 100 });
    // Another room, short enough to need no spacers: leaving it empties the list, and the
    // emptied list scrolls to its top.
    const other = await api(alice, "POST", "/api/rooms", { name: "other", visibility: "public" });
    await post(alice, other.id, Array.from({ length: 60 }, (_, i) => `other #${i}`));
    await page.goto(`${base}/#/rooms/${other.id}`);
    await page.locator("[data-testid=message]").filter({ hasText: /other #59\b/ }).waitFor();
    await page.route(`**/api/rooms/${room.id}/messages?*`, async (route) => {
      await new Promise((r) => setTimeout(r, 300));
      await route.continue();
    });
    await page.goto(`${base}/#/rooms/${room.id}`);
    await page.getByTestId("room-title").filter({ hasText: "archive" }).waitFor();
    await page.waitForTimeout(1500);
    await page.unroute(`**/api/rooms/${room.id}/messages?*`);
    const held = await page.evaluate((id) => globalThis.tabletalk.store.timeline(id).order, room.id);
    const sorted = [...ids].sort().reverse(); // oldest first
    const at = sorted.indexOf(held[0]);
    const gaps = held.filter((id, i) => sorted[at + i] !== id).length;
    check(at >= 0 && gaps === 0, `the held run is a contiguous stretch of the room (${gaps} of ${held.length} out of place)`);
    check(held[held.length - 1] === sorted[sorted.length - 1], "and it reaches the newest message");
  });

  await step("bob finds the public room in the directory and joins it", async () => {
    bobPage = await openPage(browser, "/", { label: "bob" });
    await signIn(bobPage, "bob", "Bob");
    await bobPage.getByTestId("join-room").click();
    await bobPage.getByTestId("directory-search").fill("arch");
    // Clicked once the list is the search's: the dialog first lists every public room, and a
    // click while the search's list replaces it can land on another room's button.
    await bobPage.waitForFunction(
      (id) => {
        const joins = [...document.querySelectorAll("[data-testid=directory-join]")];
        return joins.length === 1 && joins[0].dataset.roomId === id;
      },
      room.id,
    );
    await bobPage.locator(`[data-testid=directory-join][data-room-id="${room.id}"]`).click();
    await bobPage.getByTestId("room-title").filter({ hasText: "archive" }).waitFor();
    await bobPage.locator("[data-message-id]").first().waitFor();
  });

  await step("bob, away from the room, gets unread messages and jumps to the first of them", async () => {
    await bobPage.goto(`${base}/`);
    await bobPage.locator("html[data-ready=true]").waitFor();
    await bobPage.locator("[data-testid=connection-status][data-state=connected]").waitFor({ state: "attached" });
    const later = await post(alice, room.id, Array.from({ length: 150 }, (_, i) => `later #${i}`));
    const firstUnread = [...later].sort().reverse()[0];
    const link = bobPage.locator(`[data-testid=room-link][data-room-id="${room.id}"]`);
    // A notice comes once until bob looks (tiered delivery), with the counts of its moment.
    await link.getByTestId("unread-badge").waitFor();
    await link.click();
    await bobPage.getByTestId("jump-unread").click();
    const el = bobPage.locator(`[data-message-id="${firstUnread}"][data-first-unread]`);
    await el.waitFor();
    const box = await el.boundingBox();
    check(box && box.y >= 0 && box.y < bobPage.viewportSize().height, `the first unread is in view: ${JSON.stringify(box)}`);
    await bobPage.getByTestId("jump-unread").waitFor({ state: "hidden" });
  });
});
