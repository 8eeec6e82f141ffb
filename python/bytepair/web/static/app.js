// The bytepair serve page: three views (tokenize, compare, chat) over the JSON API of
// bytepair/web/server.py. No framework and nothing fetched from elsewhere.
"use strict";

const DEBOUNCE_MS = 150;
const COLOURS = 10; // .c0 ... .c9 in app.css
const SAMPLE =
  "Many words map to one token, but some don't: indivisible.\n\n" +
  "Unicode characters like emojis may be split into many tokens containing the underlying bytes: 🤚🏾\n\n" +
  "Sequences of characters commonly found next to each other may be grouped together: 1234567890\n\n" +
  "def add(a, b):\n\treturn a + b  # <|endoftext|>\n";
const CHAT_SAMPLE = [
  { role: "system", content: "You are a helpful assistant." },
  { role: "user", content: "How many tokens is this conversation?" },
];

const $ = (id) => document.getElementById(id);
const state = { tokenizers: [], shown: {} }; // shown: view name -> last response (re-rendered on toggles)

async function api(path, body) {
  const response = await fetch(path, body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  let data;
  try {
    data = await response.json();
  } catch (e) {
    throw new Error(`${response.status} ${response.statusText}`);
  }
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function debounced(fn) {
  let timer = null;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(fn, DEBOUNCE_MS);
  };
}

// Runs the latest request of a view only: answers to older ones are dropped. A request
// is counted when it is asked for, not when its wait ends, so that an answer arriving
// while a newer edit waits out its debounce is dropped too, and the view stays "busy"
// (it was shown, and the view marked ready, with the newer text still to come).
function latest(view, container, errorBox, request, render) {
  let seq = 0;
  const run = debounced(async () => {
    const mine = seq;
    try {
      const data = await request();
      if (mine !== seq) return;
      errorBox.textContent = "";
      state.shown[view] = data;
      render(data);
    } catch (e) {
      if (mine !== seq) return;
      errorBox.textContent = e.message;
    }
    container.dataset.state = "ready";
  });
  return () => {
    seq += 1;
    container.dataset.state = "busy";
    run();
  };
}

function specialOptions() {
  return $("allow-special").checked ? { allowed_special: "all" } : { disallowed_special: [] };
}

// -- tokens --------------------------------------------------------------------------

// A token whose bytes are not whole characters: its whole characters as text, the
// rest as \xNN (" \xf0\x9f" is a space and the first half of an emoji).
function partialText(hex) {
  const bytes = hex.split(" ").map((b) => parseInt(b, 16));
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let out = "";
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i];
    const size = lead < 0x80 ? 1 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
    try {
      if (size === 0 || i + size > bytes.length) throw new Error("incomplete");
      out += decoder.decode(new Uint8Array(bytes.slice(i, i + size)));
      i += size;
    } catch (e) {
      out += "\\x" + bytes[i].toString(16).padStart(2, "0");
      i += 1;
    }
  }
  return out;
}

function shownText(token, whitespace) {
  const text = token.partial ? partialText(token.bytes_hex) : token.text;
  if (!whitespace || token.special) return text;
  return text.replace(/ /g, "·").replace(/\t/g, "→").replace(/\n/g, "↵\n");
}

function renderTokens(container, tokens, { diff = false } = {}) {
  const whitespace = $("show-ws").checked;
  const fragment = document.createDocumentFragment();
  tokens.forEach((token, n) => {
    const span = document.createElement("span");
    span.className = `tok c${n % COLOURS}`;
    if (token.special) span.classList.add("special");
    if (token.partial) span.classList.add("partial");
    if (diff && token.differs) span.classList.add("diff");
    span.dataset.tokenId = token.id;
    span.textContent = shownText(token, whitespace);
    span.token = token;
    fragment.appendChild(span);
  });
  container.replaceChildren(fragment);
}

