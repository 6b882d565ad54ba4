// Threads, pins, polls, attachments and presence between two people in two browser contexts. Alice
// makes a room and invites Bob. Bob's custom status shows in Alice's member list live; a reply
// Alice writes in a thread appears live in Bob's open thread panel (once); a message Alice pins
// shows live in Bob's open pins list; Bob's vote moves Alice's tally live; once Alice has timed Bob
// out, his vote shows at once and is taken back when refused, and his thread reply stays in the
// panel as not sent (Retry, Discard); a picture Alice uploads (its progress bar reaching 100 %)
// appears for Bob inline, and his download of it has the same bytes; Bob shows online in Alice's
// member list and in her direct messages, and away once his page closes. No page logs an error.
import { readFile } from "node:fs/promises";
import { deflateSync } from "node:zlib";
import { randomBytes } from "node:crypto";
import { acceptInvitation, allowConsoleError, check, createRoomAndInvite, run, step, user } from "./harness.mjs";

const message = (page, text) => page.locator("[data-testid=message]:not([data-pending])").filter({ hasText: text });
const action = async (page, text, id) => {
  const m = message(page, text).first();
  await m.hover();
  await m.getByTestId(`action-${id}`).click();
};
const member = (page, userId) => page.locator(`[data-testid=member][data-user-id="${userId}"]`);

/** A PNG of random pixels (so it does not compress): a real image, about 1.4 MB. */
function noisePng(width, height) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(type, 4, "ascii");
    const tail = Buffer.alloc(4);
    tail.writeUInt32BE(crc(Buffer.concat([head.subarray(4), data])), 0);
    return Buffer.concat([head, data, tail]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const raw = Buffer.alloc((width * 3 + 1) * height);
  const noise = randomBytes(width * 3 * height);
  for (let y = 0; y < height; y++) noise.copy(raw, y * (width * 3 + 1) + 1, y * width * 3, (y + 1) * width * 3);
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([signature, chunk("IHDR", ihdr), chunk("IDAT", deflateSync(raw, { level: 0 })), chunk("IEND", Buffer.alloc(0))]);
}

