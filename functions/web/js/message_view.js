// One message as an element of the timeline, drawn from its data alone: author, time, text
// (sanitized HTML for members' and webhooks' messages, plain text for the server's lines),
// "(edited)", what it replies to, reactions (toggle buttons), seen-ticks on the caller's own
// messages, and its actions toolbar (actions.js). A pending send (outbox.js) is drawn the
// same way with its state. Threads, pins, polls and attachments add their parts here.

import { QUICK_REACTIONS, toggleReaction } from "./actions.js";
import { fragment, toText } from "./text.js";

const HTML_TYPES = new Set(["Message", "Webhook"]);
const time = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const day = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

/** Parts other modules draw under a message's body (polls, attachments, threads, pins):
 *  each `(message, ctx) => Element | null`. */
export const messageParts = [];
/** What those parts add to the redraw key (companion data that keeps its version: votes,
 *  a thread's reply count): each `(message) => string`. */
export const keyParts = [];

/** What decides whether a drawn message must be drawn again. */
export function renderKey(m, seenBy) {
  // The origin too: a copy from the change feed of an older server, or an older cache, may
  // lack it, and the author's actions depend on it.
  return `${m.version}|${m.origin ?? ""}|${JSON.stringify(m.reactions ?? [])}|${m.isPinned ?? ""}|${seenBy.join(",")}|${m.deletedAt ?? ""}` +
    keyParts.map((k) => `|${k(m)}`).join("");
}

/** A member's name as shown: their nickname or display name in the room now, else the name
 *  the message carries, else their id. */
export function memberName(store, roomId, userId, carried) {
  const member = store.members(roomId).get(userId);
  return member?.nickname || member?.name || carried || userId;
}

/**
 * The names a view draws, as a version: `changed(roomId)` is true (and `version` one more)
 * when a room's member list names someone otherwise than when last asked. A view adds
 * `|n${version}` to its render keys and draws again when it changed.
 */
export function namesTracker(store) {
  let seen = "";
  return {
    version: 0,
    changed(roomId) {
      const now = [...store.members(roomId).values()].map((m) => `${m.userId}:${m.nickname || m.name}`).join("|");
      if (now === seen) return false;
      seen = now;
      this.version += 1;
      return true;
    },
  };
}

const nameOf = (ctx, roomId, userId, carried) => memberName(ctx.store, roomId, userId, carried);

/** A message's HTML, its mentions of members by their names (the id stays in the title) and
 *  the room's own emoji by their images. */
function withNames(html, ctx, roomId) {
  const shown = fragment(html);
  for (const span of shown.querySelectorAll('span[data-type="emoji"]')) ctx.roomEmoji?.show(span, roomId);
  for (const span of shown.querySelectorAll('span[data-type="mention"]')) {
    const id = span.dataset.id;
    if (!id || id.startsWith("@") || span.dataset.mentionType === "role") continue;
    span.textContent = `@${nameOf(ctx, roomId, id, null)}`;
    span.title = `@${id}`;
  }
  return shown;
}

