// The page signs in through the development door and renders its room list, with no console
// errors. How long the first render takes is printed, never asserted (a timed assertion fails
// on a loaded machine, not on a slow page): docs/BENCHMARKS.md records it.
import { base, check, openPage, run, signIn, step } from "./harness.mjs";

await run(async (browser) => {
  const page = await openPage(browser, "/", { label: "alice" });
  await step("first render of the sign-in screen", async () => {
    await page.getByTestId("signin-user").waitFor();
    const ms = await page.evaluate(() => performance.getEntriesByName("tabletalk:signin")[0].startTime);
    console.log(`first render: ${Math.round(ms)} ms after navigation start`);
  });
  await step("sign in and render the signed-in page", async () => {
    await signIn(page, "alice", "Alice");
    await page.reload();
    await page.locator("html[data-ready=true]").waitFor();
    const ms = await page.evaluate(() => performance.getEntriesByName("tabletalk:ready")[0].startTime);
    console.log(`first render signed in: ${Math.round(ms)} ms after navigation start (${base})`);
    check((await page.getByTestId("me").textContent()) === "Alice", "the page names who is signed in");
  });
});
