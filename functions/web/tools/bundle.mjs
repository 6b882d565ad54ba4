// Bundles the official Web PubSub client (@azure/web-pubsub-client, its browser build) into
// ONE ES module, vendor/web-pubsub-client.js, which the page imports. The page needs no other
// build step; this one exists because the package ships as many modules with bare imports.
//
//   node tools/bundle.mjs [NODE_MODULES] [--check]
//
// NODE_MODULES is where `npm ci` installed this folder's package-lock.json (default:
// ./node_modules). With --check it writes nothing and exits 1 when the committed file differs
// from a fresh build (a Rust test runs this under CI). The build is reproducible: the entry
// comes from stdin and paths in the output are relative to NODE_MODULES' parent.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const check = args.includes("--check");
const modules = resolve(args.find((a) => !a.startsWith("--")) ?? join(here, "..", "node_modules"));
const out = join(here, "..", "vendor", "web-pubsub-client.js");

const require = createRequire(join(modules, "noop.js"));
const esbuild = require("esbuild");
const version = require("@azure/web-pubsub-client/package.json").version;

const result = await esbuild.build({
  stdin: {
    contents: 'export { WebPubSubClient } from "@azure/web-pubsub-client";\n',
    resolveDir: dirname(modules),
    sourcefile: "web-pubsub-client.entry.js",
  },
  absWorkingDir: dirname(modules),
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2020",
  minify: true,
  legalComments: "eof",
  banner: { js: `// @azure/web-pubsub-client ${version} (MIT), bundled by functions/web/tools/bundle.mjs with esbuild ${esbuild.version}. Do not edit: run the tool.` },
  define: { "process.env.NODE_ENV": '"production"' },
  write: false,
  logLevel: "error",
});
const built = result.outputFiles[0].text;

if (check) {
  let committed = "";
  try {
    committed = readFileSync(out, "utf8");
  } catch {}
  if (committed !== built) {
    console.error(`${out} is stale: run \`node functions/web/tools/bundle.mjs\` after \`npm ci\` in functions/web, and commit it`);
    process.exit(1);
  }
  console.log(`${out} is up to date (${built.length} bytes)`);
} else {
  writeFileSync(out, built);
  console.log(`wrote ${out} (${built.length} bytes)`);
}
