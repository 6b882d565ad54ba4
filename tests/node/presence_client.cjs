// Drives the official @azure/web-pubsub-client (its default, reliable subprotocol) for
// tests/api/presence.rs: one browser tab. Usage:
//   node presence_client.cjs <url>
// Prints one JSON line per event: connected (with the connection id, which the test hands to
// PUT /api/live/view, as a client says which room it shows: tokens join no group themselves)
// and each server message; closes the connection (client.stop(), as a tab closing does) and
// exits when stdin closes.
const { WebPubSubClient } = require("@azure/web-pubsub-client");

const [url] = process.argv.slice(2);
const say = (line) => console.log(JSON.stringify(line));

async function main() {
  const client = new WebPubSubClient(url);
  client.on("connected", (e) => say({ event: "connected", userId: e.userId, connectionId: e.connectionId }));
  client.on("server-message", (e) => say({ event: "server-message", data: e.message.data }));
  await client.start();
  process.stdin.on("end", () => {
    client.stop();
    setTimeout(() => process.exit(0), 200);
  });
  process.stdin.resume();
}

main().catch((e) => {
  say({ event: "error", error: String(e) });
  process.exit(1);
});
