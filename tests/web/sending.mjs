// Sending safely: a send whose answer is lost (the server stored it, the page saw a 503) is
// sent again with the same clientId and shows once, replaced by the stored message; a send
// made while the browser is offline stays pending ("Sending…"/"Retrying…") with the text and
// is delivered once when the browser is back online. A send the server refuses shows its
// reason with Retry and Discard, and Discard takes it away. What is typed is Markdown the
// server renders: bold and links show as such, and an edit starts from the source. A `/`
// suggests the commands; one runs once, and a failed one stays in the box. A `:` suggests
// emoji, the room's own first, and the room's own show as their images.
import { allowConsoleError, base, check, openPage, run, signIn, step } from "./harness.mjs";

// The failures this test stages on purpose; the browser logs each failed request.
allowConsoleError(/status of 503|status of 422|status of 400|ERR_FAILED|ERR_INTERNET_DISCONNECTED|ERR_NETWORK_CHANGED/);

async function devToken(userId) {
  const r = await fetch(`${base}/api/dev/signin`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ userId }),
  });
  return (await r.json()).token;
}
async function stored(token, roomId) {
  const r = await fetch(`${base}/api/rooms/${roomId}/messages?limit=100`, { headers: { authorization: `Bearer ${token}` } });
  return (await r.json()).messages.filter((m) => m.type === "Message");
}

