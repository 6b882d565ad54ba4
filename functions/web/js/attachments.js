// Attachments. The composer's "Attach" button picks files; each is declared (createUpload
// {name, mime, size}) and its bytes PUT to the link the server signed, with the headers it
// gave, through XMLHttpRequest so `upload.onprogress` drives a progress bar. The next send
// names the uploaded ids in `attachments` (the outbox retries it with the same clientId, so the
// files stay claimed by one message); a send waits for no upload: while one is still going, or
// one failed, the send is held with a notice. An empty text with files sends their names as
// the text (a message with attachments still needs one).
//
// A message shows each attachment's name and size with a Download button, and an image inline
// (each fetched with the bearer token as a blob, files.js):
// its thumbnail once the server made one (`image`: the box is sized from the image's own width
// and height before anything loads, so nothing below it moves), opening the full image in the
// dialog on click; before that, or for an image that gets none, the file itself.
// A download saves the blob under its name, an image shows from it. On Blob Storage the
// container must allow the page's origin (CORS) for both the upload and the download redirect.

import { apiBase } from "./config.js";

/** Images without a thumbnail inline up to this size; larger ones are a download only. */
const INLINE_MAX_BYTES = 5 * 1024 * 1024;
/** The box a thumbnail is shown in, in CSS pixels (the server's thumbnails fit 320). */
const THUMBNAIL_BOX = { width: 320, height: 224 };

export function formatSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