function stat(label, value, id) {
  const item = document.createElement("span");
  item.className = "stat";
  const number = document.createElement("b");
  if (id) number.id = id;
  number.textContent = value;
  item.append(number, " " + label);
  return item;
}

function renderStats(container, data, prefix) {
  const perToken = data.count ? (data.bytes / data.count).toFixed(2) : "–";
  container.replaceChildren(
    stat("tokens", data.count, `${prefix}-count`),
    stat("characters", data.chars),
    stat("bytes", data.bytes),
    stat("bytes / token", perToken),
  );
}

// The hover card: id, text, bytes, length and (for BPE) the merge that made the token.
function showTip(event) {
  const span = event.target.closest(".tok");
  const tip = $("tip");
  if (!span || !span.token) {
    tip.hidden = true;
    return;
  }
  const t = span.token;
  const rows = [
    ["id", t.id],
    ["text", JSON.stringify(t.text) + (t.partial ? " (part of a character)" : "")],
    ["bytes", t.bytes_hex],
    ["length", `${t.byte_end - t.byte_start} byte${t.byte_end - t.byte_start === 1 ? "" : "s"}`],
  ];
  if (t.special) rows.push(["merge", "special token"]);
  else if (t.merge)
    rows.push(["merge", `${t.merge.left} ${JSON.stringify(t.merge.left_text)} + ${t.merge.right} ${JSON.stringify(t.merge.right_text)}`]);
  else rows.push(["merge", "a single byte"]);
  const table = document.createElement("table");
  for (const [key, value] of rows) {
    const row = table.insertRow();
    row.insertCell().textContent = key;
    row.insertCell().textContent = value;
  }
  tip.replaceChildren(table);
  tip.hidden = false;
  const x = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
  const y = event.clientY + 18 + tip.offsetHeight > window.innerHeight ? event.clientY - tip.offsetHeight - 10 : event.clientY + 18;
  tip.style.left = `${Math.max(x, 4)}px`;
  tip.style.top = `${Math.max(y, 4)}px`;
}

// -- views ---------------------------------------------------------------------------

function fillSelect(select, names, chosen) {
  select.replaceChildren(...names.map((name) => new Option(name, name, false, name === chosen)));
}

function setupTokenize() {
  const render = (data) => {
    renderStats($("tok-stats"), data, "tok");
    renderTokens($("tok-tokens"), data.tokens);
    $("tok-ids").value = data.ids.join(", ");
  };
  const update = latest("tokenize", $("tok-tokens"), $("tok-error"), () => api("/api/encode", {
    text: $("tok-text").value,
    tokenizer: $("tok-select").value,
    ...specialOptions(),
  }), render);
  $("tok-text").value = SAMPLE;
  $("tok-text").addEventListener("input", update);
  $("tok-select").addEventListener("change", update);
  $("copy-ids").addEventListener("click", async () => {
    const ids = $("tok-ids");
    try {
      await navigator.clipboard.writeText(ids.value);
    } catch (e) {
      ids.select();
      document.execCommand("copy");
    }
    $("copied").textContent = "copied";
    setTimeout(() => ($("copied").textContent = ""), 1200);
  });
  return { update, rerender: () => state.shown.tokenize && render(state.shown.tokenize) };
}

