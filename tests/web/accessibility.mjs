// Quality of the main views, at a desktop's width (1280×800) and a phone's (390×844):
// - axe-core (pinned; tests/run installs it and sets TABLETALK_TEST_AXE to its node_modules)
//   finds no serious or critical violation on the sign-in screen, the room list with a room
//   open, the phone's room list opened over the room, and a dialog;
// - responsive: nothing scrolls sideways; on a phone the room list is off screen (and out of the
//   Tab order) until the "Rooms" button opens it, and picking a room closes it again;
// - a screenshot of each view at each width, saved under target/web-screenshots/ (or
//   $TABLETALK_WEB_SCREENSHOTS);
// - keyboard only, with the focus visible at every stop: sign in, make a room, send a message
//   and react to it, without a pointer.
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { base, check, openPage, run, signIn, step } from "./harness.mjs";
import { api, devToken, until } from "./server_api.mjs";

const axeModules = process.env.TABLETALK_TEST_AXE;
if (!axeModules) {
  console.error("TABLETALK_TEST_AXE is not set (tests/run sets it)");
  process.exit(2);
}
const axePath = join(axeModules, "axe-core", "axe.min.js");
const shots =
  process.env.TABLETALK_WEB_SCREENSHOTS || join(dirname(fileURLToPath(import.meta.url)), "..", "..", "target", "web-screenshots");
mkdirSync(shots, { recursive: true });

const WIDTHS = [
  { name: "desktop", viewport: { width: 1280, height: 800 } },
  { name: "phone", viewport: { width: 390, height: 844 } },
];

