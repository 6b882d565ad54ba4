// Search in the web client. Alice has a room of 300 messages, one of them about the zeppelin
// far back (older than the room's first page) and one with markup that must stay text. She
// opens search by its keyboard shortcut, types a word's beginning and sees the results
// labelled with their room and the matched words marked; a filter box narrows them without
// any syntax typed; "More results" goes on with the query asked; a click opens the room at
// the message. No page logs an error.
import { base, check, run, step, user } from "./harness.mjs";

async function api(token, method, path, body) {
  const response = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  return response.status === 204 ? null : response.json();
}

await run(async (browser) => {
  const page = await user(browser, "alice", { name: "Alice" });
  const token = await page.evaluate(() => sessionStorage.getItem("tabletalk.token"));
  let room;
  let target;

  await step("seed a room with a message far back", async () => {
    room = await api(token, "POST", "/api/rooms", { name: "hangar", visibility: "public" });
    target = (await api(token, "POST", `/api/rooms/${room.id}/messages`, { text: "<p>The Zeppelin lands at noon</p>" })).id;
    await api(token, "POST", `/api/rooms/${room.id}/messages`, {
      text: `<p>zeppelin &lt;img src=x onerror="window.__pwned=1"&gt; see <a href="https://example.com/z">the schedule</a></p>`,
    });
    for (let i = 0; i < 300; i++) await api(token, "POST", `/api/rooms/${room.id}/messages`, { text: `<p>filler ${i}</p>` });
    await page.goto(`${base}/#/rooms/${room.id}`);
    await page.getByTestId("room-title").filter({ hasText: "hangar" }).waitFor();
  });

  await step("the shortcut opens search; results show their room and the matched word marked", async () => {
    await page.locator("#timeline").click();
    await page.keyboard.press("Control+k");
    const input = page.getByTestId("search-input");
    check(await input.evaluate((el) => el === document.activeElement), "the shortcut focuses the search box");
    await input.fill("zeppel");
    await input.press("Enter");
    const results = page.getByTestId("search-result");
    await results.nth(1).waitFor();
    check((await results.count()) === 2, `two results, got ${await results.count()}`);
    const first = results.last();
    check((await first.getAttribute("data-message-id")) === target, "the older message is last (newest first)");
    check((await first.getByTestId("search-room").textContent()).includes("hangar"), "labelled with its room");
    const marks = await first.getByTestId("search-highlight").allTextContents();
    check(marks.length === 1 && marks[0] === "Zeppelin", `the matched word is marked: ${JSON.stringify(marks)}`);
    // Markup in a message is shown as text, never run.
    const hostile = results.first();
    check((await hostile.locator("img").count()) === 0, "no element came from a message's text");
    check((await hostile.getByTestId("search-text").textContent()).includes("<img src=x"), "shown as text");
    check(!(await page.evaluate(() => globalThis.__pwned)), "nothing ran");
  });

  await step("a filter narrows the results without typing its syntax", async () => {
    await page.getByTestId("search-filter-link").check();
    await page.waitForFunction(() => document.querySelector("[data-testid=search-results]")?.dataset.count === "1");
    const only = page.getByTestId("search-result");
    check((await only.getAttribute("data-message-id")) !== target, "only the message with a link");
    await page.getByTestId("search-filter-link").uncheck();
    await page.waitForFunction(() => document.querySelector("[data-testid=search-results]")?.dataset.count === "2");
  });

  await step("more results page on the query asked, whatever is typed since", async () => {
    const input = page.getByTestId("search-input");
    await input.fill("filler");
    await input.press("Enter");
    await page.waitForFunction(() => document.querySelector("[data-testid=search-results]")?.dataset.count === "20");
    await input.fill("zeppelin");
    await page.getByTestId("search-more").click();
    await page.waitForFunction(() => document.querySelector("[data-testid=search-results]")?.dataset.count === "40");
    const texts = await page.getByTestId("search-text").allTextContents();
    check(texts.every((t) => t.startsWith("filler")), "every result is one of the query asked");
    await input.fill("zeppel");
    await input.press("Enter");
    await page.waitForFunction(() => document.querySelector("[data-testid=search-results]")?.dataset.count === "2");
  });

  await step("a click opens the room at the message", async () => {
    await page.locator(`[data-testid=search-result][data-message-id="${target}"] a`).click();
    const el = page.locator(`[data-testid=message][data-message-id="${target}"]`);
    await el.waitFor();
    check(page.url().includes(`/messages/${target}`), `the address names the message: ${page.url()}`);
    check((await el.textContent()).includes("The Zeppelin lands at noon"), "the right message");
    const box = await el.boundingBox();
    const viewport = page.viewportSize();
    check(box && box.y >= 0 && box.y + box.height <= viewport.height, `it is in view: ${JSON.stringify(box)}`);
  });
});