await run(async (browser) => {
  const alice = await user(browser, "alice", { name: "Alice" });
  const bob = await user(browser, "bob", { name: "Bob" });
  let roomId;

  await step("alice creates a room and bob accepts her invitation", async () => {
    roomId = await createRoomAndInvite(alice, "features", "bob");
    await acceptInvitation(bob, "features");
  });

  await step("bob shows online in alice's member list, and his custom status appears there live", async () => {
    await alice.getByTestId("members-toggle").click();
    await member(alice, "bob").getByTestId("presence").and(alice.locator("[data-state=online]")).waitFor();
    await bob.getByTestId("status-edit").click();
    await bob.getByTestId("dialog-emoji").fill("🍕");
    await bob.getByTestId("dialog-text").fill("out for lunch");
    await bob.getByTestId("dialog-ok").click();
    await bob.getByTestId("my-status").filter({ hasText: "🍕 out for lunch" }).waitFor();
    await member(alice, "bob").getByTestId("member-status").filter({ hasText: "out for lunch" }).waitFor();
  });

  await step("a trust level alice sets for bob shows in her member list", async () => {
    await alice.evaluate(async (roomId) => {
      await tabletalk.api.request("PUT", `/api/rooms/${roomId}/members/bob/trust-level`, { level: 2 });
      tabletalk.store.setMembers(roomId, await tabletalk.api.listMembers(roomId));
    }, roomId);
    const badge = member(alice, "bob").getByTestId("member-trust");
    await badge.filter({ hasText: "L2" }).waitFor();
    const title = await badge.getAttribute("title");
    check(title === "Trust level 2, set by a moderator", `the badge says ${title}`);
  });

  await step("a reply alice writes in a thread appears live in bob's open thread panel, once", async () => {
    const input = alice.getByTestId("composer-input");
    await input.fill("shall we talk about lunch");
    await input.press("Enter");
    await message(bob, "shall we talk about lunch").waitFor();
    await action(bob, "shall we talk about lunch", "thread");
    await bob.getByTestId("panel").getByTestId("thread-root-message").filter({ hasText: "shall we talk about lunch" }).waitFor();
    await action(alice, "shall we talk about lunch", "thread");
    const reply = alice.getByTestId("thread-input");
    check(await reply.evaluate((el) => el === document.activeElement), "the thread's box has the focus");
    await reply.fill("yes, in the thread");
    await reply.press("Enter");
    const theirs = bob.getByTestId("thread-replies").getByTestId("thread-message").filter({ hasText: "yes, in the thread" });
    await theirs.waitFor();
    // The root in the timeline counts its reply (read again after the live reply).
    await message(bob, "shall we talk about lunch").getByTestId("thread-summary").filter({ hasText: "1 reply" }).waitFor();
    // Alice's own reply replaced its pending entry: one reply, stored, in her panel too.
    await alice.locator("[data-testid=thread-replies] [data-testid=thread-message]:not([data-pending])").filter({ hasText: "yes, in the thread" }).waitFor();
    check((await alice.getByTestId("thread-replies").getByTestId("thread-message").count()) === 1, "alice's panel shows the reply once");
    check((await theirs.count()) === 1, "bob's panel shows the reply once");
    // Replying followed the thread: it is listed in alice's sidebar.
    await alice.getByTestId("section-threads").getByTestId("thread-link").filter({ hasText: "shall we talk about lunch" }).waitFor();
  });

  await step("a message alice pins shows live in bob's open pins list", async () => {
    await bob.getByTestId("pins-toggle").click();
    await bob.getByTestId("pins-empty").waitFor();
    await action(alice, "shall we talk about lunch", "pin");
    await message(alice, "shall we talk about lunch").getByTestId("pinned").waitFor();
    await bob.getByTestId("pins").getByTestId("pin").filter({ hasText: "shall we talk about lunch" }).waitFor();
    await message(bob, "shall we talk about lunch").getByTestId("pinned").waitFor();
  });

  await step("bob's vote on alice's poll moves alice's tally live", async () => {
    await alice.getByTestId("composer-poll").click();
    await alice.getByTestId("dialog-question").fill("Tea or coffee?");
    await alice.getByTestId("dialog-option1").fill("Tea");
    await alice.getByTestId("dialog-option2").fill("Coffee");
    await alice.getByTestId("dialog-ok").click();
    const bobsPoll = message(bob, "Tea or coffee?").getByTestId("poll");
    await bobsPoll.waitFor();
    await bobsPoll.getByTestId("poll-option").filter({ hasText: "Tea" }).click();
    await bobsPoll.locator("[data-testid=poll-option][aria-pressed=true]").filter({ hasText: "Tea" }).waitFor();
    const tea = message(alice, "Tea or coffee?").getByTestId("poll-option").filter({ hasText: "Tea" });
    await tea.and(alice.locator('[data-votes="1"]')).waitFor();
    check((await tea.getAttribute("aria-pressed")) === "false", "bob's vote is not alice's");
    await message(alice, "Tea or coffee?").getByTestId("poll-total").filter({ hasText: "1 vote" }).waitFor();
  });

  await step("a vote the server refuses is shown at once and then taken back", async () => {
    // Bob timed out by alice (the room's owner): his votes are refused (403).
    allowConsoleError(/status of 403/);
    const until = new Date(Date.now() + 5 * 60 * 1000).toISOString();
    await alice.evaluate(
      ([room, until]) => globalThis.tabletalk.api.request("POST", `/api/rooms/${room}/members/bob/timeout`, { until }),
      [roomId, until],
    );
    await bob.evaluate(() => {
      window.coffeeShown = false;
      const pressed = '[data-testid=message] [data-testid=poll-option][data-option-id="2"][aria-pressed=true]';
      new MutationObserver(() => {
        if (document.querySelector(pressed)) window.coffeeShown = true;
      }).observe(document.body, { subtree: true, childList: true, attributes: true });
    });
    const bobsPoll = message(bob, "Tea or coffee?").getByTestId("poll");
    await bobsPoll.getByTestId("poll-option").filter({ hasText: "Coffee" }).click();
    await bob.getByTestId("connection-status").filter({ hasText: "Could not vote" }).waitFor();
    check(await bob.evaluate(() => window.coffeeShown), "the vote showed before the answer came");
    await bobsPoll.locator("[data-testid=poll-option][aria-pressed=true]").filter({ hasText: "Tea" }).waitFor();
    const votes = async (page, text) =>
      message(page, "Tea or coffee?").getByTestId("poll-option").filter({ hasText: text }).getAttribute("data-votes");
    check((await votes(bob, "Tea")) === "1" && (await votes(bob, "Coffee")) === "0", "bob's tally is back as it was");
    check((await votes(alice, "Tea")) === "1" && (await votes(alice, "Coffee")) === "0", "alice's tally never moved");
  });

  await step("a thread reply the server refuses stays in the panel as not sent, with Retry and Discard", async () => {
    await action(bob, "shall we talk about lunch", "thread");
    const reply = bob.getByTestId("thread-input");
    await reply.fill("let me in");
    await reply.press("Enter");
    const failed = bob.locator("[data-testid=thread-replies] [data-testid=thread-message][data-pending][data-state=failed]");
    await failed.filter({ hasText: "Not sent" }).waitFor();
    await failed.getByRole("button", { name: "Discard" }).click();
    await failed.waitFor({ state: "detached" });
    check((await alice.getByTestId("thread-replies").getByTestId("thread-message").count()) === 1, "alice's panel still shows one reply");
  });

  await step("a picture alice uploads (its progress reaching 100 %) appears for bob as a thumbnail, opens in full and downloads with the same bytes", async () => {
    const png = noisePng(700, 700);
    await alice.evaluate(() => {
      window.progressSeen = [];
      new MutationObserver(() => {
        for (const bar of document.querySelectorAll("[data-testid=upload-progress]")) window.progressSeen.push(bar.value);
      }).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ["value"] });
    });
    await alice.getByTestId("composer-file").setInputFiles({ name: "noise.png", mimeType: "image/png", buffer: png });
    await alice.getByTestId("upload").getByTestId("upload-state").filter({ hasText: "Ready" }).waitFor();
    const seen = await alice.evaluate(() => window.progressSeen);
    console.log(`progress seen: ${JSON.stringify(seen)}`);
    check(seen.includes(100), `the progress bar reached 100: ${JSON.stringify(seen)}`);
    check(seen.every((v, i) => i === 0 || v >= seen[i - 1] || v === 0), `the progress only grew: ${JSON.stringify(seen)}`);
    check((await alice.getByTestId("upload-progress").evaluate((el) => el.value)) === 100, "the bar shows 100 %");
    const input = alice.getByTestId("composer-input");
    await input.fill("a picture of noise");
    await input.press("Enter");
    await alice.getByTestId("upload-tray").waitFor({ state: "hidden" });

    const theirs = message(bob, "a picture of noise");
    await theirs.getByTestId("attachment-name").filter({ hasText: "noise.png" }).waitFor();
    const size = await theirs.getByTestId("attachment-size").textContent();
    check(size === `${(png.length / (1024 * 1024)).toFixed(1)} MB`, `the size shows: ${size}`);
    // Its thumbnail, made by the server shortly after the send, in a box of the image's shape
    // (224 × 224 for a 700 × 700 picture) that is laid out before the thumbnail loads.
    const thumbnail = theirs.getByTestId("attachment-thumbnail");
    await thumbnail.locator("img[src^='blob:']").waitFor();
    const shown = await (
      await bob.waitForFunction(() => {
        const img = [...document.querySelectorAll("[data-testid=attachment-thumbnail] img")].pop();
        if (!img?.complete || !img.naturalWidth) return null;
        const box = img.getBoundingClientRect();
        return { width: img.getAttribute("width"), height: img.getAttribute("height"), natural: img.naturalWidth, box: [box.width, box.height] };
      })
    ).jsonValue();
    check(shown.width === "224" && shown.height === "224", `the box is reserved from the image's size: ${JSON.stringify(shown)}`);
    check(shown.box[0] === 224 && shown.box[1] === 224, `the thumbnail fills its box: ${JSON.stringify(shown)}`);
    check(shown.natural === 320, `the thumbnail is the server's (320 pixels a side): ${JSON.stringify(shown)}`);
    await thumbnail.click();
    await bob.waitForFunction(() => {
      const img = document.querySelector("dialog[open] [data-testid=attachment-full]");
      return img && img.complete && img.naturalWidth === 700;
    });
    await bob.keyboard.press("Escape");
    await bob.locator("dialog[open]").waitFor({ state: "hidden" });
    const [download] = await Promise.all([bob.waitForEvent("download"), theirs.getByTestId("attachment-download").click()]);
    check(download.suggestedFilename() === "noise.png", `downloaded as ${download.suggestedFilename()}`);
    const bytes = await readFile(await download.path());
    check(bytes.equals(png), `the download has the uploaded bytes (${bytes.length} of ${png.length})`);
  });

  await step("bob shows online in alice's direct messages and member list, then away once his page closes", async () => {
    await alice.getByTestId("open-direct").click();
    await alice.getByTestId("dialog-userId").fill("bob");
    await alice.getByTestId("dialog-ok").click();
    await alice.getByTestId("room-title").filter({ hasText: "Bob" }).waitFor();
    const dm = alice.getByTestId("section-direct").getByTestId("room-link").filter({ hasText: "Bob" });
    await dm.locator("[data-testid=presence][data-state=online]").waitFor();
    await alice.locator(`[data-testid=room-link][data-room-id="${roomId}"]`).click();
    await alice.getByTestId("room-title").filter({ hasText: "features" }).waitFor();
    if (!(await alice.getByTestId("members").count())) await alice.getByTestId("members-toggle").click();
    await member(alice, "bob").locator("[data-testid=presence][data-state=online]").waitFor();
    await bob.context().close();
    await member(alice, "bob").locator("[data-testid=presence][data-state=away]").waitFor();
    await dm.locator("[data-testid=presence][data-state=away]").waitFor();
  });
});
