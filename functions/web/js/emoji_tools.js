// The room's own emoji, managed from the room's header: "Emoji" opens a dialog listing them
// (each image and `:name:`, with Delete) and adding one — an image file uploaded as an
// attachment of the room (createUpload, then the PUT it signs) and named (createRoomEmoji).
// Adding and deleting need ManageRoom; the server says so in the dialog otherwise.

/** An emoji's image at most, in bytes (as the server allows). */
const MAX_BYTES = 256 * 1024;

export function addEmojiTools({ api, bus, ctx, dialogs }) {
  /** Uploads `file` to the room as an attachment nobody has sent yet: its id. */
  async function upload(roomId, file) {
    const answer = await api.createUpload(roomId, { name: file.name, mime: file.type, size: file.size });
    const { url, method, headers } = answer.upload;
    const sent = await fetch(/^https?:/.test(url) ? url : ctx.files.base + url, { method: method || "PUT", headers, body: file });
    if (!sent.ok) throw new Error(`the upload failed (HTTP ${sent.status})`);
    return answer.attachment.id;
  }

  async function listing(roomId) {
    const list = document.createElement("ul");
    list.className = "emoji-list";
    list.dataset.testid = "emoji-list";
    for (const emoji of (await ctx.roomEmoji.list(roomId)).values()) {
      const li = document.createElement("li");
      li.dataset.testid = "emoji-item";
      const mark = document.createElement("span");
      mark.dataset.type = "emoji";
      mark.dataset.id = emoji.name;
      mark.textContent = `:${emoji.name}:`;
      ctx.roomEmoji.show(mark, roomId);
      const remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "Delete";
      remove.setAttribute("aria-label", `Delete :${emoji.name}:`);
      remove.addEventListener("click", async () => {
        try {
          // A retried delete whose first answer was lost finds it gone: deleted all the same.
          await api.deleteRoomEmoji(roomId, emoji.name).catch((e) => {
            if (e.status !== 404) throw e;
          });
          ctx.roomEmoji.forget(roomId);
          li.remove();
        } catch (e) {
          bus.emit("notice", { text: `Could not delete :${emoji.name}:: ${e.message}` });
        }
      });
      li.append(mark, " ", remove);
      list.append(li);
    }
    return list;
  }

  async function open() {
    const roomId = ctx.roomId;
    const content = document.createElement("div");
    const label = document.createElement("label");
    label.htmlFor = "emoji-file";
    label.textContent = "Image (PNG, JPEG, GIF or WebP, at most 256 KB)";
    const file = document.createElement("input");
    file.type = "file";
    file.id = "emoji-file";
    file.accept = "image/png,image/jpeg,image/gif,image/webp";
    file.dataset.testid = "emoji-file";
    content.append(label, file, await listing(roomId));
    dialogs.ask({
      title: "This room's emoji",
      fields: [{ name: "name", label: "Name (a-z, 0-9, _ or -)", required: true }],
      content,
      submitLabel: "Add",
      async submit({ name }) {
        const picked = file.files[0];
        if (!picked) throw new Error("pick an image");
        // What the server would refuse, said before anything is uploaded.
        if (!file.accept.split(",").includes(picked.type)) throw new Error("an emoji is a PNG, JPEG, GIF or WebP image");
        if (picked.size > MAX_BYTES) throw new Error("an emoji's image is at most 256 KB");
        if (!/^[a-z0-9_-]{1,32}$/.test(name.replace(/^:|:$/g, ""))) throw new Error("a name is 1-32 of a-z, 0-9, _ or -");
        const attachmentId = await upload(roomId, picked);
        await api.createRoomEmoji(roomId, { name: name.replace(/^:|:$/g, ""), attachmentId });
        ctx.roomEmoji.forget(roomId);
        bus.emit("notice", { text: `:${name}: added` });
      },
    });
  }

  const button = document.createElement("button");
  button.type = "button";
  button.textContent = "Emoji";
  button.dataset.testid = "emoji-tools";
  button.hidden = true;
  button.addEventListener("click", open);
  document.querySelector(".room-tools").append(button);
  bus.on("room:open", () => (button.hidden = false));
}
