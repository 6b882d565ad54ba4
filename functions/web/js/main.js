// The page's entry: sign in, then start the app. Everything else is in app.js and the
// modules it wires together (see ../README.md).

import { signIn } from "./session.js";
import { startApp } from "./app.js";

const started = performance.now();
const me = await signIn();
await startApp(me);
// Tests read this mark: the time from navigation start to the first render of the rooms.
performance.mark("tabletalk:ready", { detail: { sinceModuleStart: performance.now() - started } });
document.documentElement.dataset.ready = "true";
