// What every browser test of the web client shares: Debian's chromium driven by
// playwright-core (installed by tests/run; its node_modules folder in
// TABLETALK_TEST_PLAYWRIGHT), a page per user in a browser context of its own (its own
// storage, so two users sign in side by side), and a record of console errors and page
// errors: `finish()` fails the run when there was any. A test script exits 0 when every
// check held and non-zero (after printing what failed) otherwise; tests/api/web_client.rs
// runs it against the real binary with the server's base URL as its first argument.
//
// Playwright's launch gives each run a fresh temporary profile (user-data-dir) and removes it.

import { createRequire } from "node:module";
import { join } from "node:path";

const modules = process.env.TABLETALK_TEST_PLAYWRIGHT;
if (!modules) {
  console.error("TABLETALK_TEST_PLAYWRIGHT is not set (tests/run sets it)");
  process.exit(2);
}
const { chromium } = createRequire(join(modules, "noop.js"))("playwright-core");

export const base = process.argv[2];
if (!base) {
  console.error("usage: node <test>.mjs <base-url>");
  process.exit(2);
}

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** What went wrong in any page: console errors and uncaught exceptions. */
const problems = [];
/** Console errors a test causes on purpose (a refused request it stages), as regexps. */
const allowed = [];

/** Lets console errors matching `pattern` pass (the browser logs every failed request). */
export function allowConsoleError(pattern) {
  allowed.push(pattern);
}

/**
 * Pages (by label) whose test cuts their network on purpose (tests/web/offline.mjs): the
 * browser's own log line of a request that failed for want of a network ("Failed to load
 * resource: net::ERR_…") is what the test causes there, not a problem of the page. An HTTP
 * error status, or anything the page itself logs, still fails the run.
 */
const offlineOnPurpose = new Set();
export function losesNetworkOnPurpose(label) {
  offlineOnPurpose.add(label);
}
const NETWORK_FAILURE = /^Failed to load resource: net::ERR_/;

export async function launch() {
  return chromium.launch({
    executablePath: process.env.TABLETALK_TEST_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: CHROMIUM_ARGS,
  });
}

/** A fresh context and page at `path`, its console errors and page errors recorded. */
export async function openPage(
  browser,
  path = "/",
  { viewport = { width: 1280, height: 800 }, label = "page", context: given, bypassCSP = false } = {},
) {
  // A test may hand in a context it prepared (routes, offline), else the page gets its own.
  // `bypassCSP`: for a test that injects a script of its own (axe), which the page's policy
  // refuses as any inline script.
  const context = given ?? (await browser.newContext({ viewport, bypassCSP }));
  const page = await context.newPage();
  page.on("console", (message) => {
    if (message.type() !== "error") return;
    const text = message.text();
    if (offlineOnPurpose.has(label) && NETWORK_FAILURE.test(text)) return;
    if (!allowed.some((pattern) => pattern.test(text))) problems.push(`${label}: console error: ${text}`);
  });
  page.on("pageerror", (error) => problems.push(`${label}: page error: ${error.message}`));
  await page.goto(base + path);
  return page;
}

/** Signs in through the development door on the sign-in screen; resolves once the app shows. */
export async function signIn(page, userId, name = userId) {
  await page.getByTestId("signin-user").fill(userId);
  await page.getByTestId("signin-name").fill(name);
  await page.getByTestId("signin-submit").click();
  await page.locator("html[data-ready=true]").waitFor();
}

/** Creates a room named `name` through the UI and invites `inviteeId`; resolves to the room's id. */
export async function createRoomAndInvite(page, name, inviteeId) {
  await page.getByTestId("create-room").click();
  await page.getByTestId("dialog-name").fill(name);
  await page.getByTestId("dialog-ok").click();
  await page.getByTestId("room-title").filter({ hasText: name }).waitFor();
  const roomId = /#\/rooms\/([^/]+)/.exec(page.url())[1];
  await page.getByTestId("invite").click();
  await page.getByTestId("dialog-userId").fill(inviteeId);
  await page.getByTestId("dialog-ok").click();
  await page.getByTestId("dialog").waitFor({ state: "hidden" });
  return roomId;
}

/** Reloads (the invitation shows in a fresh room list) and accepts the invitation to `name`. */
export async function acceptInvitation(page, name) {
  await page.reload();
  await page.getByTestId("invitation-accept").click();
  await page.getByTestId("room-title").filter({ hasText: name }).waitFor();
}

/** A new user's page, signed in. */
export async function user(browser, userId, options = {}) {
  const page = await openPage(browser, "/", { label: userId, ...options });
  await signIn(page, userId, options.name ?? userId);
  return page;
}

/** Runs the named step; a failure names the step. */
export async function step(name, body) {
  const started = Date.now();
  try {
    await body();
  } catch (e) {
    console.error(`FAILED: ${name}\n${e.stack ?? e}`);
    throw e;
  }
  console.log(`ok: ${name} (${Date.now() - started} ms)`);
}

export function check(condition, message) {
  if (!condition) throw new Error(message);
}

/** Runs `body(browser)`, then fails when it threw or any page logged an error. */
export async function run(body) {
  const browser = await launch();
  let failed = false;
  try {
    await body(browser);
  } catch (e) {
    failed = true;
    if (!String(e.stack).includes("FAILED")) console.error(e.stack ?? e);
  } finally {
    await browser.close();
  }
  if (problems.length) {
    console.error(`console or page errors:\n  ${problems.join("\n  ")}`);
    failed = true;
  }
  process.exit(failed ? 1 : 0);
}
