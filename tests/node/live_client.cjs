// Drives the official @azure/web-pubsub-client (its default, reliable subprotocol) against a
// negotiated URL, for tests/api/web_pubsub_client.rs. Usage:
//   node live_client.cjs <url> <room group> <foreign group>
// Prints one JSON line per event: connected, joined, refused (the foreign group), and each
// server message; exits when stdin closes.
const { WebPubSubClient } = require("@azure/web-pubsub-client");

const [url, group, foreign] = process.argv.slice(2);
const say = (line) => console.log(JSON.stringify(line));

async function main() {
  const client = new WebPubSubClient(url);
  client.on("connected", (e) => say({ event: "connected", userId: e.userId }));
  client.on("server-message", (e) => say({ event: "server-message", data: e.message.data }));
  await client.start();
  await client.joinGroup(group);
  say({ event: "joined", group });
  try {
    await client.joinGroup(foreign);
    say({ event: "joined-foreign", group: foreign });
  } catch (e) {
    say({ event: "refused", group: foreign, error: e.errorDetail ? e.errorDetail.name : String(e) });
  }
  process.stdin.on("end", () => {
    client.stop();
    process.exit(0);
  });
  process.stdin.resume();
}

main().catch((e) => {
  say({ event: "error", error: String(e) });
  process.exit(1);
});
