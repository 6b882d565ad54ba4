// What a room shows, and when: the page attaches its live view of a room before it reads the
// room, so a message committed between the two is shown (a hook on the view request commits
// it, no sleeping); and nothing in a message body loads from elsewhere: a remote image is
// shown as its alt text, and the page's content policy refuses one added anyway, so a
// tracking pixel in a private room learns nothing. No page logs an error but the refusal.
import http from "node:http";

import { allowConsoleError, base, check, run, step, user } from "./harness.mjs";
import { api, devToken } from "./server_api.mjs";

const message = (page, text) => page.getByTestId("message").filter({ hasText: text });
const roomLink = (page, id) => page.locator(`[data-testid=room-link][data-room-id="${id}"]`);

// A server that counts what is asked of it: the would-be tracker.
let pixelHits = 0;
const pixel = http.createServer((request, response) => {
  pixelHits++;
  response.writeHead(200, { "content-type": "image/gif" });
  response.end(Buffer.from("R0lGODlhAQABAAAAACw=", "base64"));
});
await new Promise((resolve) => pixel.listen(0, "127.0.0.1", resolve));
const pixelUrl = `http://127.0.0.1:${pixel.address().port}/p.gif`;
// The one refusal this test causes on purpose.
allowConsoleError(/Content Security Policy/);

await run(async (browser) => {
  const bob = await devToken("bob", "Bob");
  const carol = await devToken("carol", "Carol");
  const room = await api(bob, "POST", "/api/rooms", { name: "ordered", visibility: "public" });
  const quiet = await api(bob, "POST", "/api/rooms", { name: "quiet", visibility: "public" });
  for (const id of [room.id, quiet.id]) await api(carol, "POST", `/api/rooms/${id}/join`);
  const page = await user(browser, "carol", { name: "Carol" });

  await step("the page is served with a content policy that keeps it home", async () => {
    const response = await fetch(`${base}/`);
    const policy = response.headers.get("content-security-policy") ?? "";
    check(policy.includes("frame-ancestors 'none'"), `no framing: ${policy}`);
    check(/img-src 'self' blob: data:;/.test(policy), `images from here only: ${policy}`);
    check(policy.includes("script-src 'self'"), `scripts from here only: ${policy}`);
  });

  await step("a message committed between the live view and the read is shown", async () => {
    await roomLink(page, quiet.id).click();
    await page.getByTestId("room-title").filter({ hasText: "quiet" }).waitFor();
    await page.locator("[data-testid=connection-status][data-state=connected]").waitFor({ state: "attached" });
    let committed = false;
    await page.route("**/api/live/view", async (route) => {
      const asked = route.request().postDataJSON();
      if (!committed && route.request().method() === "PUT" && asked?.roomId === room.id) {
        committed = true;
        await api(bob, "POST", `/api/rooms/${room.id}/messages`, { text: "<p>between the view and the read</p>" });
      }
      await route.continue();
    });
    await roomLink(page, room.id).click();
    await message(page, "between the view and the read").waitFor({ timeout: 15000 });
    check(committed, "the view request was seen");
    await page.unroute("**/api/live/view");
  });

  await step("a remote image in a message is shown as its alt text and never fetched", async () => {
    const text = `<p>look here <img src="${pixelUrl}" alt="the picture"></p>`;
    await api(bob, "POST", `/api/rooms/${room.id}/messages`, { text });
    const shown = message(page, "look here");
    await shown.waitFor();
    check((await shown.locator("img").count()) === 0, "no image element in the message");
    // The content policy refuses an image from elsewhere added to the page anyway.
    await page.evaluate((src) => {
      const img = document.createElement("img");
      img.src = src;
      document.body.append(img);
    }, pixelUrl);
    await page.waitForTimeout(500);
    check(pixelHits === 0, `the pixel was fetched ${pixelHits} times`);
  });
});
