// A message's text both ways. The server stores sanitized HTML (it sanitizes every send and
// edit itself); the composer is plain text. Typed text becomes paragraphs with line breaks,
// and `@<member id>` becomes the mention element the server counts
// (`<span data-type="mention" data-id="…">@…</span>`). Editing turns it back.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
export const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => ESCAPES[c]);

/** Plain text from the composer to the HTML the API takes; `isMember(id)` marks mentions. */
export function toHtml(text, isMember = () => false) {
  const paragraphs = text.trim().split(/\n{2,}/);
  return paragraphs
    .map((p) => {
      const html = escapeHtml(p).replace(/(^|\s)@([^\s@<>&"']+)/g, (all, space, id) => {
        const raw = id.replace(/&#39;|&quot;|&amp;|&lt;|&gt;/g, (e) => ({ "&#39;": "'", "&quot;": '"', "&amp;": "&", "&lt;": "<", "&gt;": ">" })[e]);
        return isMember(raw) ? `${space}<span data-type="mention" data-id="${id}">@${id}</span>` : all;
      });
      return `<p>${html.replace(/\n/g, "<br>")}</p>`;
    })
    .join("");
}

/** The stored HTML back to plain text for editing. */
export function toText(html) {
  const doc = new DOMParser().parseFromString(`<body>${html}</body>`, "text/html");
  for (const mention of doc.querySelectorAll('span[data-type="mention"]')) {
    mention.replaceWith(`@${mention.dataset.id ?? mention.textContent.replace(/^@/, "")}`);
  }
  for (const br of doc.querySelectorAll("br")) br.replaceWith("\n");
  const blocks = [...doc.body.children].filter((e) => e.tagName === "P");
  if (blocks.length) return blocks.map((p) => p.textContent).join("\n\n");
  return doc.body.textContent;
}

/** The HTML as a sanitized fragment to put in the page (the server sanitized it already;
 *  this drops scripts, event handlers and javascript: links again, in case the page ever
 *  talks to a server that did not). Nothing in a body loads from elsewhere: an image becomes
 *  its alt text (a remote image in a private room is a read receipt for whoever serves it),
 *  and the page's content policy refuses one that slipped through. */
export function fragment(html) {
  const template = document.createElement("template");
  template.innerHTML = html;
  for (const el of template.content.querySelectorAll("*")) {
    if (/^(SCRIPT|STYLE|IFRAME|OBJECT|EMBED|FORM|LINK|META|VIDEO|AUDIO|SOURCE|PICTURE|svg)$/.test(el.tagName)) {
      el.remove();
      continue;
    }
    if (el.tagName === "IMG") {
      el.replaceWith(el.getAttribute("alt") ?? "");
      continue;
    }
    for (const attr of [...el.attributes]) {
      if (/^on/i.test(attr.name) || (/^(href|src)$/i.test(attr.name) && /^\s*javascript:/i.test(attr.value))) {
        el.removeAttribute(attr.name);
      }
    }
    if (el.tagName === "A") {
      el.target = "_blank";
      el.rel = "noopener noreferrer";
    }
  }
  return template.content;
}