/** Runs axe on the page as it is; fails on any serious or critical violation, lists the rest. */
async function audit(page, view) {
  if (!(await page.evaluate(() => "axe" in globalThis))) await page.addScriptTag({ path: axePath });
  const { violations } = await page.evaluate(() => globalThis.axe.run(document, { resultTypes: ["violations"] }));
  const bad = violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  for (const v of violations) {
    console.log(`  axe ${view}: ${v.impact} ${v.id}: ${v.help}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
  }
  check(
    bad.length === 0,
    `${view}: serious or critical axe violations:\n${bad
      .map((v) => `  ${v.impact} ${v.id}: ${v.help}\n${v.nodes.map((n) => `    ${n.target.join(" ")}: ${n.failureSummary}`).join("\n")}`)
      .join("\n")}`,
  );
}

async function noSidewaysScroll(page, view) {
  const { scroll, width } = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    width: document.documentElement.clientWidth,
  }));
  check(scroll <= width, `${view}: the page scrolls sideways (${scroll} > ${width})`);
}

async function shoot(page, file) {
  await page.screenshot({ path: join(shots, file) });
}

/** The focused element: its test id, whether its outline shows, whether it is on screen. */
const focused = (page) =>
  page.evaluate(() => {
    const el = document.activeElement;
    if (!el || el === document.body) return null;
    const style = getComputedStyle(el);
    const box = el.getBoundingClientRect();
    return {
      testid: el.dataset.testid ?? el.id ?? el.tagName,
      outline: style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2,
      onScreen: box.width > 0 && box.height > 0 && box.bottom > 0 && box.right > 0 && box.top < innerHeight && box.left < innerWidth,
      opaque: Number(getComputedStyle(el.closest(".message-actions") ?? el).opacity) > 0.5,
      text: el.textContent.trim().slice(0, 40),
    };
  });

/** Presses Tab (Shift+Tab with `back`) until `wanted(focus)`; every stop must show its focus. */
async function tabTo(page, wanted, what, { back = false, max = 60 } = {}) {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press(back ? "Shift+Tab" : "Tab");
    const f = await focused(page);
    if (!f) continue;
    check(f.outline && f.onScreen && f.opaque, `the focus on ${JSON.stringify(f)} is not visible (on the way to ${what})`);
    if (await wanted(f)) return f;
  }
  throw new Error(`${max} presses of Tab did not reach ${what}`);
}

await run(async (browser) => {
  const bobToken = await devToken("bob", "Bob");

  for (const { name: width, viewport } of WIDTHS) {
    const user = `ana-${width}`;
    const page = await openPage(browser, "/", { viewport, label: user, bypassCSP: true });

    await step(`${width}: the sign-in screen`, async () => {
      await page.getByTestId("signin-user").waitFor();
      await noSidewaysScroll(page, `${width} sign-in`);
      await shoot(page, `signin-${width}.png`);
      await audit(page, `${width} sign-in`);
    });

    let roomId;
    let otherId;
    await step(`${width}: a room with messages, the room list beside it`, async () => {
      await signIn(page, user, "Ana");
      const token = await devToken(user, "Ana");
      roomId = (await api(token, "POST", "/api/rooms", { name: "design-review" })).id;
      otherId = (await api(token, "POST", "/api/rooms", { name: "random" })).id;
      await api(token, "POST", `/api/rooms/${roomId}/invites`, { userId: "bob" });
      await api(bobToken, "POST", `/api/invites/${roomId}/accept`);
      const first = await api(bobToken, "POST", `/api/rooms/${roomId}/messages`, { text: "Morning! The new layout is up for review." });
      await api(bobToken, "POST", `/api/rooms/${roomId}/messages`, {
        text: `<p>@${user} could you check the phone width?</p>`,
      });
      await api(token, "POST", `/api/rooms/${roomId}/messages`, { text: "On it.", replyTo: first.message?.id ?? first.id });
      await api(token, "PUT", `/api/rooms/${roomId}/messages/${first.message?.id ?? first.id}/reactions/${encodeURIComponent("👍")}`);
      await api(bobToken, "POST", "/api/dms", { userId: user });
      await page.evaluate(() => globalThis.tabletalk.rooms.reload());
      await page.evaluate((href) => (location.hash = href), `#/rooms/${roomId}`);
      await page.getByTestId("room-title").filter({ hasText: "design-review" }).waitFor();
      await page.getByTestId("message").filter({ hasText: "On it." }).waitFor();
      await noSidewaysScroll(page, `${width} room`);
      await shoot(page, `room-${width}.png`);
      await audit(page, `${width} room`);
    });

    if (width === "phone") {
      await step("phone: the room list is off screen until the Rooms button opens it", async () => {
        const sidebar = page.getByTestId("sidebar");
        const toggle = page.getByTestId("sidebar-toggle");
        check(await toggle.isVisible(), "the Rooms button shows on a phone");
        const closed = await sidebar.boundingBox();
        check(!closed || closed.x + closed.width <= 0, `the room list is off screen: ${JSON.stringify(closed)}`);
        await toggle.click();
        check((await toggle.getAttribute("aria-expanded")) === "true", "the button says the list is open");
        await until(async () => {
          const open = await sidebar.boundingBox();
          return open && open.x >= 0;
        }, "the room list to slide in");
        await shoot(page, `rooms-${width}.png`);
        await audit(page, `${width} room list open`);
        await page.locator(`[data-testid=room-link][data-room-id="${otherId}"]`).click();
        await page.getByTestId("room-title").filter({ hasText: "random" }).waitFor();
        check((await toggle.getAttribute("aria-expanded")) === "false", "picking a room closes the list");
        // The closed list is out of the Tab order: from the top, every stop to the message box is on screen.
        await until(async () => !(await sidebar.isVisible()), "the room list to close");
        await page.evaluate(() => document.activeElement?.blur());
        await tabTo(page, (f) => f.testid === "composer-input", "the message box on a phone");
      });
    } else {
      await step("desktop: the room list shows beside the room, without a Rooms button", async () => {
        check(!(await page.getByTestId("sidebar-toggle").isVisible()), "no Rooms button on a wide screen");
        check(await page.getByTestId("sidebar").isVisible(), "the room list shows");
      });
    }

    await step(`${width}: a dialog`, async () => {
      if (width === "phone") {
        await page.getByTestId("sidebar-toggle").click();
      }
      await page.getByTestId("create-room").click();
      await page.getByTestId("dialog-name").waitFor();
      await shoot(page, `dialog-${width}.png`);
      await audit(page, `${width} dialog`);
      await page.keyboard.press("Escape");
      await page.getByTestId("dialog").waitFor({ state: "hidden" });
    });
    await page.context().close();
  }

  await step("keyboard only: sign in, make a room, send a message and react to it, the focus always visible", async () => {
    const page = await openPage(browser, "/", { label: "kim", bypassCSP: true });
    await page.getByTestId("signin-user").waitFor();
    check((await focused(page))?.testid === "signin-user", "the sign-in screen focuses the user id");
    await page.keyboard.type("kim");
    await tabTo(page, (f) => f.testid === "signin-name", "the name");
    await page.keyboard.type("Kim");
    await page.keyboard.press("Enter");
    await page.locator("html[data-ready=true]").waitFor();

    await tabTo(page, (f) => f.testid === "create-room", "New room");
    await page.keyboard.press("Enter");
    await page.getByTestId("dialog-name").waitFor();
    check((await focused(page))?.testid === "dialog-name", "the dialog focuses its first field");
    await page.keyboard.type("keyboard-room");
    await page.keyboard.press("Enter");
    await page.getByTestId("room-title").filter({ hasText: "keyboard-room" }).waitFor();

    await tabTo(page, (f) => f.testid === "composer-input", "the message box");
    await page.keyboard.type("typed without a mouse");
    await page.keyboard.press("Enter");
    const sent = page.locator("[data-testid=message]:not([data-pending])").filter({ hasText: "typed without a mouse" });
    await sent.waitFor();

    const react = await tabTo(page, (f) => f.testid === "action-react-👍", "the message's React button", { back: true });
    check(react.opaque, "the message's actions show while one of them has the focus");
    // The room redraws (read marks, names, a live change) while the focus is on a message's action.
    await page.evaluate(() => tabletalk.bus.emit("receipts:changed", { roomId: tabletalk.timeline.roomId }));
    check((await focused(page))?.testid === "action-react-👍", "a redraw leaves the focus where it was");
    await page.keyboard.press("Enter");
    await sent.locator("[data-testid=reaction][aria-pressed=true]").filter({ hasText: "👍 1" }).waitFor();
    // The reaction drew the message anew: the focus is on the same action of the new one.
    const after = await focused(page);
    check(after?.testid === "action-react-👍" && after.opaque, `the focus after reacting: ${JSON.stringify(after)}`);
    await shoot(page, "keyboard-desktop.png");
    await page.context().close();
  });
});
