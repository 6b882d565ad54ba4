// Threads, pins, polls, attachments, presence, search and the room's emoji, wired to the page's parts (app.js hands
// them over once, after its own modules). Each feature is its own module and reaches the
// others only through the hooks the shared modules offer: message actions (actions.js), parts
// drawn under a message and what decides its redraw (message_view.js), parts of a send
// (composer.js), the sidebar's sections and decorations (rooms.js), the side panel (panel.js)
// and the bus.

import { addAttachments } from "./attachments.js";
import { addEmojiTools } from "./emoji_tools.js";
import { addFeatureApi } from "./feature_api.js";
import { keyParts, messageParts } from "./message_view.js";
import { createPanel } from "./panel.js";
import { addPins } from "./pins.js";
import { addPolls } from "./polls.js";
import { addPresence } from "./presence.js";
import { addSearch } from "./search.js";
import { addThreads } from "./threads.js";

export function addFeatures({ api, store, bus, ctx, actions, sidebar, dialogs, composer }) {
  addFeatureApi(api);
  const panel = createPanel();
  const shared = { api, store, bus, ctx, actions, sidebar, dialogs, panel, messageParts, keyParts };
  const threads = addThreads(shared);
  const pins = addPins(shared);
  const polls = addPolls(shared);
  const attachments = addAttachments({ ...shared, composerParts: composer.parts });
  const presence = addPresence(shared);
  const search = addSearch(shared);
  addEmojiTools(shared);
  return { panel, threads, pins, polls, attachments, presence, search };
}
