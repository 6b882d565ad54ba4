// One modal dialog (the page's <dialog>) for every small form: create a room, browse public
// rooms, open a direct conversation, invite someone. `ask({title, fields, submit})` shows the
// fields, calls `submit(values)` on OK and shows its error in the dialog when it throws; the
// browser's <dialog> keeps the focus inside and Escape closes it.

export function createDialogs() {
  const dialog = document.getElementById("dialog");
  const form = document.getElementById("dialog-form");
  const title = document.getElementById("dialog-title");
  const body = document.getElementById("dialog-body");
  const error = document.getElementById("dialog-error");
  const ok = document.getElementById("dialog-ok");
  let current = null;

  document.getElementById("dialog-cancel").addEventListener("click", () => dialog.close());
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!current) return;
    error.textContent = "";
    const values = Object.fromEntries(
      [...form.elements].filter((e) => e.name).map((e) => [e.name, e.type === "checkbox" ? e.checked : e.value.trim()]),
    );
    ok.disabled = true;
    try {
      await current.submit(values);
      dialog.close();
    } catch (e) {
      error.textContent = e.message;
    } finally {
      ok.disabled = false;
    }
  });
  dialog.addEventListener("close", () => {
    const opener = current?.opener;
    current = null;
    opener?.focus?.();
  });

  return {
    /**
     * fields: [{name, label, type?: text|checkbox, required?, value?}]; `content` (an element)
     * goes after them (the directory's results). `submitLabel` names the OK button; with
     * `noSubmit` there is none (the content's buttons act).
     */
    ask({ title: text, fields = [], content = null, submit = async () => {}, submitLabel = "OK", noSubmit = false }) {
      current = { submit, opener: document.activeElement };
      title.textContent = text;
      error.textContent = "";
      ok.textContent = submitLabel;
      ok.hidden = noSubmit;
      body.replaceChildren(
        ...fields.map((f) => {
          const id = `dialog-field-${f.name}`;
          const wrap = document.createElement("div");
          wrap.className = `field field-${f.type ?? "text"}`;
          const label = document.createElement("label");
          label.htmlFor = id;
          label.textContent = f.label;
          const input = document.createElement("input");
          input.id = id;
          input.name = f.name;
          input.type = f.type ?? "text";
          input.dataset.testid = `dialog-${f.name}`;
          if (f.required) input.required = true;
          if (f.type === "checkbox") input.checked = Boolean(f.value);
          else if (f.value) input.value = f.value;
          if (f.type === "checkbox") wrap.append(input, label);
          else wrap.append(label, input);
          return wrap;
        }),
        ...(content ? [content] : []),
      );
      dialog.showModal();
      body.querySelector("input")?.focus();
    },
    close() {
      dialog.close();
    },
  };
}
