// Signing in and out. The page signs in through the local server's development door
// (`POST /api/dev/signin`) unless its host gave it a token (config.js); a 401 from the API
// signs it out again, since the token is no longer good.

import { devSignIn } from "./api.js";
import { claims, hostToken, loadToken, saveToken } from "./config.js";

/** Resolves with `{token, userId, name}` once the page has a token. */
export function signIn() {
  const token = loadToken();
  if (token) return Promise.resolve(who(token));
  const screen = document.getElementById("signin");
  const form = document.getElementById("signin-form");
  const error = document.getElementById("signin-error");
  screen.hidden = false;
  document.getElementById("signin-user").focus();
  performance.mark("tabletalk:signin");
  return new Promise((resolve) => {
    form.addEventListener("submit", async function submit(event) {
      event.preventDefault();
      error.textContent = "";
      const userId = form.elements.userId.value.trim();
      const name = form.elements.name.value.trim();
      try {
        const token = await devSignIn(userId, name);
        saveToken(token);
        screen.hidden = true;
        form.removeEventListener("submit", submit);
        resolve(who(token));
      } catch (e) {
        error.textContent =
          e.status === 404
            ? "Development sign-in is not available on this server: open the page with a token (#token=…)."
            : e.message;
      }
    });
  });
}

export function signOut() {
  saveToken(null);
  if (!hostToken) location.hash = "";
  location.reload();
}

function who(token) {
  const c = claims(token);
  return { token, userId: c.sub, name: c.name || c.sub };
}
