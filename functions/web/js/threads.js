// Threads. A message's "Thread" action (and a root's "N replies" button) opens its thread in
// the side panel: the root, its replies oldest first (readThread, a page at a time), and a box
// that replies in the thread — a send through the outbox with `replyTo` the root, so it is
// retried with its clientId like any other; the server files a reply to a reply under the root.
//
// Replies come in live through the store: every stored message the page learns of (a live
// signal, a send's own answer, a reaction's re-read) is said as `timeline:changed`, and one
// whose `threadId` is the open root is upserted into the panel by version (docs/CATCHUP.md), so a reply
// that arrives twice shows once and an edit or a delete replaces it. The replies the outbox
// still holds show under them as pending until their stored copy comes.
//
// A root's reply count is companion data that no signal carries, so a new reply seen live
// has its root read again (once per burst). The threads the person follows (listMyThreads) are
// a sidebar section with their unread replies; opening one marks it read.

import { byAge } from "./store.js";
import { messageElement, namesTracker, pendingElement, renderKey } from "./message_view.js";
import { roomHref } from "./router.js";
import { toHtml, toText } from "./text.js";

const PAGE = 50;
const REREAD_ROOT_MS = 300;

export function addThreads({ api, store, bus, ctx, panel, sidebar, actions, messageParts, keyParts }) {
  /** The open thread: {roomId, rootId, root, replies: Map, hasMore, cursor, generation}. */
  let open = null;
  let generation = 0;
  let followed = [];
  const drawn = new Map();
  const counted = new Set();
  const rereads = new Map();

  const rootOf = (m) => m.threadId ?? m.id;
  const threadable = (m) => !m.deletedAt && ["Message", "Poll", "Webhook"].includes(m.type);

  actions.add({
    id: "thread",
    label: "Thread",
    when: threadable,
    run: (m, c) => openThread(c.roomId, rootOf(m)),
  });

  keyParts.push((m) => m.thread?.replyCount ?? 0);
  messageParts.push((m) => {
    const count = m.thread?.replyCount ?? 0;
    if (!count || m.deletedAt) return null;
    const b = document.createElement("button");
    b.type = "button";
    b.className = "thread-summary";
    b.dataset.testid = "thread-summary";
    b.textContent = `${count} ${count === 1 ? "reply" : "replies"}`;
    b.setAttribute("aria-label", `${count} ${count === 1 ? "reply" : "replies"}: open the thread`);
    b.addEventListener("click", () => openThread(m.roomId, m.id));
    return b;
  });

  // ---- the panel

  let list;
  let more;
  let input;
  let follow;

  function render(body) {
    const rootBox = document.createElement("div");
    rootBox.className = "thread-root";
    rootBox.dataset.testid = "thread-root";
    list = document.createElement("ol");
    list.className = "messages thread-replies";
    list.dataset.testid = "thread-replies";
    list.setAttribute("role", "log");
    list.setAttribute("aria-live", "polite");
    list.setAttribute("aria-label", "Replies");
    more = document.createElement("button");
    more.type = "button";
    more.textContent = "Show more replies";
    more.dataset.testid = "thread-more";
    more.hidden = true;
    more.addEventListener("click", () => loadPage());
    follow = document.createElement("button");
    follow.type = "button";
    follow.dataset.testid = "thread-follow";
    follow.addEventListener("click", toggleFollow);

    const form = document.createElement("form");
    form.className = "thread-composer";
    form.dataset.testid = "thread-composer";
    const label = document.createElement("label");
    label.htmlFor = "thread-input";
    label.className = "visually-hidden";
    label.textContent = "Reply in thread";
    input = document.createElement("textarea");
    input.id = "thread-input";
    input.rows = 2;
    input.placeholder = "Reply in thread";
    input.dataset.testid = "thread-input";
    const send = document.createElement("button");
    send.type = "submit";
    send.textContent = "Reply";
    send.dataset.testid = "thread-send";
    form.append(label, input, send);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      reply();
    });
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        reply();
      }
    });
    body.append(follow, rootBox, list, more, form);
  }

  function element(m) {
    const el = messageElement(m, ctx);
    // The same message may be in the timeline too: the panel's copy has its own id and name.
    el.id = `thread-m-${m.id}`;
    el.dataset.testid = "thread-message";
    return el;
  }

  // Authors and mentions show members' names as they are now: a changed name redraws.
  const names = namesTracker(store);
  bus.on("members:changed", ({ roomId }) => {
    if (open && roomId === open.roomId && names.changed(roomId)) draw();
  });

  function draw() {
    if (!open || !panel.is("thread", open.rootId)) return;
    const rootBox = panel.body.querySelector(".thread-root");
    const root = store.message(open.roomId, open.rootId) ?? open.root;
    if (root) {
      const key = renderKey(root, []) + `|n${names.version}`;
      if (rootBox.dataset.key !== key) {
        rootBox.dataset.key = key;
        const el = element(root);
        el.dataset.testid = "thread-root-message";
        rootBox.replaceChildren(el);
      }
    }
    const ids = [...open.replies.keys()].sort(byAge);
    const children = ids.map((id) => {
      const m = open.replies.get(id);
      const key = renderKey(m, []) + `|n${names.version}`;
      let entry = drawn.get(id);
      if (!entry || entry.key !== key) {
        entry = { key, el: element(m) };
        drawn.set(id, entry);
      }
      return entry.el;
    });
    const inThread = new Set([open.rootId, ...ids]);
    const pending = store
      .pending(open.roomId)
      .filter((p) => p.replyTo && inThread.has(p.replyTo))
      .map((p) => {
        const el = pendingElement(p, ctx);
        el.dataset.testid = "thread-message";
        return el;
      });
    list.replaceChildren(...children, ...pending);
    list.dataset.count = ids.length;
    more.hidden = !open.hasMore;
    follow.textContent = isFollowed(open.rootId) ? "Unfollow thread" : "Follow thread";
    follow.setAttribute("aria-pressed", String(isFollowed(open.rootId)));
  }

  /** Keeps `m` in the open thread unless a newer version is held. */
  function take(m) {
    if (!open || m.roomId !== open.roomId) return false;
    if (m.id === open.rootId) {
      if (!open.root || open.root.version <= m.version) open.root = m;
      return true;
    }
    if (m.threadId !== open.rootId) return false;
    const held = open.replies.get(m.id);
    if (held && held.version > m.version) return false;
    open.replies.set(m.id, m);
    return true;
  }

  async function loadPage() {
    const thread = open;
    if (!thread) return;
    const mine = generation;
    try {
      const page = await api.readThread(thread.roomId, thread.rootId, { cursor: thread.cursor, limit: PAGE });
      if (mine !== generation) return;
      take(page.root);
      for (const m of page.replies) take(m);
      thread.hasMore = page.hasMore;
      thread.cursor = page.nextCursor;
      draw();
    } catch (e) {
      if (mine === generation) bus.emit("notice", { text: `Could not load the thread: ${e.message}` });
    }
  }

  async function openThread(roomId, rootId) {
    generation++;
    drawn.clear();
    open = { roomId, rootId, root: store.message(roomId, rootId) ?? null, replies: new Map(), hasMore: false, cursor: null };
    const root = open.root;
    panel.open({
      id: rootId,
      kind: "thread",
      title: root ? `Thread: ${toText(root.text || root.poll?.question || "").slice(0, 40) || root.authorName}` : "Thread",
      render,
      onClose: () => {
        open = null;
        generation++;
        drawn.clear();
      },
    });
    draw();
    input.focus();
    await loadPage();
    if (isFollowed(rootId)) api.markThreadRead(roomId, rootId).then(loadFollowed, () => {});
  }

  function reply() {
    if (!open) return;
    const text = input.value;
    if (!text.trim()) return;
    const html = toHtml(text, (id) => store.members(open.roomId).has(id));
    input.value = "";
    // Markdown, rendered by the server; `html` only shows it while pending.
    ctx.outbox.send(open.roomId, { text: html, replyTo: open.rootId, author: ctx.me, fields: { text, format: "markdown" } });
  }

  // ---- following

  const isFollowed = (rootId) => followed.some((t) => t.root.id === rootId);

  // Loads overlap (a reply seen, a focus): an answer older than the one shown is dropped.
  let loadsStarted = 0;
  let loadShown = 0;
  async function loadFollowed() {
    const load = ++loadsStarted;
    let found;
    try {
      found = await api.listMyThreads();
    } catch {
      return;
    }
    if (load < loadShown) return;
    loadShown = load;
    followed = found;
    sidebar.draw();
    draw();
  }

  async function toggleFollow() {
    if (!open) return;
    const { roomId, rootId } = open;
    const was = followed;
    const on = !isFollowed(rootId);
    // Optimistic, with revert: the button flips now and flips back if the server refuses.
    followed = on
      ? [...followed, { roomId, root: store.message(roomId, rootId) ?? open.root, unreadReplies: 0, unreadCapped: false }]
      : followed.filter((t) => t.root.id !== rootId);
    draw();
    try {
      await (on ? api.followThread(roomId, rootId) : api.unfollowThread(roomId, rootId));
      await loadFollowed();
    } catch (e) {
      followed = was;
      draw();
      sidebar.draw();
      bus.emit("notice", { text: `Could not ${on ? "follow" : "unfollow"} the thread: ${e.message}` });
    }
  }

  sidebar.addSection({
    id: "threads",
    title: "Threads",
    order: 30,
    hideWhenEmpty: true,
    items: () => followed.filter((t) => t.root),
    renderItem(t) {
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = roomHref(t.roomId, t.root.id);
      a.className = "room-link";
      a.dataset.testid = "thread-link";
      a.dataset.rootId = t.root.id;
      const name = document.createElement("span");
      name.className = "room-name";
      name.textContent = toText(t.root.text || t.root.poll?.question || "").slice(0, 60) || t.root.authorName;
      a.append(name);
      if (t.unreadReplies > 0) {
        a.classList.add("unread");
        const badge = document.createElement("span");
        badge.className = "badge";
        badge.dataset.testid = "thread-unread";
        const count = `${t.unreadReplies}${t.unreadCapped ? "+" : ""}`;
        badge.textContent = count;
        badge.setAttribute("aria-label", `${count} unread replies`);
        a.append(badge);
      }
      a.addEventListener("click", () => {
        // The permalink opens the room at the root; the thread opens beside it.
        setTimeout(() => openThread(t.roomId, t.root.id), 0);
      });
      li.append(a);
      return li;
    },
  });

  // ---- live

  function rereadRoot(roomId, rootId) {
    const key = `${roomId}/${rootId}`;
    if (rereads.has(key)) return;
    rereads.set(
      key,
      setTimeout(async () => {
        rereads.delete(key);
        if (!store.message(roomId, rootId)) return;
        try {
          store.upsertMessages(roomId, [await api.getMessage(roomId, rootId)]);
        } catch {
          // Gone or unreachable: the next read shows its count.
        }
      }, REREAD_ROOT_MS),
    );
  }

  bus.on("timeline:changed", ({ roomId, changed }) => {
    let mine = false;
    for (const m of changed ?? []) {
      if (take(m)) mine = true;
      if (m.threadId && m.threadId !== m.id && !counted.has(m.id)) {
        counted.add(m.id);
        if (!m.deletedAt && store.message(roomId, m.threadId)) rereadRoot(roomId, m.threadId);
        // A reply of one's own follows the thread (the server does that); one in the open
        // thread is read as it arrives.
        if (open?.rootId === m.threadId && isFollowed(m.threadId)) api.markThreadRead(roomId, m.threadId).then(loadFollowed, () => {});
        else if (isFollowed(m.threadId) || m.authorId === ctx.me.userId) loadFollowed();
      }
    }
    // Pending entries change without stored messages: redraw for them too.
    if (open && roomId === open.roomId && (mine || !changed?.length)) draw();
  });
  bus.on("live:message.deleted", ({ roomId, messageId }) => {
    const held = open?.roomId === roomId && open.replies.get(messageId);
    if (held && !store.message(roomId, messageId)) {
      open.replies.set(messageId, { ...held, text: "", deletedAt: new Date().toISOString(), version: held.version + 1 });
      draw();
    }
  });
  bus.on("room:open", ({ roomId }) => {
    if (open && open.roomId !== roomId) panel.close();
  });
  bus.on("live:connected", ({ reconnected }) => {
    if (!reconnected) return;
    loadFollowed();
    if (open) {
      open.cursor = null;
      loadPage();
    }
  });
  addEventListener("focus", loadFollowed);
  loadFollowed();

  return {
    open: openThread,
    /** `{roomId, rootId}` of the open thread, or null (weboff keeps it across a reconnect). */
    get current() {
      return open && { roomId: open.roomId, rootId: open.rootId };
    },
    replyIds: () => (open ? [...open.replies.keys()].sort(byAge) : []),
  };
}
