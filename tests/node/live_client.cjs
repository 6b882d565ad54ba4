// Drives the official @azure/web-pubsub-client (its default, reliable subprotocol) against a
// negotiated URL, for tests/api/web_pubsub_client.rs. Usage:
//   node live_client.cjs <url>
// Prints one JSON line per event: connected (with the connection id), each server message,
// and for each "join <group>" line read from stdin, joined or refused; exits when stdin closes.
const { WebPubSubClient } = require("@azure/web-pubsub-client");
const readline = require("node:readline");

const [url] = process.argv.slice(2);
const say = (line) => console.log(JSON.stringify(line));

async function main() {
  const client = new WebPubSubClient(url);
  client.on("connected", (e) => say({ event: "connected", userId: e.userId, connectionId: e.connectionId }));
  client.on("server-message", (e) => say({ event: "server-message", data: e.message.data }));
  await client.start();
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    const [command, group] = line.trim().split(" ");
    if (command !== "join") continue;
    try {
      await client.joinGroup(group);
      say({ event: "joined", group });
    } catch (e) {
      say({ event: "refused", group, error: e.errorDetail ? e.errorDetail.name : String(e) });
    }
  }
  client.stop();
  process.exit(0);
}

main().catch((e) => {
  say({ event: "error", error: String(e) });
  process.exit(1);
});
