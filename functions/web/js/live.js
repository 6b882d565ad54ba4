// The one live connection of this tab, through the official Web PubSub client (its browser
// build, bundled in ../vendor/). The URL comes from `POST /api/negotiate`, on the local server
// and on a Functions deployment alike. Once connected, the page tells the server which room it
// shows (`PUT /api/live/view` with the connection id, retried while it answers 409: on Azure
// the server learns of the connection through an event that may come after `connected`).
//
// Every signal the server sends is said on the bus as `live:<type>` with its data
// (message.created, message.updated, message.deleted, message.reacted, message.pinned,
// message.voted, message.previewed, typing, read, room.activity, presence, …), so a new
// feature adds a handler with `bus.on("live:<type>", fn)` and nothing here changes.
//
// On a drop the client reconnects by itself; the page shows "Reconnecting…" meanwhile. If it
// gives up (`stopped`), this module starts it again with growing waits and jitter (backoff in
// api.js). Each new connection says `live:connected` with `reconnected: true` after the
// first, and `live:viewing` once the server knows the room it shows: catching up (the change
// feed) hooks in there, so the listener is attached before the catch-up reads.

import { WebPubSubClient } from "../vendor/web-pubsub-client.js";
import { backoff } from "./api.js";

export function createLive({ api, bus }) {
  let client = null;
  let connectionId = null;
  let shown = null;
  let connections = 0;
  let restarts = 0;
  let stopping = false;
  let timer = null;

  const status = (state) => bus.emit("live:status", { state });

  async function tellView() {
    const id = connectionId;
    for (let attempt = 0; id && id === connectionId && attempt < 12; attempt++) {
      try {
        await api.viewRoom(id, shown);
        return;
      } catch (e) {
        // 409: the server has not yet heard of this connection (Azure); a 404: it closed.
        if (e.status !== 409 && !e.transient) return;
        await new Promise((r) => setTimeout(r, backoff(attempt, 200, 3000)));
      }
    }
  }

  function open() {
    client = new WebPubSubClient(
      { getClientAccessUrl: async () => (await api.negotiate()).url },
      // The client's own reconnect is off: its waits have no randomness, and we want
      // some so that many browsers do not return at once; every try is `schedule`'s (jitter).
      { autoReconnect: false, reconnectRetryOptions: { maxRetries: 8, retryDelayInMs: 500, maxRetryDelayInMs: 8000, mode: "Exponential" } },
    );
    client.on("connected", (e) => {
      connectionId = e.connectionId;
      restarts = 0;
      status("connected");
      const reconnected = connections++ > 0;
      bus.emit("live:connected", { connectionId, reconnected });
      // Catching up waits for the view: a message committed before the server knows this
      // connection shows the room is viewed reaches the page only through the read that follows.
      tellView().then(() => bus.emit("live:viewing", { connectionId, reconnected, roomId: shown }));
    });
    client.on("disconnected", () => {
      connectionId = null;
      if (!stopping) status("reconnecting");
    });
    client.on("stopped", () => {
      connectionId = null;
      schedule();
    });
    client.on("server-message", (e) => {
      const data = e.message?.data;
      if (data && typeof data === "object" && typeof data.type === "string") bus.emit(`live:${data.type}`, data);
    });
    return client.start();
  }

  /** One next try at a time, whether `stopped` or a failed start asks for it. */
  function schedule() {
    if (timer || stopping) return;
    status("reconnecting");
    timer = setTimeout(() => {
      timer = null;
      restart();
    }, backoff(restarts++, 1000, 30000));
  }

  async function restart() {
    try {
      await open();
    } catch {
      // negotiate or the socket failed before the client said anything.
      schedule();
    }
  }

  return {
    start() {
      status("connecting");
      return restart();
    },
    /** Shows `roomId` (null: none): the server sends its full messages to this connection.
     *  Resolves once the server knows (or gave up): the room is read after that, never before,
     *  so no message falls between the read and the listener. */
    show(roomId) {
      shown = roomId;
      return tellView();
    },
    /** The network is back (network.js): a try that waits for its backoff runs now. */
    retryNow() {
      if (!timer || stopping) return;
      clearTimeout(timer);
      timer = null;
      restarts = 0;
      restart();
    },
    get connectionId() {
      return connectionId;
    },
    stop() {
      stopping = true;
      client?.stop();
    },
  };
}
