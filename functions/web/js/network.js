// What the browser says about its network (`navigator.onLine` and its `offline`/`online`
// events), used on top of what the live connection says. The live client notices a dropped
// socket only once its own recovery gives up (up to 30 s with the reliable protocol), and a
// socket the operating system keeps open may not fail at all; the browser knows sooner:
//   offline: "Reconnecting…" shows at once;
//   online:  the live connection tries again now instead of at its next backoff (a small
//            random wait first, so the tabs of a network coming back do not all return at
//            once), and every followed room catches up — also when the connection survived
//            or was recovered, which says no `connected` again.

import { backoff } from "./api.js";

export function watchNetwork({ bus, live, catchUp }) {
  addEventListener("offline", () => bus.emit("live:status", { state: "reconnecting" }));
  addEventListener("online", () => {
    setTimeout(() => {
      live.retryNow?.();
      // A connection that survived (or is being recovered) says nothing: once the network
      // answers again, it is taken as live until it says otherwise (`disconnected`).
      catchUp.all().then(() => live.connectionId && bus.emit("live:status", { state: "connected" }));
    }, backoff(0, 400));
  });
  if (!navigator.onLine) bus.emit("live:status", { state: "reconnecting" });
}