export function messageElement(m, ctx) {
  const li = document.createElement("li");
  li.className = "message";
  li.id = `m-${m.id}`;
  li.tabIndex = -1;
  li.dataset.testid = "message";
  li.dataset.messageId = m.id;
  li.dataset.authorId = m.authorId;
  li.dataset.version = m.version;
  if (m.authorId === ctx.me.userId) li.classList.add("mine");

  const meta = document.createElement("div");
  meta.className = "message-meta";
  const author = document.createElement("span");
  author.className = "author";
  author.dataset.testid = "message-author";
  author.textContent = nameOf(ctx, m.roomId, m.authorId, m.authorName);
  const when = document.createElement("time");
  when.dateTime = m.createdAt;
  when.title = day.format(new Date(m.createdAt));
  when.textContent = time.format(new Date(m.createdAt));
  meta.append(author, " ", when);
  if (m.editedAt && !m.deletedAt) {
    const edited = document.createElement("span");
    edited.className = "edited";
    edited.dataset.testid = "edited";
    edited.textContent = " (edited)";
    meta.append(edited);
  }
  li.append(meta);

  if (m.replyTo && !m.deletedAt) {
    const ref = document.createElement("a");
    ref.className = "reply-ref";
    ref.dataset.testid = "reply-ref";
    ref.href = `#/rooms/${m.roomId}/messages/${m.replyTo}`;
    const parent = ctx.store.message(m.roomId, m.replyTo);
    ref.textContent = parent
      ? `↪ ${nameOf(ctx, m.roomId, parent.authorId, parent.authorName)}: ${toText(parent.text).slice(0, 80) || "…"}`
      : "↪ in reply to an earlier message";
    li.append(ref);
  }

  const body = document.createElement("div");
  body.className = "message-body";
  body.dataset.testid = "message-text";
  if (m.deletedAt) {
    li.dataset.deleted = "true";
    body.classList.add("deleted");
    body.textContent = m.moderated ? "This message was removed by a moderator." : "This message was deleted.";
  } else if (HTML_TYPES.has(m.type)) {
    body.append(withNames(m.text, ctx, m.roomId));
  } else if (m.type === "Poll" && m.poll) {
    body.textContent = `📊 ${m.poll.question}`;
  } else {
    li.classList.add("server-line");
    body.textContent = m.text;
  }
  li.append(body);
  for (const part of messageParts) {
    const el = part(m, ctx);
    if (el) li.append(el);
  }

  if (!m.deletedAt && m.reactions?.length) {
    const row = document.createElement("div");
    row.className = "reactions";
    row.dataset.testid = "reactions";
    for (const r of m.reactions) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "reaction";
      b.dataset.testid = "reaction";
      b.dataset.emoji = r.emoji;
      b.setAttribute("aria-pressed", String(r.me));
      b.setAttribute("aria-label", `${r.emoji} ${r.count}${r.me ? ", including you" : ""}`);
      b.textContent = `${r.emoji} ${r.count}`;
      b.addEventListener("click", () => toggleReaction(m, r.emoji, ctx).catch(() => {}));
      row.append(b);
    }
    li.append(row);
  }

  if (m.authorId === ctx.me.userId && !m.deletedAt) li.append(seenTicks(ctx.seenBy(m)));

  const tools = ctx.actions.for(m, ctx);
  if (tools.length) li.append(toolbar(m, tools, ctx));
  return li;
}

function seenTicks(seenBy) {
  const status = document.createElement("span");
  status.className = "message-status";
  status.dataset.testid = seenBy.length ? "seen" : "sent";
  status.textContent = seenBy.length ? "✓✓ Seen" : "✓ Sent";
  status.title = seenBy.length ? `Seen by ${seenBy.join(", ")}` : "Sent";
  status.setAttribute("aria-label", status.title);
  return status;
}

function toolbar(m, tools, ctx) {
  const bar = document.createElement("div");
  bar.className = "message-actions";
  bar.setAttribute("role", "toolbar");
  bar.setAttribute("aria-label", "Message actions");
  for (const action of tools) {
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.action = action.id;
    b.dataset.testid = `action-${action.id}`;
    b.textContent = action.label;
    b.addEventListener("click", () => action.run(m, ctx));
    bar.append(b);
  }
  return bar;
}

/** An optimistic entry: its text, and "Sending…", "Retrying…" or the refusal with Retry and Discard. */
export function pendingElement(p, ctx) {
  const li = document.createElement("li");
  li.className = "message mine pending";
  li.dataset.testid = "message";
  li.dataset.pending = "true";
  li.dataset.clientId = p.clientId;
  li.dataset.state = p.state;
  const meta = document.createElement("div");
  meta.className = "message-meta";
  meta.textContent = ctx.me.name;
  const body = document.createElement("div");
  body.className = "message-body";
  body.dataset.testid = "message-text";
  body.append(fragment(p.text));
  const status = document.createElement("span");
  status.className = "message-status";
  status.dataset.testid = "pending-status";
  status.textContent =
    p.state === "failed" ? `Not sent: ${p.error}` : p.state === "retrying" ? "Retrying…" : "Sending…";
  li.append(meta, body, status);
  if (p.state === "failed") {
    for (const [label, run] of [
      ["Retry", () => ctx.outbox.retry(ctx.roomId, p.clientId)],
      ["Discard", () => ctx.outbox.discard(ctx.roomId, p.clientId)],
    ]) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = label;
      b.addEventListener("click", run);
      li.append(" ", b);
    }
  }
  return li;
}

export { QUICK_REACTIONS };