await run(async (browser) => {
  const token = await devToken("alice");
  const room = await (
    await fetch(`${base}/api/rooms`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "outbox" }),
    })
  ).json();
  const page = await openPage(browser, "/", { label: "alice" });
  await signIn(page, "alice", "Alice");
  await page.goto(`${base}/#/rooms/${room.id}`);
  await page.getByTestId("room-title").filter({ hasText: "outbox" }).waitFor();
  const input = page.getByTestId("composer-input");
  const sent = (text) => page.locator("[data-testid=message]:not([data-pending])").filter({ hasText: text });

  /** Routes the room's sends: `first` handles the first POST, the rest go through. */
  async function stage(first) {
    const clientIds = [];
    await page.route("**/api/rooms/*/messages", async (route) => {
      if (route.request().method() !== "POST") return route.continue();
      clientIds.push(JSON.parse(route.request().postData()).clientId);
      if (clientIds.length === 1) return first(route);
      return route.continue();
    });
    return clientIds;
  }

  await step("a send that failed is sent again with the same clientId after a wait", async () => {
    const clientIds = await stage((route) => route.abort("failed"));
    await input.fill("sent again");
    await input.press("Enter");
    await sent("sent again").waitFor();
    await page.unroute("**/api/rooms/*/messages");
    check(clientIds.length === 2 && clientIds[0] === clientIds[1], `one clientId, sent twice: ${clientIds}`);
    check((await page.getByTestId("message").filter({ hasText: "sent again" }).count()) === 1, "shown once");
  });

  await step("a send whose answer was lost (stored, then a 503) shows once, as stored", async () => {
    const clientIds = await stage(async (route) => {
      await route.fetch(); // it reaches the server and is stored …
      await route.fulfill({ status: 503, contentType: "application/json", body: '{"code":"UNAVAILABLE","message":"lost"}' });
    });
    await input.fill("said once");
    await input.press("Enter");
    await sent("said once").waitFor();
    await page.waitForTimeout(1500); // a retry, if one was due, has gone out by now
    await page.unroute("**/api/rooms/*/messages");
    check(new Set(clientIds).size === 1, `one clientId: ${clientIds}`);
    check((await page.getByTestId("message").filter({ hasText: "said once" }).count()) === 1, "shown once");
    const messages = (await stored(token, room.id)).filter((m) => m.text.includes("said once"));
    check(messages.length === 1, `stored once: ${messages.length}`);
  });

  await step("a send made offline stays pending and is delivered once back online", async () => {
    await page.context().setOffline(true);
    await input.fill("written offline");
    await input.press("Enter");
    const pending = page.locator("[data-testid=message][data-pending]").filter({ hasText: "written offline" });
    await pending.waitFor();
    check(/Sending|Retrying/.test(await pending.getByTestId("pending-status").textContent()), "it says it is sending");
    await page.waitForTimeout(1500);
    await page.context().setOffline(false);
    await sent("written offline").waitFor();
    await pending.waitFor({ state: "detached" });
    const messages = (await stored(token, room.id)).filter((m) => m.text.includes("written offline"));
    check(messages.length === 1, `stored once: ${messages.length}`);
  });

  await step("what is typed is Markdown: formatting and links shown, the edit box holds the source", async () => {
    await input.fill("Who owns the **launch email**?");
    await input.press("Enter");
    const bold = sent("Who owns the launch email?");
    await bold.locator("strong", { hasText: "launch email" }).waitFor();
    check(!(await bold.textContent()).includes("**"), "no asterisks shown");
    await input.fill("agenda: https://example.com/agenda");
    await input.press("Enter");
    const link = sent("agenda:").locator('a[href="https://example.com/agenda"]');
    await link.waitFor();
    check((await link.textContent()) === "https://example.com/agenda", "the URL is a link");
    await bold.hover();
    await bold.getByTestId("action-edit").click();
    check((await input.inputValue()) === "Who owns the **launch email**?", `the box holds the source: ${await input.inputValue()}`);
    await input.fill("Who owns the **launch email** now?");
    await input.press("Enter");
    await sent("Who owns the launch email now?").locator("strong", { hasText: "launch email" }).waitFor();
  });

  await step("a command is suggested by keyboard and runs once; a failed one stays in the box", async () => {
    const runs = [];
    await page.route("**/api/rooms/*/commands", async (route) => {
      // The list the suggestions come from goes through.
      if (route.request().method() !== "POST") return route.continue();
      runs.push(JSON.parse(route.request().postData()));
      if (runs.length === 2) return route.abort("failed");
      return route.continue();
    });
    await input.fill("/shr");
    const option = page.getByTestId("suggestion").filter({ hasText: "/shrug" });
    await option.waitFor();
    await input.press("Tab");
    check((await input.inputValue()) === "/shrug ", `picked: ${await input.inputValue()}`);
    await input.pressSequentially("oh well");
    await input.press("Enter");
    await sent("oh well ¯\\_(ツ)_/¯").waitFor();
    check((await input.inputValue()) === "", "the box is empty once it ran");
    const shrugs = (await stored(token, room.id)).filter((m) => m.text.includes("oh well"));
    check(shrugs.length === 1 && !shrugs[0].text.includes("/shrug"), `posted once, not as typed: ${JSON.stringify(shrugs)}`);

    // Lost on the way: said so, left in the box, not sent again by the page.
    await input.fill("/topic after the launch");
    await input.press("Enter");
    const status = page.locator("#connection-status");
    await status.filter({ hasText: "Command failed" }).waitFor();
    check((await input.inputValue()) === "/topic after the launch", `left in the box: ${await input.inputValue()}`);
    await page.waitForTimeout(1500);
    check(runs.length === 2, `run once, never again by itself: ${runs.length}`);
    // Sent again by hand, it keeps its clientId (had the lost one run, this would not again).
    await input.press("Enter");
    await status.filter({ hasText: "/topic:" }).waitFor();
    check(runs.length === 3 && runs[2].clientId === runs[1].clientId, `the same clientId: ${JSON.stringify(runs)}`);
    check((await input.inputValue()) === "", "the box is empty once it ran");
    // Refused by the server: its reason shows and the line stays.
    await input.fill("/dance");
    await input.press("Enter");
    await status.filter({ hasText: "there is no command /dance" }).waitFor();
    check((await input.inputValue()) === "/dance", "left in the box");
    await page.unroute("**/api/rooms/*/commands");
    await input.fill("");
  });

  await step("an emoji is suggested after a colon and picked by keyboard; any emoji reacts", async () => {
    await input.fill("ship it :tad");
    await page.getByTestId("suggestion").filter({ hasText: ":tada:" }).first().waitFor();
    await input.press("Enter");
    check((await input.inputValue()) === "ship it 🎉 ", `picked: ${await input.inputValue()}`);
    await input.press("Enter");
    const shipped = sent("ship it 🎉");
    await shipped.waitFor();
    // Any emoji as a reaction, from the picker, by keyboard.
    // Dispatched on the button as it is when it runs: a redraw under a hovering pointer (a
    // member list read again) may hide the toolbar for a moment.
    await shipped.getByTestId("action-react-pick").dispatchEvent("click");
    const search = page.getByTestId("dialog-emoji-search");
    await search.fill("rocket");
    await page.getByTestId("emoji-choice").filter({ hasText: "🚀" }).first().waitFor();
    await search.press("Enter");
    await shipped.getByTestId("reaction").filter({ hasText: "🚀" }).waitFor();
  });

  await step("the room's own emoji is added from the header, suggested after a colon and shown as its image", async () => {
    // A 1 × 1 PNG.
    const png = Buffer.from(
      "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
      "base64",
    );
    // Added from the room's header: an image and a name.
    await page.getByTestId("emoji-tools").click();
    await page.getByTestId("emoji-file").setInputFiles({ name: "parrot.png", mimeType: "image/png", buffer: png });
    await page.getByTestId("dialog-name").fill("partyparrot");
    await page.getByTestId("dialog-ok").click();
    await page.locator("dialog[open]").waitFor({ state: "hidden" });
    const listed = await (
      await fetch(`${base}/api/rooms/${room.id}/emoji`, { headers: { authorization: `Bearer ${token}` } })
    ).json();
    check(listed.length === 1 && listed[0].name === "partyparrot", `made: ${JSON.stringify(listed)}`);
    await input.fill("party :partyp");
    await page.getByTestId("suggestion").filter({ hasText: ":partyparrot:" }).first().waitFor();
    await input.press("Enter");
    check((await input.inputValue()) === "party :partyparrot: ", `picked: ${await input.inputValue()}`);
    await input.press("Enter");
    const image = sent("party").getByTestId("custom-emoji");
    await image.and(page.locator("img[src^='blob:']")).waitFor();
    check((await image.getAttribute("alt")) === ":partyparrot:", "the image is named");
    await page.waitForFunction(() => document.querySelector("[data-testid=custom-emoji]")?.naturalWidth === 1);
  });

  await step("a refused send shows why, and Discard takes it away", async () => {
    await input.fill("x".repeat(10001));
    await input.press("Enter");
    const failed = page.locator("[data-testid=message][data-state=failed]");
    await failed.waitFor();
    check((await failed.getByTestId("pending-status").textContent()).startsWith("Not sent"), "it says why");
    await failed.getByRole("button", { name: "Discard" }).click();
    await failed.waitFor({ state: "detached" });
  });
});
