// The message box: Enter sends (Shift+Enter is a new line), typing tells the room (at most
// every 3 s, as the server allows), `@` suggests the room's members, `:` emoji and a leading
// `/` the commands through the suggestion surface (suggest.js), a line starting with `/` runs a
// command (once, never retried: a failure leaves it in the box), and the box can be put in
// reply or edit mode by a message action (Escape leaves it). Each room keeps its own draft
// while another room is shown.

import { memberName } from "./message_view.js";
import { createSuggestions } from "./suggest.js";
import { toHtml, toText } from "./text.js";

const TYPING_EVERY_MS = 3000;

export function createComposer({ api, store, outbox, me, bus, roomEmoji }) {
  const form = document.getElementById("composer");
  const input = document.getElementById("composer-input");
  const context = document.getElementById("composer-context");
  const suggestions = createSuggestions({ input, listbox: document.getElementById("suggestions") });
  const drafts = new Map();
  let roomId = null;
  let mode = { kind: "new" };
  let lastTyping = 0;
  /** What other modules add to a send (attachments.js): `{fields(roomId) -> object | null
   *  (throws to hold the send), fallbackText?(roomId), sent?(roomId)}`. */
  const parts = [];

  suggestions.addSource({
    id: "mentions",
    trigger: "@",
    find(query) {
      const q = query.toLowerCase();
      return [...store.members(roomId).values()]
        .filter((m) => m.userId !== me.userId)
        .filter((m) => m.userId.toLowerCase().startsWith(q) || (m.nickname ?? m.name).toLowerCase().startsWith(q))
        .map((m) => ({ id: m.userId, label: m.nickname ?? m.name, detail: `@${m.userId}`, value: `@${m.userId}` }));
    },
  });

  const commands = new Map();
  bus.on("room:open", ({ roomId: opened }) => commands.delete(opened));
  suggestions.addSource({
    id: "commands",
    trigger: "/",
    atStart: true,
    async find(query) {
      if (!roomId) return [];
      // The room's commands (built in and its own), read once each time a room is opened.
      if (!commands.has(roomId)) {
        const room = roomId;
        commands.set(room, api.listCommands(room).catch(() => (commands.delete(room), [])));
      }
      const q = query.toLowerCase();
      const room = roomId;
      const listed = await commands.get(room);
      if (room !== roomId) return [];
      return listed
        .filter((c) => c.name.startsWith(q))
        .map((c) => ({ id: c.name, label: `/${c.name}`, detail: c.usage, value: `/${c.name}` }));
    },
  });

  // Emoji by shortcode, from two characters on; each prefix asked once.
  const emoji = new Map();
  suggestions.addSource({
    id: "emoji",
    trigger: ":",
    async find(query) {
      if (query.length < 2 || !/^[a-z0-9_+-]+$/i.test(query)) return [];
      if (!emoji.has(query)) emoji.set(query, api.suggestEmoji(query).catch(() => (emoji.delete(query), [])));
      const room = roomId;
      const [own, standard] = await Promise.all([room ? roomEmoji.list(room) : new Map(), emoji.get(query)]);
      if (room !== roomId) return [];
      const q = query.toLowerCase();
      // The room's own first: its `:name:` is written out, and the server marks it.
      return [...own.values()]
        .filter((e) => e.name.startsWith(q))
        .slice(0, 8)
        .map((e) => ({ id: `room:${e.name}`, label: `:${e.name}:`, detail: "this room's", value: `:${e.name}:` }))
        .concat(standard.map((e) => ({ id: e.shortcode, label: `${e.emoji} :${e.shortcode}:`, detail: e.name, value: e.emoji })));
    },
  });

  /** The command line that failed last: sent again as it was, it keeps its clientId, so a run
   *  whose answer was lost does not run twice. */
  let failed = null;

  // A room's own command's handler answering later, for this member's eyes only.
  bus.on("live:command.answered", ({ command, html }) => bus.emit("notice", { text: `/${command}: ${toText(html)}` }));

  /** Runs a command line once; a failure leaves the line in the box (unless it holds another). */
  async function runCommand(text) {
    const room = roomId;
    const clientId = failed?.room === room && failed.text === text ? failed.clientId : crypto.randomUUID();
    input.value = "";
    resize();
    try {
      const outcome = await api.runCommand(room, { text: text.trim(), clientId });
      failed = null;
      if (outcome.message) store.upsertMessages(room, [outcome.message]);
      // What a room's own command answered only to the caller: shown, never stored.
      const said = outcome.ephemeral ? toText(outcome.ephemeral) : outcome.result;
      bus.emit("notice", { text: `/${outcome.command}: ${said}` });
    } catch (e) {
      failed = { room, text, clientId };
      if (roomId === room && !input.value) input.value = text;
      else if (roomId !== room && !drafts.get(room)) drafts.set(room, text);
      resize();
      bus.emit("notice", { text: `Command failed: ${e.message}` });
    }
  }

  function setMode(next) {
    mode = next;
    context.hidden = mode.kind === "new";
    context.replaceChildren();
    if (mode.kind === "new") return;
    const label = document.createElement("span");
    label.textContent =
      mode.kind === "edit" ? "Editing message" : `Replying to ${memberName(store, roomId, mode.message.authorId, mode.message.authorName)}: ${toText(mode.message.text).slice(0, 60)}`;
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.textContent = "Cancel";
    cancel.dataset.testid = "composer-cancel";
    cancel.addEventListener("click", () => {
      if (mode.kind === "edit") input.value = "";
      setMode({ kind: "new" });
      input.focus();
    });
    context.append(label, " ", cancel);
  }

  function resize() {
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, 200)}px`;
  }

  async function submit() {
    let text = input.value;
    if (!roomId) return;
    const extra = {};
    if (mode.kind !== "edit") {
      try {
        for (const part of parts) Object.assign(extra, part.fields(roomId) ?? {});
      } catch (e) {
        bus.emit("notice", { text: `Not sent yet: ${e.message}` });
        return;
      }
      if (!text.trim() && Object.keys(extra).length) text = parts.map((p) => p.fallbackText?.(roomId) ?? "").filter(Boolean).join(", ");
    }
    if (!text.trim()) return;
    // `/name …` runs a command; `//…` sends the text from its second slash.
    if (mode.kind === "new" && !Object.keys(extra).length && /^\s*\/(?!\/)/.test(text)) return runCommand(text);
    if (mode.kind === "new" && /^\s*\/\//.test(text)) text = text.replace("//", "/");
    const html = toHtml(text, (id) => store.members(roomId).has(id));
    const current = mode;
    input.value = "";
    resize();
    setMode({ kind: "new" });
    if (current.kind === "edit") {
      try {
        const message = await api.editMessage(roomId, current.message.id, text, "markdown");
        store.upsertMessages(roomId, [message]);
      } catch (e) {
        input.value = text;
        bus.emit("notice", { text: `Could not edit: ${e.message}` });
      }
      return;
    }
    // What is typed is Markdown, rendered by the server; `html` only shows it while pending.
    const fields = { text, format: "markdown", ...extra };
    outbox.send(roomId, { text: html, replyTo: current.kind === "reply" ? current.message.id : null, author: me, fields });
    for (const part of parts) part.sent?.(roomId);
  }

  input.addEventListener("keydown", (event) => {
    if (suggestions.handleKey(event)) return;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    } else if (event.key === "Escape" && mode.kind !== "new") {
      event.preventDefault();
      if (mode.kind === "edit") input.value = "";
      setMode({ kind: "new" });
    }
  });
  input.addEventListener("input", () => {
    resize();
    const now = Date.now();
    if (roomId && input.value.trim() && now - lastTyping > TYPING_EVERY_MS) {
      lastTyping = now;
      api.typing(roomId).catch(() => {});
    }
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });

  return {
    /** Shows the composer for `id`, keeping the previous room's draft. */
    setRoom(id) {
      if (roomId) drafts.set(roomId, input.value);
      // The pause between typing signals is per room: typing in another room is news there.
      if (id !== roomId) lastTyping = 0;
      roomId = id;
      form.hidden = !id;
      input.value = drafts.get(id) ?? "";
      setMode({ kind: "new" });
      resize();
    },
    reply(message) {
      setMode({ kind: "reply", message });
      input.focus();
    },
    edit(message) {
      setMode({ kind: "edit", message });
      input.value = message.source ?? toText(message.text);
      resize();
      input.focus();
      input.setSelectionRange(input.value.length, input.value.length);
    },
    focus() {
      input.focus();
    },
    suggestions,
    parts,
  };
}
