// Search. A box in the top bar (Ctrl+K or "/" outside a text field focuses it); submitting
// shows the results in the side panel, newest first, each labelled with its room, the matched
// words marked (as text nodes in <mark>, never markup from the server), a page at a time.
// Filters are checkboxes under the box that add their part of the query language, so nobody
// has to know the syntax. A result is a link to the message in its room (the around-page).

import { query } from "./api.js";
import { roomHref } from "./router.js";
import { toText } from "./text.js";

const FILTERS = [
  { id: "here", label: "This room", term: (ctx) => (ctx.roomId ? `in:${ctx.roomId}` : "") },
  { id: "file", label: "Has file", term: () => "has:file" },
  { id: "link", label: "Has link", term: () => "has:link" },
  { id: "pinned", label: "Pinned", term: () => "is:pinned" },
  { id: "thread", label: "Replies", term: () => "is:thread" },
];

/** `text` as nodes, each occurrence of a highlighted word (case-insensitively) in <mark>. */
export function marked(text, highlights) {
  const words = [...new Set(highlights)].filter(Boolean).sort((a, b) => b.length - a.length);
  if (!words.length) return [document.createTextNode(text)];
  const lower = text.toLowerCase();
  const out = [];
  let at = 0;
  while (at < text.length) {
    let next = -1;
    let word = "";
    for (const w of words) {
      const i = lower.indexOf(w.toLowerCase(), at);
      if (i >= 0 && (next < 0 || i < next)) {
        next = i;
        word = w;
      }
    }
    if (next < 0) break;
    if (next > at) out.push(document.createTextNode(text.slice(at, next)));
    const mark = document.createElement("mark");
    mark.dataset.testid = "search-highlight";
    mark.textContent = text.slice(next, next + word.length);
    out.push(mark);
    at = next + word.length;
  }
  if (at < text.length) out.push(document.createTextNode(text.slice(at)));
  return out;
}

export function addSearch({ api, ctx, panel }) {
  api.searchMessages = (q, cursor) => api.request("GET", `/api/search${query({ q, cursor, limit: 20 })}`);

  const form = document.createElement("form");
  form.className = "search";
  form.setAttribute("role", "search");
  form.dataset.testid = "search";
  const label = document.createElement("label");
  label.htmlFor = "search-input";
  label.className = "visually-hidden";
  label.textContent = "Search messages";
  const input = document.createElement("input");
  input.id = "search-input";
  input.type = "search";
  input.placeholder = "Search (Ctrl+K)";
  input.autocomplete = "off";
  input.dataset.testid = "search-input";
  input.setAttribute("aria-keyshortcuts", "Control+K /");
  const filters = document.createElement("fieldset");
  filters.className = "search-filters";
  filters.hidden = true;
  const legend = document.createElement("legend");
  legend.className = "visually-hidden";
  legend.textContent = "Search filters";
  filters.append(legend);
  const boxes = FILTERS.map((filter) => {
    const box = document.createElement("input");
    box.type = "checkbox";
    box.id = `search-filter-${filter.id}`;
    box.dataset.testid = `search-filter-${filter.id}`;
    const text = document.createElement("label");
    text.htmlFor = box.id;
    text.textContent = filter.label;
    filters.append(box, text);
    box.addEventListener("change", () => input.value.trim() && run());
    return { filter, box };
  });
  form.append(label, input, filters);
  const topbar = document.querySelector(".topbar");
  topbar.insertBefore(form, document.getElementById("me"));
  input.addEventListener("focus", () => (filters.hidden = false));

  document.addEventListener("keydown", (event) => {
    const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement?.tagName)
      || document.activeElement?.isContentEditable;
    const shortcut = (event.key === "k" && (event.ctrlKey || event.metaKey)) || (event.key === "/" && !typing);
    if (!shortcut || event.defaultPrevented) return;
    event.preventDefault();
    input.focus();
    input.select();
  });

  let generation = 0;
  // The query of the results shown: "More results" pages on it, whatever was typed since.
  let asked = "";
  let results = [];
  let cursor = null;
  let failure = "";

  function fullQuery() {
    const parts = [input.value.trim()];
    for (const { filter, box } of boxes) if (box.checked) parts.push(filter.term(ctx));
    return parts.filter(Boolean).join(" ");
  }

  function resultItem(r) {
    const li = document.createElement("li");
    li.className = "search-result";
    li.dataset.testid = "search-result";
    li.dataset.messageId = r.message.id;
    li.dataset.roomId = r.roomId;
    const a = document.createElement("a");
    a.href = roomHref(r.roomId, r.message.id);
    a.dataset.testid = "search-result-link";
    const where = document.createElement("span");
    where.className = "search-room";
    where.dataset.testid = "search-room";
    where.textContent = `# ${r.roomName}`;
    const who = document.createElement("span");
    who.className = "search-author";
    who.textContent = ` ${r.message.authorName || r.message.authorId}`;
    const when = document.createElement("time");
    when.dateTime = r.message.createdAt;
    when.textContent = ` ${new Date(r.message.createdAt).toLocaleString()}`;
    const text = document.createElement("p");
    text.className = "search-text";
    text.dataset.testid = "search-text";
    const shown = toText(r.message.text || "") || (r.message.poll ? `📊 ${r.message.poll.question}` : "");
    text.append(...marked(shown.slice(0, 300), r.highlights || []));
    a.append(where, who, when, text);
    li.append(a);
    return li;
  }

  function draw(body) {
    const parts = [];
    if (failure) {
      const error = document.createElement("p");
      error.className = "error";
      error.setAttribute("role", "alert");
      error.dataset.testid = "search-error";
      error.textContent = failure;
      parts.push(error);
    }
    const list = document.createElement("ol");
    list.className = "search-results";
    list.dataset.testid = "search-results";
    list.dataset.count = results.length;
    list.setAttribute("aria-label", "Search results");
    list.append(...results.map(resultItem));
    parts.push(list);
    if (!results.length && !failure) {
      const none = document.createElement("p");
      none.className = "hint";
      none.dataset.testid = "search-empty";
      none.textContent = cursor ? "Nothing yet; there is more to look through." : "No messages found.";
      parts.push(none);
    }
    if (cursor) {
      const more = document.createElement("button");
      more.type = "button";
      more.textContent = "More results";
      more.dataset.testid = "search-more";
      more.addEventListener("click", () => {
        more.disabled = true;
        page(generation);
      });
      parts.push(more);
    }
    body.replaceChildren(...parts);
  }

  function show() {
    if (panel.is("search")) draw(panel.body);
    else panel.open({ id: "search", kind: "search", title: `Search: ${input.value.trim()}`, render: draw });
  }

  async function page(mine) {
    try {
      const answer = await api.searchMessages(asked, cursor ?? undefined);
      if (mine !== generation) return;
      results = results.concat(answer.results);
      cursor = answer.hasMore ? answer.nextCursor : null;
      failure = "";
    } catch (e) {
      if (mine !== generation) return;
      failure = e.message;
      cursor = null;
    }
    show();
  }

  function run() {
    generation += 1;
    asked = fullQuery();
    results = [];
    cursor = null;
    failure = "";
    page(generation);
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim()) run();
  });

  return { input, run };
}
