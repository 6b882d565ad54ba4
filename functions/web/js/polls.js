// Polls. The composer's "Poll" button asks for a question and its options and sends the poll
// through the outbox (a `Poll` message with the same clientId on every retry); a poll message
// shows each option as a button with its tally and a bar, the reader's own vote pressed.
//
// A vote is optimistic with revert: the tally moves at once, the server's answer
// (the poll as this reader sees it) replaces it, and a refusal puts back what was held unless
// something newer came meanwhile. Others' votes come in live: `message.voted` makes the page
// read the message again (signals.js), and a copy of the same version replaces the held one,
// so the tally moves without a new version. Choosing one's current vote again withdraws it.

import { escapeHtml } from "./text.js";

export function addPolls({ api, store, bus, ctx, dialogs, messageParts, keyParts }) {
  keyParts.push((m) => (m.poll ? JSON.stringify(m.poll) : ""));

  /** The poll as it would be after the reader votes `optionId` (null: withdraws). */
  function afterVote(poll, optionId) {
    return {
      ...poll,
      myVote: optionId ?? undefined,
      options: poll.options.map((o) => ({
        ...o,
        votes: Math.max(0, o.votes - (o.id === poll.myVote ? 1 : 0) + (o.id === optionId ? 1 : 0)),
      })),
    };
  }

  async function vote(m, optionId) {
    const roomId = m.roomId;
    const held = store.message(roomId, m.id) ?? m;
    const choice = held.poll.myVote === optionId ? null : optionId;
    const optimistic = { ...held, poll: afterVote(held.poll, choice) };
    store.upsertMessages(roomId, [optimistic]);
    try {
      const answer = await api.votePoll(roomId, m.id, choice);
      if (answer?.id === m.id) store.upsertMessages(roomId, [answer]);
    } catch (e) {
      if (store.message(roomId, m.id) === optimistic) store.upsertMessages(roomId, [held]);
      bus.emit("notice", { text: `Could not vote: ${e.message}` });
    }
  }

  messageParts.push((m) => {
    if (m.type !== "Poll" || !m.poll || m.deletedAt) return null;
    const total = m.poll.options.reduce((n, o) => n + o.votes, 0);
    const box = document.createElement("div");
    box.className = "poll";
    box.dataset.testid = "poll";
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", `Poll: ${m.poll.question}`);
    for (const o of m.poll.options) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "poll-option";
      b.dataset.testid = "poll-option";
      b.dataset.optionId = o.id;
      b.dataset.votes = o.votes;
      const mine = m.poll.myVote === o.id;
      b.setAttribute("aria-pressed", String(mine));
      const share = total ? Math.round((o.votes / total) * 100) : 0;
      b.style.setProperty("--share", `${share}%`);
      const label = document.createElement("span");
      label.className = "poll-label";
      label.textContent = o.text;
      const count = document.createElement("span");
      count.className = "poll-count";
      count.dataset.testid = "poll-count";
      count.textContent = String(o.votes);
      b.setAttribute("aria-label", `${o.text}: ${o.votes} ${o.votes === 1 ? "vote" : "votes"}${mine ? ", your vote" : ""}`);
      b.append(label, count);
      b.addEventListener("click", () => vote(m, o.id));
      box.append(b);
    }
    const sum = document.createElement("p");
    sum.className = "poll-total";
    sum.dataset.testid = "poll-total";
    sum.textContent = `${total} ${total === 1 ? "vote" : "votes"}`;
    box.append(sum);
    return box;
  });

  function ask() {
    if (!ctx.roomId) return;
    const roomId = ctx.roomId;
    dialogs.ask({
      title: "New poll",
      submitLabel: "Send poll",
      fields: [
        { name: "question", label: "Question", required: true },
        { name: "option1", label: "Option 1", required: true },
        { name: "option2", label: "Option 2", required: true },
        { name: "option3", label: "Option 3" },
        { name: "option4", label: "Option 4" },
      ],
      async submit(values) {
        const question = values.question;
        const options = [values.option1, values.option2, values.option3, values.option4].filter(Boolean);
        if (new Set(options).size !== options.length) throw new Error("Each option must be different.");
        ctx.outbox.send(roomId, {
          // What the pending entry shows; a poll itself has no text (`fields` leaves it out).
          text: `<p>📊 ${escapeHtml(question)}</p>`,
          author: ctx.me,
          fields: { type: "Poll", poll: { question, options }, text: undefined },
        });
      },
    });
  }

  const button = document.createElement("button");
  button.type = "button";
  button.textContent = "Poll";
  button.dataset.testid = "composer-poll";
  button.setAttribute("aria-label", "Create a poll");
  button.addEventListener("click", ask);
  document.querySelector("#composer .composer-row").prepend(button);

  return { vote };
}
