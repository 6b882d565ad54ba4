// The API from the test script's side (node's fetch, no browser): a development token for a
// user, a call with it, and waiting for a condition. For setting up what a test's pages show
// and reading back what they did.
import { base } from "./harness.mjs";

/** A token for `userId` from the development door (the server runs with its secret). */
export async function devToken(userId, name = userId) {
  const response = await fetch(`${base}/api/dev/signin`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ userId, name }),
  });
  if (!response.ok) throw new Error(`dev sign-in of ${userId}: ${response.status} ${await response.text()}`);
  return (await response.json()).token;
}

/** `method path` with `token`; the answer's JSON (null for 204); throws on an error answer. */
export async function api(token, method, path, body) {
  const response = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** Waits until `probe()` gives something truthy, polling every 50 ms, at most `tries` times. */
export async function until(probe, what, tries = 200) {
  for (let i = 0; i < tries; i++) {
    const value = await probe();
    if (value) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`gave up waiting for ${what}`);
}