function setupCompare(names, defaults) {
  const pickers = $("cmp-pickers");
  const selects = () => [...pickers.querySelectorAll("select")];
  const addPicker = (chosen) => {
    const select = document.createElement("select");
    fillSelect(select, names, chosen);
    select.addEventListener("change", update);
    pickers.insertBefore(select, $("cmp-add"));
  };
  const render = (data) => {
    const columns = data.results.map((result) => {
      const column = document.createElement("div");
      column.className = "column";
      const head = document.createElement("h3");
      head.textContent = result.tokenizer;
      const stats = document.createElement("div");
      stats.className = "stats";
      stats.append(stat("tokens", result.count), stat("differ", result.differing));
      stats.firstChild.firstChild.className = "cmp-count";
      const tokens = document.createElement("div");
      tokens.className = "tokens";
      renderTokens(tokens, result.tokens, { diff: true });
      column.append(head, stats, tokens);
      return column;
    });
    $("cmp-results").replaceChildren(...columns);
  };
  const update = latest("compare", $("cmp-results"), $("cmp-error"), () => api("/api/compare", {
    text: $("cmp-text").value,
    tokenizers: selects().map((s) => s.value),
    ...specialOptions(),
  }), render);
  defaults.forEach(addPicker);
  $("cmp-add").addEventListener("click", () => {
    if (selects().length >= 4) return;
    addPicker(names.find((n) => !selects().some((s) => s.value === n)) || names[0]);
    update();
  });
  $("cmp-remove").addEventListener("click", () => {
    if (selects().length <= 2) return;
    selects().pop().remove();
    update();
  });
  $("cmp-text").value = SAMPLE;
  $("cmp-text").addEventListener("input", update);
  return { update, rerender: () => state.shown.compare && render(state.shown.compare) };
}

function setupChat(names, chosen) {
  const box = $("chat-messages");
  const addMessage = (role, content) => {
    const row = document.createElement("div");
    row.className = "message";
    const select = document.createElement("select");
    fillSelect(select, ["system", "user", "assistant"], role);
    const text = document.createElement("textarea");
    text.value = content;
    text.spellcheck = false;
    text.setAttribute("aria-label", "message");
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "×";
    remove.title = "remove this message";
    remove.addEventListener("click", () => {
      row.remove();
      update();
    });
    select.addEventListener("change", update);
    text.addEventListener("input", update);
    row.append(select, text, remove);
    box.appendChild(row);
  };
  const render = (data) => {
    renderStats($("chat-stats"), data, "chat");
    renderTokens($("chat-tokens"), data.tokens);
  };
  const update = latest("chat", $("chat-tokens"), $("chat-error"), () => api("/api/chat", {
    tokenizer: $("chat-select").value,
    messages: [...box.querySelectorAll(".message")].map((row) => ({
      role: row.querySelector("select").value,
      content: row.querySelector("textarea").value,
    })),
  }), render);
  fillSelect($("chat-select"), names, chosen);
  $("chat-select").addEventListener("change", update);
  CHAT_SAMPLE.forEach((m) => addMessage(m.role, m.content));
  $("chat-add").addEventListener("click", () => {
    const last = box.querySelector(".message:last-child select");
    addMessage(last && last.value === "user" ? "assistant" : "user", "");
    update();
  });
  return { update, rerender: () => state.shown.chat && render(state.shown.chat) };
}

async function main() {
  const { tokenizers, default: chosen } = await api("/api/tokenizers");
  state.tokenizers = tokenizers;
  const names = tokenizers.map((t) => t.name);
  fillSelect($("tok-select"), names, chosen);
  const other = chosen === "gpt2" ? "cl100k_base" : "gpt2";
  const views = {
    tokenize: setupTokenize(),
    compare: setupCompare(names, [other, chosen].filter((n) => names.includes(n))),
    chat: setupChat(tokenizers.filter((t) => t.chat).map((t) => t.name), chosen),
  };
  for (const tab of document.querySelectorAll(".tab")) {
    tab.addEventListener("click", () => {
      for (const other of document.querySelectorAll(".tab")) other.classList.toggle("active", other === tab);
      for (const name of Object.keys(views)) $(`view-${name}`).hidden = name !== tab.dataset.view;
    });
  }
  $("show-ws").addEventListener("change", () => Object.values(views).forEach((v) => v.rerender()));
  $("allow-special").addEventListener("change", () => {
    views.tokenize.update();
    views.compare.update();
  });
  document.addEventListener("mouseover", showTip);
  Object.values(views).forEach((v) => v.update());
}

main().catch((e) => {
  $("tok-error").textContent = `could not reach the server: ${e.message}`;
});
