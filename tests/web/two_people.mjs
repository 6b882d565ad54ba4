// Two people in two browser contexts. Alice creates a room and invites Bob; Bob accepts.
// What Alice types appears live for Bob (her typing first; a mention picked from the
// suggestions by keyboard; Bob's reply), Bob's reading shows on Alice's
// message as a seen-tick, and Bob's reaction, Alice's edit and her delete appear live on the
// other side. Alice typing to Bob in a direct conversation shows on its entry in his list
// while he looks at another room; a direct message to Bob there shows as his unread
// badge live, the room moving to the top of its section; a mention in the room shows as a
// mention badge. Authors and mentions show members' names, not their ids, and a rename shows
// on older messages and in the reply banner once the renamed one writes. No page logs an
// error.
import { acceptInvitation, check, createRoomAndInvite, run, step, user } from "./harness.mjs";

const message = (page, text) => page.getByTestId("message").filter({ hasText: text });
const roomLink = (page, id) => page.locator(`[data-testid=room-link][data-room-id="${id}"]`);

await run(async (browser) => {
  const alice = await user(browser, "alice", { name: "Alice" });
  const bob = await user(browser, "bob", { name: "Bob" });
  let roomId;

  await step("alice creates a room and invites bob", async () => {
    roomId = await createRoomAndInvite(alice, "general", "bob");
  });

  await step("bob sees the invitation and accepts it", async () => {
    await acceptInvitation(bob, "general");
    check(bob.url().includes(roomId), `bob shows the room: ${bob.url()}`);
  });

  await step("alice's typing shows for bob, then her message appears live", async () => {
    const input = alice.getByTestId("composer-input");
    await input.click();
    await input.pressSequentially("hello bob", { delay: 20 });
    await bob.getByTestId("typing").filter({ hasText: "Alice is typing" }).waitFor();
    await input.press("Enter");
    await message(bob, "hello bob").waitFor();
    await bob.getByTestId("typing").filter({ hasText: /^$/ }).waitFor();
  });

  await step("bob read it: alice's message shows a seen-tick", async () => {
    await message(alice, "hello bob").getByTestId("seen").waitFor();
  });

  await step("mention autocomplete: alice picks bob from the listbox with the keyboard", async () => {
    const input = alice.getByTestId("composer-input");
    await input.pressSequentially("hi @b");
    await alice.getByTestId("suggestion").first().waitFor();
    const listbox = alice.locator(`#${await input.getAttribute("aria-controls")}[role=listbox]`);
    check(await listbox.isVisible(), "the listbox the box controls is open");
    check((await input.getAttribute("aria-activedescendant")) === "suggestion-0", "the first option is active");
    await input.press("Enter");
    check((await input.inputValue()) === "hi @bob ", `the pick is in the box: ${await input.inputValue()}`);
    check(await input.evaluate((el) => el === document.activeElement), "the focus stays in the box");
    await input.press("Enter");
    // The mention shows bob's name, not his id (which stays in its title).
    const mention = message(bob, "hi @bob").locator('[data-type="mention"]', { hasText: /^@Bob$/ });
    await mention.waitFor();
    check((await mention.getAttribute("title")) === "@bob", "the id is in the title");
  });

  await step("bob's reply appears live for alice, naming what it answers", async () => {
    const theirs = message(bob, "hi @bob");
    await theirs.hover();
    await theirs.getByTestId("action-reply").click();
    check((await bob.getByTestId("composer-context").textContent()).includes("Replying to Alice"), "the box says what it answers");
    const input = bob.getByTestId("composer-input");
    check(await input.evaluate((el) => el === document.activeElement), "the focus is in the box");
    await input.fill("a reply");
    await input.press("Enter");
    await message(alice, "a reply").getByTestId("reply-ref").filter({ hasText: "Alice" }).waitFor();
  });

  await step("bob's reaction appears live for alice", async () => {
    const theirs = message(bob, "hello bob");
    await theirs.hover();
    await theirs.getByTestId("action-react-👍").click();
    await message(alice, "hello bob").getByTestId("reaction").filter({ hasText: "👍 1" }).waitFor();
  });

  await step("alice's edit appears live for bob", async () => {
    const mine = message(alice, "hello bob");
    await mine.hover();
    await mine.getByTestId("action-edit").click();
    const input = alice.getByTestId("composer-input");
    check((await input.inputValue()) === "hello bob", "the box holds the text to edit");
    await input.fill("hello bob, edited");
    await input.press("Enter");
    await message(bob, "hello bob, edited").getByTestId("edited").waitFor();
  });

  await step("alice's delete appears live for bob", async () => {
    alice.once("dialog", (d) => d.accept());
    const mine = message(alice, "hello bob, edited");
    await mine.hover();
    await mine.getByTestId("action-delete").click();
    await bob.locator('[data-testid=message][data-deleted=true]').filter({ hasText: "deleted" }).waitFor();
    check((await message(bob, "hello bob, edited").count()) === 0, "the text is gone for bob");
  });

  await step("a direct message to bob, who looks at another room, shows his unread badge live", async () => {
    // Bob opens the conversation first and goes back to the room: it is now due a notice.
    await bob.getByTestId("open-direct").click();
    await bob.getByTestId("dialog-userId").fill("alice");
    await bob.getByTestId("dialog-ok").click();
    await bob.getByTestId("room-title").filter({ hasText: "Alice" }).waitFor();
    await roomLink(bob, roomId).click();
    await bob.getByTestId("room-title").filter({ hasText: "general" }).waitFor();

    await alice.getByTestId("open-direct").click();
    await alice.getByTestId("dialog-userId").fill("bob");
    await alice.getByTestId("dialog-ok").click();
    await alice.getByTestId("room-title").filter({ hasText: "Bob" }).waitFor();
    const input = alice.getByTestId("composer-input");
    const dm = bob.getByTestId("section-direct").getByTestId("room-link").filter({ hasText: "Alice" });
    // In a direct conversation, typing reaches bob where he is: on its entry in his list.
    await input.pressSequentially("a word", { delay: 20 });
    await dm.getByTestId("typing-note").waitFor();
    await input.fill("a word in private");
    await input.press("Enter");
    await alice.locator("[data-testid=message]:not([data-pending])").filter({ hasText: "a word in private" }).waitFor();
    await dm.getByTestId("unread-badge").filter({ hasText: "1" }).waitFor();
    await dm.click();
    await message(bob, "a word in private").waitFor();
    await dm.getByTestId("unread-badge").waitFor({ state: "detached" });
  });

  await step("a mention in the room bob is not looking at shows his mention badge live and moves it up", async () => {
    // Bob makes a room of his own: the newest activity, so it is listed first.
    await bob.getByTestId("create-room").click();
    await bob.getByTestId("dialog-name").fill("quiet");
    await bob.getByTestId("dialog-ok").click();
    await bob.getByTestId("room-title").filter({ hasText: "quiet" }).waitFor();
    const order = () =>
      bob.getByTestId("section-rooms").getByTestId("room-link").evaluateAll((links) => links.map((a) => a.dataset.roomId));
    check((await order())[1] === roomId, "general is listed below the newer room");
    await roomLink(alice, roomId).click();
    await alice.getByTestId("room-title").filter({ hasText: "general" }).waitFor();
    const input = alice.getByTestId("composer-input");
    await input.pressSequentially("look @bo");
    await alice.getByTestId("suggestion").first().waitFor();
    await input.press("Tab");
    await input.press("Enter");
    const general = roomLink(bob, roomId);
    await general.getByTestId("mention-badge").filter({ hasText: "@1" }).waitFor();
    check((await order())[0] === roomId, "the room with the new message is listed first");
  });

  await step("bob renames himself: his next message shows the new name on his older ones too", async () => {
    await bob.evaluate(async (id) => {
      await globalThis.tabletalk.api.request("PATCH", `/api/rooms/${id}/members/me`, { nickname: "Bobby" });
      await globalThis.tabletalk.api.createMessage(id, { text: "new name, same bob" });
    }, roomId);
    await message(alice, "new name, same bob").waitFor();
    const older = message(alice, "a reply");
    await older.getByTestId("message-author").filter({ hasText: /^Bobby$/ }).waitFor();
    await older.hover();
    await older.getByTestId("action-reply").click();
    const context = await alice.getByTestId("composer-context").textContent();
    check(context.includes("Replying to Bobby"), `the reply banner names him as he is now: ${context}`);
    await alice.getByTestId("composer-cancel").click();
  });
});
