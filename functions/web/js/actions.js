// What a person can do to a message: one registry, drawn as each message's toolbar
// (timeline.js). A feature adds an action with
//
//   actions.add({ id: "pin", label: "Pin", when: (message, ctx) => bool, run: (message, ctx) => … });
//
// where ctx is {me, roomId, api, store, composer, dialogs}. The first actions: reply, react
// (👍, or any emoji from a picker), edit,
// delete (the author's own messages: the server decides who may do what, and an answer
// refusing it is shown as a notice) and copying the message's permalink.

import { tombstone } from "./store.js";

export const QUICK_REACTIONS = ["👍", "❤️", "😄", "🎉"];

export function createActions() {
  const list = [];
  return {
    add(action) {
      list.push(action);
    },
    /** The actions that apply to `message`, in the order they were added. */
    for(message, ctx) {
      return list.filter((a) => !a.when || a.when(message, ctx));
    },
  };
}

export function addDefaultActions(actions, bus) {
  const live = (m) => !m.deletedAt && ["Message", "Poll", "Webhook"].includes(m.type);
  const mine = (m, ctx) => live(m) && m.authorId === ctx.me.userId && m.origin === "user";
  const refused = (what) => (e) => bus.emit("notice", { text: `Could not ${what}: ${e.message}` });

  actions.add({ id: "reply", label: "Reply", when: live, run: (m, ctx) => ctx.composer.reply(m) });
  for (const emoji of QUICK_REACTIONS.slice(0, 1)) {
    actions.add({
      id: `react-${emoji}`,
      label: `React ${emoji}`,
      when: live,
      run: (m, ctx) => toggleReaction(m, emoji, ctx).catch(refused("react")),
    });
  }
  actions.add({ id: "react-pick", label: "React…", when: live, run: (m, ctx) => pickReaction(m, ctx, refused("react")) });
  actions.add({ id: "edit", label: "Edit", when: (m, ctx) => mine(m, ctx) && m.type === "Message", run: (m, ctx) => ctx.composer.edit(m) });
  actions.add({
    id: "delete",
    label: "Delete",
    when: mine,
    run: async (m, ctx) => {
      if (!confirm("Delete this message?")) return;
      try {
        await ctx.api.deleteMessage(ctx.roomId, m.id);
        ctx.store.upsertMessages(ctx.roomId, [tombstone(ctx.store.message(ctx.roomId, m.id) ?? m)]);
      } catch (e) {
        refused("delete")(e);
      }
    },
  });
  actions.add({
    id: "link",
    label: "Copy link",
    when: (m) => !m.deletedAt,
    run: (m, ctx) => {
      const url = `${location.origin}${location.pathname}#/rooms/${ctx.roomId}/messages/${m.id}`;
      navigator.clipboard?.writeText(url).catch(() => {});
      bus.emit("notice", { text: "Link copied" });
    },
  });
}

/**
 * The reaction picker, in the page's dialog: the quick reactions, then the emoji whose
 * shortcodes begin with what is typed (`suggestEmoji`); a choice (or Enter, the first one)
 * toggles it on the message.
 */
function pickReaction(message, ctx, refused) {
  const grid = document.createElement("div");
  grid.className = "emoji-grid";
  grid.dataset.testid = "emoji-grid";
  const show = (choices) =>
    grid.replaceChildren(
      ...choices.map(({ emoji, name }) => {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = emoji;
        b.title = name;
        b.setAttribute("aria-label", `React ${name}`);
        b.dataset.testid = "emoji-choice";
        b.addEventListener("click", () => {
          ctx.dialogs.close();
          toggleReaction(message, emoji, ctx).catch(refused);
        });
        return b;
      }),
    );
  const quick = QUICK_REACTIONS.map((emoji) => ({ emoji, name: emoji }));
  show(quick);
  ctx.dialogs.ask({
    title: "React with an emoji",
    fields: [{ name: "emoji-search", label: "Find by name (tada, thumbsup…)" }],
    content: grid,
    noSubmit: true,
  });
  const field = document.getElementById("dialog-field-emoji-search");
  // Enter takes the first choice for what is typed: once its lookup has answered.
  let shown = Promise.resolve();
  field.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.isComposing) return;
    event.preventDefault();
    shown.then(() => grid.querySelector("button")?.click());
  });
  let asked = 0;
  field.addEventListener("input", () => {
    const q = field.value.trim().replace(/^:|:$/g, "");
    const n = ++asked;
    shown = (async () => {
      const found = !q ? quick : /^[a-z0-9_+-]+$/i.test(q) ? await ctx.api.suggestEmoji(q).catch(() => []) : [];
      if (n === asked) show(q ? found.map((e) => ({ emoji: e.emoji, name: `:${e.shortcode}:` })) : quick);
    })();
  });
}

/** Adds the caller's `emoji` to the message, or takes it away when they had it. */
export async function toggleReaction(message, emoji, ctx) {
  const had = message.reactions?.some((r) => r.emoji === emoji && r.me);
  const counts = had
    ? await ctx.api.removeReaction(ctx.roomId, message.id, emoji)
    : await ctx.api.addReaction(ctx.roomId, message.id, emoji);
  const reactions = Array.isArray(counts) ? counts : counts?.reactions;
  if (reactions) ctx.store.upsertMessages(ctx.roomId, [{ ...message, reactions }]);
}
