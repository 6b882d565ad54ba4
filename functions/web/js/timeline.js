// The open room's messages: loads pages by cursor while the top of the list is near the view
// (looked at on every scroll, change and load, and when an observer sees a sentinel above the
// list come near), and keeps only a window of about WINDOW messages near the viewport in the
// DOM, whatever the room holds: the messages above and below the window are spacers of their
// measured (or estimated) height, so the scrollbar stays true and a room of 10,000 messages
// scrolls as lightly as one of 100. When the window moves, the first visible message stays
// where it was on screen (no jump).
//
// It opens at the newest messages, at a permalink (`readMessages?around=`, then newer pages as
// the bottom comes into view), and jumps to the first unread. It marks the room read when its
// newest message is in view and the page is visible.

import { backoff } from "./api.js";
import { byAge } from "./store.js";
import { messageElement, namesTracker, pendingElement, renderKey } from "./message_view.js";

const PAGE = 50;
const WINDOW = 120;
const STEP = 40;
const ESTIMATE = 56;
/** How close to the bottom counts as "at the bottom" (then new messages keep it there). */
const STICK_PX = 48;

export function createTimeline({ api, store, bus, ctx }) {
  const scroller = document.getElementById("timeline");
  const list = document.getElementById("messages");
  const spacerTop = document.getElementById("timeline-spacer-top");
  const spacerBottom = document.getElementById("timeline-spacer-bottom");
  const topEdge = document.getElementById("timeline-top");
  const bottomEdge = document.getElementById("timeline-bottom");
  const jump = document.getElementById("jump-unread");

  let roomId = null;
  /** The window as ids of its first and last message (indices shift as pages come in). */
  let first = null;
  let last = null;
  let loading = null;
  /** While `open` reads a room's first page: its edges are not looked at (it draws anew). */
  let opening = false;
  let lastLoadError = null;
  let stick = true;
  /** The scroll position as last seen by the scroll handler or set by a draw. */
  let seenTop = 0;
  let firstUnread = null;
  let lastReadAt = null;
  let markedUpTo = null;
  /** Whether the window reached the newest loaded message when last drawn. */
  let atEnd = true;
  /** Drawn messages show names: a new member list that changes one draws them again. */
  const names = namesTracker(store);
  const heights = new Map();
  const drawn = new Map();
  let generation = 0;

  const t = () => store.timeline(roomId);
  const isLiveEnd = () => !t().hasNewer;
  const atBottom = () => scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight <= STICK_PX;

  function indices() {
    const order = t().order;
    if (!order.length) return [0, 0];
    let start = first ? order.indexOf(first) : -1;
    let end = last ? order.indexOf(last) + 1 : 0;
    if (start < 0 || end <= 0) {
      end = order.length;
      start = Math.max(0, end - WINDOW);
    }
    return [start, end];
  }

  function setWindow(start, end) {
    const order = t().order;
    start = Math.max(0, Math.min(start, order.length));
    end = Math.max(start, Math.min(end, order.length));
    first = order[start] ?? null;
    last = order[end - 1] ?? null;
  }

  function height(id) {
    return heights.get(id) ?? ESTIMATE;
  }

  /** The first message visible on screen and its distance from the top of the scroller. */
  function anchor() {
    const top = scroller.getBoundingClientRect().top;
    for (const el of list.children) {
      const rect = el.getBoundingClientRect();
      if (rect.bottom > top && el.dataset.messageId) return { id: el.dataset.messageId, offset: rect.top - top };
    }
    return null;
  }

  function draw({ keepAnchor = true } = {}) {
    if (!roomId) return;
    // A scroll up that its scroll event has not told yet (it comes with the next frame): the
    // person left the bottom, so a draw in between must not pull them back to it.
    if (stick && scroller.scrollTop < seenTop - 1 && !atBottom()) stick = false;
    const was = keepAnchor && !stick ? anchor() : null;
    // A keyboard user's focus inside a message (one of its actions, or the message itself)
    // stays where it is however often the room redraws.
    const active = document.activeElement;
    const focusedIn = active && list.contains(active) ? active.closest("[data-message-id]") : null;
    const focusedPart = focusedIn && active !== focusedIn ? active.dataset.testid : null;
    const order = t().order;
    const [start, end] = indices();
    const ids = order.slice(start, end);
    const wanted = new Set(ids);
    // Measure what leaves the DOM, so its spacer keeps its real height.
    for (const [id, entry] of drawn) {
      if (!wanted.has(id)) {
        if (entry.el.isConnected) heights.set(id, entry.el.offsetHeight || height(id));
        entry.el.remove();
        drawn.delete(id);
      }
    }
    const children = [];
    for (const id of ids) {
      const m = t().byId.get(id);
      const seen = m.authorId === ctx.me.userId ? ctx.seenBy(m) : [];
      const key = renderKey(m, seen) + (id === firstUnread ? "|u" : "") + `|n${names.version}`;
      let entry = drawn.get(id);
      if (!entry || entry.key !== key) {
        const el = messageElement(m, ctx);
        if (id === firstUnread) {
          el.classList.add("first-unread");
          el.dataset.firstUnread = "true";
          el.setAttribute("aria-describedby", "unread-divider-label");
        }
        entry?.el.replaceWith(el);
        entry = { el, key };
        drawn.set(id, entry);
      }
      children.push(entry.el);
    }
    const pending = end === order.length && isLiveEnd() ? store.pending(roomId).map((p) => pendingElement(p, ctx)) : [];
    // Only what changed moves: a node taken out of the page, even to be put back, loses the
    // focus it holds.
    let at = list.firstChild;
    for (const node of [...children, ...pending]) {
      if (node === at) at = at.nextSibling;
      else list.insertBefore(node, at);
    }
    while (at) {
      const next = at.nextSibling;
      at.remove();
      at = next;
    }
    if (focusedIn && !focusedIn.isConnected) {
      // Its message was drawn anew (a reaction, an edit): the same action in the new one.
      const now = drawn.get(focusedIn.dataset.messageId)?.el;
      const part = focusedPart && now?.querySelector(`[data-testid="${CSS.escape(focusedPart)}"]`);
      (part || now)?.focus({ preventScroll: true });
    }
    for (const id of ids) heights.set(id, drawn.get(id).el.offsetHeight || height(id));
    let above = 0;
    for (let i = 0; i < start; i++) above += height(order[i]);
    let below = 0;
    for (let i = end; i < order.length; i++) below += height(order[i]);
    spacerTop.style.height = `${above}px`;
    spacerBottom.style.height = `${below}px`;
    atEnd = end === order.length;
    list.dataset.first = start;
    list.dataset.total = order.length;
    if (stick && end === order.length && isLiveEnd()) {
      scroller.scrollTop = scroller.scrollHeight;
    } else if (was) {
      const el = drawn.get(was.id)?.el;
      if (el) scroller.scrollTop += el.getBoundingClientRect().top - scroller.getBoundingClientRect().top - was.offset;
    }
    seenTop = scroller.scrollTop;
    updateJump();
    maybeMarkRead();
  }

  /**
   * Runs `work` unless a load is running (then its promise is the answer): one at a time.
   * Resolves to its error, or null when it went through; a failure is shown as a notice and
   * kept in `lastLoadError`.
   */
  function guarded(work) {
    if (loading) return loading;
    const mine = generation;
    // Set before `work` starts, so nothing it draws can start a second one; a load of a room
    // left meanwhile (`open` let it go) does not end the current one's turn.
    const load = Promise.resolve()
      .then(work)
      .then(
        () => null,
        (e) => {
          if (mine === generation) {
            lastLoadError = e.message;
            bus.emit("notice", { text: `Could not load messages: ${e.message}` });
          }
          return e;
        },
      )
      .finally(() => {
        if (loading === load) loading = null;
      });
    loading = load;
    return load;
  }

  function takePage(page, { older = false, newer = false } = {}) {
    const tl = t();
    store.upsertMessages(roomId, page.messages ?? []);
    if (older) {
      tl.hasOlder = page.hasMore;
      tl.olderCursor = page.nextCursor;
    }
    if (newer) {
      tl.hasNewer = page.hasMore;
      tl.newerCursor = page.nextCursor;
    }
  }

  async function loadLatest() {
    const mine = generation;
    const page = await api.readMessages(roomId, { limit: PAGE });
    if (mine !== generation) return;
    store.resetTimeline(roomId);
    takePage(page, { older: true });
    t().loaded = true;
  }

  async function loadOlder() {
    const tl = t();
    if (!tl.hasOlder) return false;
    const mine = generation;
    const page = await api.readMessages(roomId, { cursor: tl.olderCursor, limit: PAGE, order: "desc" });
    // A page of a copy read afresh meanwhile (the room was opened again) would leave a hole.
    if (mine !== generation || t() !== tl) return false;
    takePage(page, { older: true });
    return true;
  }

  async function loadNewer() {
    const tl = t();
    if (!tl.hasNewer) return false;
    const mine = generation;
    const page = await api.readMessages(roomId, { cursor: tl.newerCursor, limit: PAGE, order: "asc" });
    if (mine !== generation || t() !== tl) return false;
    takePage(page, { newer: true });
    return true;
  }

  async function loadAround(messageId) {
    const mine = generation;
    const page = await api.readAround(roomId, messageId, PAGE);
    if (mine !== generation) return;
    store.resetTimeline(roomId);
    const tl = t();
    store.upsertMessages(roomId, page.messages);
    tl.hasOlder = page.hasOlder;
    tl.olderCursor = page.olderCursor;
    tl.hasNewer = page.hasNewer;
    tl.newerCursor = page.newerCursor;
    tl.loaded = true;
  }

  // When to move the window or load a page: whenever an edge is within MARGIN of the view
  // and more lies beyond it. The observer on the sentinels speaks only when one enters or
  // leaves that margin, so it cannot be the only ear: after a draw the edge may still be
  // near (a short page, a tall screen, an anchor kept within the margin), and a scroll to
  // the top that begins inside the margin changes nothing it watches — the window then
  // stayed put for good (scroll-back stalled under a loaded run). So every scroll, every
  // observer call and the end of every load look at the edges again, from the same
  // geometry; `guarded` keeps it to one load at a time.
  const MARGIN = 400;
  const nearTop = () => scroller.scrollTop < MARGIN;
  const nearBottom = () => scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < MARGIN;
  const moreAbove = () => indices()[0] > 0 || t().hasOlder;
  const moreBelow = () => indices()[1] < t().order.length || t().hasNewer;
  /** At the bottom of the live end: new messages keep the view there. */
  const pinned = () => atBottom() && isLiveEnd() && indices()[1] === t().order.length;

  /** Moves the window up (or loads an older page) when the top comes into view. */
  function onTop() {
    return guarded(async () => {
      // Near the top and at the bottom at once is a room shorter than the screen: it stays
      // at its newest messages as older ones come in above.
      if (!atBottom()) stick = false;
      const [start, end] = indices();
      if (start === 0 && !(await loadOlder())) return;
      const [s] = indices();
      const from = Math.max(0, s - STEP);
      // The same last message; the window is cut to WINDOW below only where the bottom is out
      // of reach (on a screen taller than the window, cutting there would undo onBottom).
      const to = end + (s - start);
      setWindow(from, nearBottom() ? to : Math.min(to, from + WINDOW));
      draw();
    });
  }

  /** Moves the window down (or loads a newer page after a jump) when the bottom comes into view. */
  function onBottom() {
    return guarded(async () => {
      const [start, end] = indices();
      if (end === t().order.length && !(await loadNewer())) return;
      const to = Math.min(t().order.length, end + STEP);
      setWindow(nearTop() ? start : Math.max(start, to - WINDOW), to);
      draw();
      // Back at the live end after a jump into the past: new messages keep the view there.
      stick = pinned();
      maybeMarkRead();
    });
  }

  /**
   * Moves toward whichever edge is near, until none is or nothing more lies there. A load
   * that failed is tried again after a wait that grows with each failure in a row (with
   * jitter), so a person waiting at the top gets the page once the network is back.
   */
  let failures = 0;
  let retry = null;
  let waitUntil = 0;
  function checkEdges() {
    if (loading || opening || !roomId || !t().loaded || Date.now() < waitUntil) return;
    const mine = generation;
    const move = nearTop() && moreAbove() ? onTop : nearBottom() && moreBelow() ? onBottom : null;
    if (!move) return;
    const state = () => [first, last, t().order.length, t().olderCursor, t().newerCursor];
    const before = state();
    move().then((error) => {
      if (mine !== generation) return;
      if (error) {
        // A refusal (a cursor not accepted, the room gone) does not get better by asking again.
        if (!error.transient) return;
        const wait = backoff(failures++, 1000, 30000);
        waitUntil = Date.now() + wait;
        clearTimeout(retry);
        retry = setTimeout(checkEdges, wait);
        return;
      }
      failures = 0;
      // Looked at again after the browser had its turn (a layout, a paint, input).
      if (state().some((v, i) => v !== before[i])) setTimeout(checkEdges, 0);
    });
  }

  const observer = new IntersectionObserver((entries) => entries.some((e) => e.isIntersecting) && checkEdges(), {
    root: scroller,
    rootMargin: `${MARGIN}px 0px`,
  });
  observer.observe(topEdge);
  observer.observe(bottomEdge);
  scroller.addEventListener("scroll", () => {
    seenTop = scroller.scrollTop;
    stick = pinned();
    maybeMarkRead();
    checkEdges();
  });
  document.addEventListener("visibilitychange", () => maybeMarkRead());

  /** The oldest message from someone else sent after the read position. */
  function findFirstUnread() {
    if (!lastReadAt) return null;
    for (const id of t().order) {
      const m = t().byId.get(id);
      if (m.createdAt > lastReadAt && m.authorId !== ctx.me.userId) return id;
    }
    return null;
  }

  function updateJump() {
    const el = firstUnread && drawn.get(firstUnread)?.el;
    const visible =
      el && el.getBoundingClientRect().bottom > scroller.getBoundingClientRect().top &&
      el.getBoundingClientRect().top < scroller.getBoundingClientRect().bottom;
    jump.hidden = !firstUnread || Boolean(visible);
  }

  let markTimer = null;
  function maybeMarkRead() {
    clearTimeout(markTimer);
    markTimer = setTimeout(() => {
      if (!roomId || document.visibilityState !== "visible" || !isLiveEnd()) return;
      const order = t().order;
      const newest = order[order.length - 1];
      if (!newest || newest === markedUpTo || !drawn.has(newest)) return;
      const el = drawn.get(newest).el;
      if (el.getBoundingClientRect().top > scroller.getBoundingClientRect().bottom) return;
      markedUpTo = newest;
      const room = roomId;
      api.markRead(room, newest).then(
        () => store.patchRoom(room, { unreadCount: 0, unreadCapped: false, mentionCount: 0 }),
        () => {
          if (markedUpTo === newest) markedUpTo = null;
        },
      );
    }, 250);
  }

  bus.on("timeline:changed", ({ roomId: changed }) => {
    if (changed !== roomId || !t().loaded) return;
    // At the live end, the window grows with new messages (and sheds its top while stuck).
    if (isLiveEnd() && atEnd) {
      const [start] = indices();
      const end = t().order.length;
      setWindow(stick ? Math.max(start, end - WINDOW) : start, end);
    }
    draw();
    checkEdges();
  });
  bus.on("receipts:changed", ({ roomId: changed }) => changed === roomId && draw());
  // Authors and mentions show members' names as they are now: a new member list redraws.
  bus.on("members:changed", ({ roomId: changed }) => {
    if (changed === roomId && t().loaded && names.changed(roomId)) draw();
  });

  return {
    /** Shows `id`, at `messageId` when given (a permalink), else at its newest messages. */
    async open(id, { messageId = null, lastRead = null } = {}) {
      const switching = id !== roomId;
      generation++;
      loading = null;
      clearTimeout(retry);
      failures = 0;
      waitUntil = 0;
      roomId = id;
      if (switching) {
        first = null;
        last = null;
        drawn.clear();
        heights.clear();
        list.replaceChildren();
        markedUpTo = null;
        lastReadAt = lastRead;
      }
      stick = !messageId;
      seenTop = scroller.scrollTop;
      list.setAttribute("aria-busy", "true");
      const mine = generation;
      opening = true;
      try {
        if (messageId) {
          if (!store.message(id, messageId) || !t().loaded) await loadAround(messageId);
        } else if (!t().loaded || switching || t().hasNewer) {
          // (A run from a permalink stops short of the live end: the room opens at its newest.)
          await loadLatest();
        }
      } finally {
        list.removeAttribute("aria-busy");
        if (mine === generation) opening = false;
      }
      if (id !== roomId) return;
      firstUnread = findFirstUnread();
      const order = t().order;
      if (messageId) {
        const at = order.indexOf(messageId);
        setWindow(at - WINDOW / 2, at + WINDOW / 2);
        draw({ keepAnchor: false });
        const el = drawn.get(messageId)?.el;
        for (const old of list.querySelectorAll("[data-permalink]")) delete old.dataset.permalink;
        if (el) {
          el.dataset.permalink = "true";
          el.scrollIntoView({ block: "center" });
          el.focus({ preventScroll: true });
        }
      } else {
        setWindow(order.length - WINDOW, order.length);
        draw({ keepAnchor: false });
      }
      // A first page shorter than the view leaves the top edge in view from the start.
      checkEdges();
    },
    /** Loads older pages until the first unread message is loaded, then shows it. */
    async jumpToFirstUnread() {
      for (let pages = 0; pages < 40; pages++) {
        const oldest = t().byId.get(t().order[0]);
        if (!oldest || oldest.createdAt <= lastReadAt || !t().hasOlder) break;
        if (!(await loadOlder())) break;
      }
      firstUnread = findFirstUnread();
      if (!firstUnread) return;
      const at = t().order.indexOf(firstUnread);
      stick = false;
      setWindow(at - STEP, at - STEP + WINDOW);
      draw({ keepAnchor: false });
      const el = drawn.get(firstUnread)?.el;
      el?.scrollIntoView({ block: "start" });
      el?.focus({ preventScroll: true });
      updateJump();
      checkEdges();
    },
    get roomId() {
      return roomId;
    },
    /** Whether a page load is running, and the message of the last one that failed (for tests and diagnostics). */
    get loading() {
      return Boolean(loading);
    },
    get lastLoadError() {
      return lastLoadError;
    },
    /** Draws again (e.g. after members or names arrived). */
    redraw() {
      drawn.clear();
      draw();
    },
    /** Order of the loaded run, oldest first (for tests and later modules). */
    order: () => (roomId ? [...t().order].sort(byAge) : []),
  };
}