export function addAttachments({ api, bus, ctx, composerParts, messageParts, keyParts }) {
  // A thumbnail made after the send keeps the message's version.
  keyParts.push((m) => (m.attachments ?? []).map((a) => (a.image ? "t" : "-")).join(""));
  /** Per room: the files picked for the next send, {key, file, state, progress, id, error, xhr}. */
  const picked = new Map();
  let keys = 0;

  const row = document.querySelector("#composer .composer-row");
  const tray = document.createElement("ul");
  tray.className = "upload-tray";
  tray.dataset.testid = "upload-tray";
  tray.setAttribute("aria-label", "Files to send");
  tray.hidden = true;
  row.before(tray);

  const chooser = document.createElement("input");
  chooser.type = "file";
  chooser.multiple = true;
  chooser.hidden = true;
  chooser.dataset.testid = "composer-file";
  chooser.setAttribute("aria-label", "Files to attach");
  const attach = document.createElement("button");
  attach.type = "button";
  attach.textContent = "Attach";
  attach.dataset.testid = "composer-attach";
  attach.setAttribute("aria-label", "Attach files");
  attach.addEventListener("click", () => chooser.click());
  chooser.addEventListener("change", () => {
    for (const file of chooser.files) add(ctx.roomId, file);
    chooser.value = "";
  });
  row.prepend(attach, chooser);

  const list = (roomId) => picked.get(roomId) ?? [];

  function draw() {
    const items = list(ctx.roomId);
    tray.hidden = !items.length;
    tray.replaceChildren(
      ...items.map((u) => {
        const li = document.createElement("li");
        li.className = "upload";
        li.dataset.testid = "upload";
        li.dataset.state = u.state;
        const name = document.createElement("span");
        name.className = "upload-name";
        name.textContent = `${u.file.name} (${formatSize(u.file.size)})`;
        const bar = document.createElement("progress");
        bar.max = 100;
        bar.value = u.progress;
        bar.dataset.testid = "upload-progress";
        bar.setAttribute("aria-label", `Uploading ${u.file.name}`);
        const state = document.createElement("span");
        state.className = "upload-state";
        state.dataset.testid = "upload-state";
        state.setAttribute("aria-live", "polite");
        state.textContent =
          u.state === "uploaded" ? "Ready" : u.state === "failed" ? `Failed: ${u.error}` : `${u.progress}%`;
        const remove = document.createElement("button");
        remove.type = "button";
        remove.textContent = "Remove";
        remove.setAttribute("aria-label", `Remove ${u.file.name}`);
        remove.addEventListener("click", () => {
          u.xhr?.abort();
          picked.set(u.roomId, list(u.roomId).filter((x) => x !== u));
          draw();
        });
        li.append(name, " ", bar, " ", state, " ", remove);
        return li;
      }),
    );
  }

  /** Updates the drawn entry of `u` in place (a redraw per progress event would flicker). */
  function progress(u) {
    const li = [...tray.children][list(ctx.roomId).indexOf(u)];
    if (!li) return;
    li.querySelector("progress").value = u.progress;
    li.querySelector(".upload-state").textContent = `${u.progress}%`;
  }

  async function add(roomId, file) {
    if (!roomId) return;
    const u = { key: ++keys, roomId, file, state: "declaring", progress: 0, id: null, error: null, xhr: null };
    picked.set(roomId, [...list(roomId), u]);
    draw();
    try {
      const answer = await api.createUpload(roomId, { name: file.name, mime: file.type || "application/octet-stream", size: file.size });
      u.id = answer.attachment.id;
      u.state = "uploading";
      draw();
      await put(u, answer.upload);
      u.progress = 100;
      u.state = "uploaded";
    } catch (e) {
      u.state = "failed";
      u.error = e.message;
    }
    draw();
  }

  function put(u, upload) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      u.xhr = xhr;
      const url = /^https?:/.test(upload.url) ? upload.url : apiBase + upload.url;
      xhr.open(upload.method || "PUT", url);
      for (const [name, value] of Object.entries(upload.headers ?? {})) {
        // The browser sets Content-Length itself and refuses to be told it.
        if (name.toLowerCase() !== "content-length") xhr.setRequestHeader(name, value);
      }
      // Listeners on `upload` before send(): only then does the browser report its progress.
      xhr.upload.onprogress = (e) => {
        if (!e.lengthComputable) return;
        u.progress = Math.floor((e.loaded / e.total) * 100);
        progress(u);
      };
      xhr.onload = () => (xhr.status >= 200 && xhr.status < 300 ? resolve() : reject(new Error(failure(xhr))));
      xhr.onerror = () => reject(new Error("the upload failed (network)"));
      xhr.onabort = () => reject(new Error("cancelled"));
      xhr.send(u.file);
    });
  }

  function failure(xhr) {
    try {
      return JSON.parse(xhr.responseText).message ?? `HTTP ${xhr.status}`;
    } catch {
      return `HTTP ${xhr.status}`;
    }
  }

  composerParts.push({
    /** The send's `attachments`, or a refusal while a file is not uploaded yet. */
    fields(roomId) {
      const items = list(roomId);
      if (!items.length) return null;
      if (items.some((u) => u.state === "failed")) throw new Error("a file failed to upload: remove it or pick it again");
      if (items.some((u) => u.state !== "uploaded")) throw new Error("wait until the files are uploaded");
      return { attachments: items.map((u) => u.id) };
    },
    fallbackText(roomId) {
      return list(roomId)
        .map((u) => u.file.name)
        .join(", ");
    },
    sent(roomId) {
      picked.delete(roomId);
      draw();
    },
  });
  bus.on("room:open", draw);

  // ---- shown in a message

  /** The file at tabletalk's `path` (the attachment's own by default) as a blob URL. */
  const fetchBlob = (a, path = a.url) => ctx.files.blob(path);

  /** The thumbnail of `a`, in a box of the image's own shape; a click opens the full image. */
  function thumbnail(a) {
    const { width, height, thumbnailUrl } = a.image;
    const scale = Math.min(1, THUMBNAIL_BOX.width / width, THUMBNAIL_BOX.height / height);
    const button = document.createElement("button");
    button.type = "button";
    button.className = "attachment-thumbnail";
    button.dataset.testid = "attachment-thumbnail";
    button.setAttribute("aria-label", `Open ${a.name}`);
    const img = document.createElement("img");
    img.className = "attachment-image";
    img.dataset.testid = "attachment-image";
    img.alt = a.name;
    img.width = Math.max(1, Math.round(width * scale));
    img.height = Math.max(1, Math.round(height * scale));
    // A GIF or WebP may move: the file itself in the box, where it is small enough. A
    // thumbnail that fails to load gives way to the file the same way.
    const inline = a.size <= INLINE_MAX_BYTES;
    const still = !(inline && (a.mime === "image/gif" || a.mime === "image/webp"));
    const whole = () => (inline ? fetchBlob(a) : Promise.reject(new Error("too large to show")));
    // Neither loads: the box stays, showing the name (the Download button still works).
    (still ? fetchBlob(a, thumbnailUrl).catch(whole) : whole()).then(
      (src) => (img.src = src),
      () => {},
    );
    button.append(img);
    button.addEventListener("click", () => openFull(a));
    return button;
  }

  /** The full image of `a` in the dialog. */
  function openFull(a) {
    const full = document.createElement("img");
    full.className = "attachment-full";
    full.dataset.testid = "attachment-full";
    full.alt = a.name;
    full.width = a.image.width;
    full.height = a.image.height;
    fetchBlob(a).then(
      (src) => (full.src = src),
      (e) => bus.emit("notice", { text: `Could not open ${a.name}: ${e.message}` }),
    );
    ctx.dialogs.ask({ title: a.name, content: full, noSubmit: true });
  }

  async function download(a) {
    try {
      const href = await fetchBlob(a);
      const link = document.createElement("a");
      link.href = href;
      link.download = a.name;
      document.body.append(link);
      link.click();
      link.remove();
    } catch (e) {
      bus.emit("notice", { text: `Could not download ${a.name}: ${e.message}` });
    }
  }

  messageParts.push((m) => {
    if (!m.attachments?.length || m.deletedAt) return null;
    const ul = document.createElement("ul");
    ul.className = "attachments";
    ul.dataset.testid = "attachments";
    ul.setAttribute("aria-label", "Attachments");
    for (const a of m.attachments) {
      const li = document.createElement("li");
      li.className = "attachment";
      li.dataset.testid = "attachment";
      li.dataset.attachmentId = a.id;
      if (a.image) {
        li.append(thumbnail(a));
      } else if (a.mime.startsWith("image/") && a.size <= INLINE_MAX_BYTES) {
        const img = document.createElement("img");
        img.className = "attachment-image";
        img.dataset.testid = "attachment-image";
        img.alt = a.name;
        img.loading = "lazy";
        fetchBlob(a).then(
          (src) => (img.src = src),
          () => img.remove(),
        );
        li.append(img);
      }
      const name = document.createElement("span");
      name.className = "attachment-name";
      name.dataset.testid = "attachment-name";
      name.textContent = a.name;
      const size = document.createElement("span");
      size.className = "attachment-size";
      size.dataset.testid = "attachment-size";
      size.textContent = formatSize(a.size);
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = "Download";
      b.dataset.testid = "attachment-download";
      b.setAttribute("aria-label", `Download ${a.name}`);
      b.addEventListener("click", () => download(a));
      li.append(name, " ", size, " ", b);
      ul.append(li);
    }
    return ul;
  });

  return { picked: (roomId) => list(roomId).map((u) => ({ name: u.file.name, state: u.state, progress: u.progress, id: u.id })) };
}
