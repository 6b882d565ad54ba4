// The side panel beside the timeline: one surface for a thread, the pinned messages and the
// member list, so the room keeps one extra column whatever fills it. A feature opens it with
//
//   panel.open({ id, title, render: (body) => …, onClose? })
//
// which replaces what it showed (its `onClose` runs first); `panel.current` names what it
// shows, so a module redraws only its own contents. Escape or the Close button closes it and
// gives the focus back to where it was before the panel opened.

export function createPanel() {
  const app = document.getElementById("app");
  const aside = document.createElement("aside");
  aside.id = "panel";
  aside.className = "panel";
  aside.hidden = true;
  aside.dataset.testid = "panel";
  aside.setAttribute("aria-labelledby", "panel-title");
  const header = document.createElement("header");
  header.className = "panel-header";
  const title = document.createElement("h2");
  title.id = "panel-title";
  title.dataset.testid = "panel-title";
  const close = document.createElement("button");
  close.type = "button";
  close.textContent = "Close";
  close.dataset.testid = "panel-close";
  close.setAttribute("aria-label", "Close the panel");
  header.append(title, close);
  const body = document.createElement("div");
  body.className = "panel-body";
  aside.append(header, body);
  app.append(aside);

  let current = null;

  function shut() {
    if (!current) return;
    const was = current;
    current = null;
    aside.hidden = true;
    delete aside.dataset.kind;
    app.classList.remove("panel-open");
    body.replaceChildren();
    was.onClose?.();
    if (was.opener?.isConnected) was.opener.focus();
  }

  close.addEventListener("click", shut);
  aside.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !event.defaultPrevented) {
      event.preventDefault();
      shut();
    }
  });

  return {
    /** Shows `render(body)`'s contents under `title`; `id` says whose they are. */
    open({ id, kind, title: text, render, onClose }) {
      const opener = current?.opener ?? document.activeElement;
      if (current) {
        const was = current;
        current = null;
        was.onClose?.();
      }
      current = { id, kind, onClose, opener };
      title.textContent = text;
      aside.dataset.kind = kind;
      aside.hidden = false;
      app.classList.add("panel-open");
      body.replaceChildren();
      render(body);
    },
    close: shut,
    /** `{id, kind}` of what the panel shows, or null. */
    get current() {
      return current && { id: current.id, kind: current.kind };
    },
    is(kind, id) {
      return Boolean(current && current.kind === kind && (id === undefined || current.id === id));
    },
    body,
  };
}
