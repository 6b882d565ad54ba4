// The one suggestion surface: a listbox under the composer for mentions (`@`), emoji (`:`)
// and commands (`/`, composer.js). A source says which character starts its token and what it
// suggests for the text typed after it:
//
//   suggestions.addSource({
//     id: "mentions", trigger: "@",
//     atStart: false,                                      // true: only as the first word
//     find: (query) => [{ id, label, detail?, value }],   // or a Promise of them; value
//                                                          // replaces trigger+query
//   });
//
// The textarea keeps the focus throughout (the listbox is its `aria-controls`, the option in
// play its `aria-activedescendant`): ArrowDown/ArrowUp move, Enter or Tab picks, Escape
// closes; a pointer picks without taking the focus. The textarea stays a textbox (with
// `aria-autocomplete` and `aria-haspopup`): HTML allows no combobox role on a textarea, and a
// textbox has no `aria-expanded`; the listbox is open while it shows and has an active option.

import { escapeHtml } from "./text.js";

const MAX_ITEMS = 8;

export function createSuggestions({ input, listbox }) {
  const sources = [];
  let items = [];
  let active = -1;
  let token = null;
  /** The token `items` were found for: until an answer for the token typed now comes, none. */
  let itemsFor = null;

  /** The token being typed at the caret: a trigger after a space or the start, then word characters. */
  function tokenAtCaret() {
    const caret = input.selectionStart;
    if (caret !== input.selectionEnd) return null;
    const before = input.value.slice(0, caret);
    for (const source of sources) {
      const at = before.lastIndexOf(source.trigger);
      if (at < 0 || (at > 0 && !/\s/.test(before[at - 1]))) continue;
      if (source.atStart && before.slice(0, at).trim()) continue;
      const query = before.slice(at + source.trigger.length);
      if (/^[^\s@:]*$/.test(query)) return { source, start: at, end: caret, query };
    }
    return null;
  }

  function render() {
    listbox.replaceChildren(
      ...items.map((item, i) => {
        const li = document.createElement("li");
        li.id = `suggestion-${i}`;
        li.setAttribute("role", "option");
        li.setAttribute("aria-selected", String(i === active));
        li.dataset.testid = "suggestion";
        li.dataset.value = item.value;
        li.innerHTML = `<span class="suggestion-label">${escapeHtml(item.label)}</span>${
          item.detail ? ` <span class="suggestion-detail">${escapeHtml(item.detail)}</span>` : ""
        }`;
        li.addEventListener("mousedown", (e) => e.preventDefault());
        li.addEventListener("click", () => pick(i));
        return li;
      }),
    );
    const open = items.length > 0;
    listbox.hidden = !open;
    if (open && active >= 0) {
      input.setAttribute("aria-activedescendant", `suggestion-${active}`);
      listbox.children[active]?.scrollIntoView({ block: "nearest" });
    } else input.removeAttribute("aria-activedescendant");
  }

  /** A source's `find` may answer later (a Promise): an answer for a token no longer typed is dropped. */
  async function update() {
    const typed = tokenAtCaret();
    token = typed;
    let found = [];
    try {
      found = typed ? await typed.source.find(typed.query) : [];
    } catch {
      found = [];
    }
    if (token !== typed) return;
    itemsFor = typed;
    items = found.slice(0, MAX_ITEMS);
    active = items.length ? 0 : -1;
    render();
  }

  function close() {
    items = [];
    token = null;
    itemsFor = null;
    active = -1;
    render();
  }

  function pick(i) {
    const item = items[i];
    if (!item || !token) return;
    const value = `${item.value} `;
    input.setRangeText(value, token.start, token.end, "end");
    input.dispatchEvent(new Event("input", { bubbles: true }));
    close();
    input.focus();
  }

  input.addEventListener("input", update);
  input.addEventListener("click", update);
  input.addEventListener("blur", close);

  return {
    addSource(source) {
      sources.push(source);
    },
    get open() {
      return items.length > 0;
    },
    close,
    /** The composer's keydown calls this first; true when the key was the listbox's. */
    handleKey(event) {
      if (!items.length || itemsFor !== token) return false;
      switch (event.key) {
        case "ArrowDown":
          active = (active + 1) % items.length;
          break;
        case "ArrowUp":
          active = (active - 1 + items.length) % items.length;
          break;
        case "Enter":
        case "Tab":
          if (event.shiftKey) return false;
          pick(active);
          break;
        case "Escape":
          close();
          break;
        default:
          return false;
      }
      event.preventDefault();
      if (items.length) render();
      return true;
    },
  };
}
