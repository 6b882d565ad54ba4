// Keyboard only, at a phone's width: sign in, open the sidebar, create a room, write a
// message and edit it, without a pointer; each focused control shows a visible focus ring.
import { check, openPage, run, step } from "./harness.mjs";

await run(async (browser) => {
  const page = await openPage(browser, "/", { label: "carol", viewport: { width: 390, height: 844 } });
  const focused = () => page.evaluate(() => document.activeElement?.dataset?.testid ?? document.activeElement?.id ?? "");
  /** Presses Tab (or Shift+Tab) until the element with `testid` has the focus. */
  async function tabTo(testid, key = "Tab") {
    for (let i = 0; i < 40; i++) {
      if ((await focused()) === testid) {
        const ring = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
        check(ring !== "none", `${testid} shows where the focus is`);
        return;
      }
      await page.keyboard.press(key);
    }
    throw new Error(`${key} never reached ${testid} (at ${await focused()})`);
  }

  await step("sign in with the keyboard", async () => {
    check((await focused()) === "signin-user", "the user id field has the focus");
    await page.keyboard.type("carol");
    await page.keyboard.press("Tab");
    await page.keyboard.type("Carol");
    await page.keyboard.press("Enter");
    await page.locator("html[data-ready=true]").waitFor();
  });

  await step("open the sidebar and create a room", async () => {
    await tabTo("sidebar-toggle");
    await page.keyboard.press("Enter");
    check((await page.getByTestId("sidebar-toggle").getAttribute("aria-expanded")) === "true", "the sidebar says it is open");
    await tabTo("create-room");
    await page.keyboard.press("Enter");
    check((await focused()) === "dialog-name", "the dialog's first field has the focus");
    await page.keyboard.type("by keyboard");
    await page.keyboard.press("Enter");
    await page.getByTestId("room-title").filter({ hasText: "by keyboard" }).waitFor();
  });

  await step("write a message and edit it", async () => {
    await tabTo("composer-input");
    await page.keyboard.type("typed, not clicked");
    await page.keyboard.press("Enter");
    const mine = page.locator("[data-testid=message]:not([data-pending])").filter({ hasText: "typed, not clicked" });
    await mine.waitFor();
    await tabTo("action-edit", "Shift+Tab");
    await page.keyboard.press("Enter");
    check((await focused()) === "composer-input", "editing puts the focus in the box");
    await page.keyboard.press("End");
    await page.keyboard.type(" (fixed)");
    await page.keyboard.press("Enter");
    await page.locator("[data-testid=message]").filter({ hasText: "typed, not clicked (fixed)" }).getByTestId("edited").waitFor();
  });
});
