/*
 * Partners web chat.
 *
 * Sending: every message gets an id chosen here and waits in a saved outbox
 * until the gateway answers 2xx -- which it does only once the message is
 * durable. Until then it is retried with the same id (the gateway drops
 * duplicates), so a reload or a network blip neither loses nor doubles it.
 *
 * The session is a secret the gateway keeps in an HttpOnly cookie: this script
 * never sees it. It asks "api/session" first, which keeps the cookie's session
 * or starts one, and answers with the learner id (not a secret) that names
 * this page's saved state. A new session first sends "/start", hidden: the
 * gateway answers it with the partner's greeting, as Telegram's Start button does.
 *
 * Receiving: a Server-Sent Events stream of this session's events. A
 * "message" event with an id already on screen replaces that bubble's
 * content: that is how a streamed answer grows. The last event id is saved,
 * so a reloaded page asks only for what it missed.
 */
(function () {
  "use strict";

  var MAX_CHARS = Number(document.body.dataset.maxChars) || 8000;
  var PAGE_STORAGE = "partners-webchat:" + location.pathname + ":";
  var STORAGE = PAGE_STORAGE;                  // + learner id + ":" once the session is known
  var KEEP_ENTRIES = 200;
  var TYPING_TIMEOUT_MS = 8000;
  var PERMANENT = { 400: true, 403: true, 413: true, 415: true, 422: true };
  var JSON_HEADERS = { "Content-Type": "application/json" };

  var els = {
    list: document.getElementById("messages"),
    scroller: document.querySelector(".chat-main"),
    typing: document.getElementById("typing"),
    form: document.getElementById("composer"),
    text: document.getElementById("text"),
    error: document.getElementById("composer-error"),
    connection: document.getElementById("connection"),
  };

  // ------------------------------------------------------------------ storage

  function load(name, fallback) {
    try {
      var raw = localStorage.getItem(STORAGE + name);
      return raw === null ? fallback : JSON.parse(raw);
    } catch (err) {
      return fallback;
    }
  }

  function save(name, value) {
    try {
      localStorage.setItem(STORAGE + name, JSON.stringify(value));
    } catch (err) {
      // Storage full or disabled: the chat still works for this page view.
    }
  }

  function newId() {
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) { return (b + 0x100).toString(16).slice(1); }).join("");
  }

  // Pages before the session cookie kept the session itself here; a secret has no business in storage.
  try { localStorage.removeItem(PAGE_STORAGE + "session"); } catch (err) { /* storage disabled */ }

  var outbox = [];                             // [{message_id, text, hidden}] not yet accepted, oldest first
  var lastEventId = "";
  var entries = new Map();                     // id -> {id, role, text | html, state, final, attachments}
  var bubbles = new Map();                     // id -> <li>

  var saveTimer = null;
  function saveTranscriptSoon() {
    if (saveTimer === null) saveTimer = setTimeout(saveTranscript, 300);
  }
  function saveTranscript() {
    clearTimeout(saveTimer);
    saveTimer = null;
    save("transcript", Array.from(entries.values()).slice(-KEEP_ENTRIES));
  }
  window.addEventListener("pagehide", saveTranscript);

  // ------------------------------------------------------------------ rendering

  function nearBottom() {
    var s = els.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 80;
  }

  function bubbleFor(entry) {
    var li = bubbles.get(entry.id);
    if (!li) {
      li = document.createElement("li");
      li.className = "bubble " + entry.role;
      li.dataset.id = entry.id;
      bubbles.set(entry.id, li);
      els.list.appendChild(li);
    }
    return li;
  }

  function renderLearner(li, entry) {
    var body = document.createElement("p");
    body.className = "body";
    body.textContent = entry.text; // the learner's own words: never parsed as HTML
    var meta = document.createElement("span");
    meta.className = "meta";
    meta.textContent = entry.state === "failed" ? "Not sent: " + (entry.error || "refused")
      : entry.state === "sending" ? "Sending…" : "";
    li.replaceChildren(body, meta);
    li.dataset.state = entry.state;
  }

  function renderPartner(li, entry) {
    var body = document.createElement("div");
    body.className = "body";
    // innerHTML is safe here only because this HTML comes from the gateway's renderer,
    // which escapes everything the model wrote (raw HTML is switched off) and emits
    // only its own formatting tags. The page's Content-Security-Policy is a second guard.
    body.innerHTML = entry.html;
    body.querySelectorAll("a[href]").forEach(function (a) {
      a.target = "_blank";
      a.rel = "noopener noreferrer";
    });
    var nodes = [body];
    (entry.attachments || []).forEach(function (att) {
      if (!/^https?:\/\//i.test(att.url)) return;
      var link = document.createElement("a");
      link.href = att.url;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      link.className = "attachment";
      if (att.kind === "image") {
        var img = document.createElement("img");
        img.src = att.url;
        img.alt = att.name || "image";
        img.loading = "lazy";
        link.appendChild(img);
      } else {
        link.textContent = att.name || att.url;
      }
      nodes.push(link);
    });
    li.replaceChildren.apply(li, nodes);
    li.classList.toggle("streaming", !entry.final);
  }

  function render(entry) {
    var follow = nearBottom();
    var li = bubbleFor(entry);
    if (entry.role === "learner") renderLearner(li, entry);
    else renderPartner(li, entry);
    // While any answer is still growing, ask screen readers to wait for the finished text.
    els.list.setAttribute("aria-busy", String(els.list.querySelector(".streaming") !== null));
    if (follow) els.scroller.scrollTop = els.scroller.scrollHeight;
  }

  function upsert(entry) {
    entries.set(entry.id, entry);
    render(entry);
    saveTranscriptSoon();
  }

  function showError(text) {
    els.error.textContent = text;
  }

  // ------------------------------------------------------------------ sending

  function sleep(ms) {
    return new Promise(function (resolve) { setTimeout(resolve, ms); });
  }

  async function deliver(item) {
    var delay = 500;
    for (;;) {
      try {
        var response = await fetch("api/messages", {
          method: "POST",
          headers: JSON_HEADERS,
          body: JSON.stringify({ message_id: item.message_id, text: item.text }),
        });
        if (response.ok) return { ok: true };
        if (response.status === 401) {
          // The cookie is gone (cleared, expired): carry on in a fresh session.
          await openSession();
          continue;
        }
        if (PERMANENT[response.status]) {
          var body = await response.json().catch(function () { return {}; });
          return { ok: false, error: body.error || "refused (" + response.status + ")" };
        }
      } catch (err) {
        // A network error: the gateway may or may not have the message; sending it again is safe.
      }
      await sleep(delay + Math.random() * delay * 0.5);
      delay = Math.min(delay * 2, 15000);
    }
  }

  var pumping = false;
  var ready = false;                           // the session is known (see start)
  async function pump() {
    if (pumping || !ready) return;
    pumping = true;
    try {
      // One at a time, oldest first, so the partner reads the messages in the order written.
      while (outbox.length > 0) {
        var item = outbox[0];
        var result = await deliver(item);
        outbox.shift();
        save("outbox", outbox);
        if (item.hidden) continue;
        var entry = entries.get(item.message_id) || { id: item.message_id, role: "learner", text: item.text };
        entry.state = result.ok ? "sent" : "failed";
        entry.error = result.error;
        upsert(entry);
        if (!result.ok) showError("Your message was not sent: " + result.error);
      }
    } finally {
      pumping = false;
    }
  }

  function submit() {
    var text = els.text.value;
    if (!text.trim()) return;
    if (Array.from(text).length > MAX_CHARS) {
      showError("That message is too long: the limit is " + MAX_CHARS + " characters.");
      return;
    }
    showError("");
    var id = newId();
    upsert({ id: id, role: "learner", text: text, state: "sending" });
    outbox.push({ message_id: id, text: text });
    save("outbox", outbox);
    els.text.value = "";
    els.scroller.scrollTop = els.scroller.scrollHeight;
    pump();
  }

  els.form.addEventListener("submit", function (event) {
    event.preventDefault();
    submit();
  });
  els.text.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    }
  });

  // ------------------------------------------------------------------ receiving

  var typingTimer = null;
  function showTyping() {
    els.typing.hidden = false;
    clearTimeout(typingTimer);
    typingTimer = setTimeout(hideTyping, TYPING_TIMEOUT_MS);
  }
  function hideTyping() {
    clearTimeout(typingTimer);
    els.typing.hidden = true;
  }

  function remember(event) {
    if (event.lastEventId) {
      lastEventId = event.lastEventId;
      save("lastEventId", lastEventId);
    }
  }

  function onMessage(data) {
    hideTyping();
    var entry = entries.get(data.id) || { id: data.id, role: "partner" };
    entry.html = data.html;
    entry.final = data.final;
    entry.attachments = data.attachments || [];
    upsert(entry);
  }

  function setConnection(text) {
    els.connection.textContent = text;
  }

  var reconnectDelay = 1000;
  function connect() {
    var url = "api/events";                    // the session goes in its cookie, never in a URL
    if (lastEventId) url += "?last_event_id=" + encodeURIComponent(lastEventId);
    var source = new EventSource(url);
    source.addEventListener("open", function () {
      reconnectDelay = 1000;
      setConnection("");
    });
    source.addEventListener("error", function () {
      setConnection("Reconnecting…");
      // The browser retries by itself after a dropped stream; after a refused one it gives up,
      // so start a fresh stream (which carries the last event id) with backoff.
      if (source.readyState === EventSource.CLOSED) {
        setTimeout(connect, reconnectDelay);
        reconnectDelay = Math.min(reconnectDelay * 2, 30000);
      }
    });
    source.addEventListener("message", function (event) {
      remember(event);
      onMessage(JSON.parse(event.data));
    });
    source.addEventListener("typing", function (event) {
      remember(event);
      showTyping();
    });
  }

  // ------------------------------------------------------------------ start

  // Asks the gateway which session this browser has (it sets the cookie for a new one).
  async function openSession() {
    var delay = 500;
    for (;;) {
      try {
        var response = await fetch("api/session", { method: "POST", headers: JSON_HEADERS, body: "{}" });
        if (response.ok) {
          var answer = await response.json();
          STORAGE = PAGE_STORAGE + answer.learner + ":";
          return answer;
        }
      } catch (err) {
        // Offline for now: try again.
      }
      setConnection("Connecting…");
      await sleep(delay + Math.random() * delay * 0.5);
      delay = Math.min(delay * 2, 15000);
    }
  }

  async function start() {
    setConnection("Connecting…");
    var answer = await openSession();
    outbox = load("outbox", []).concat(outbox); // anything written while the session was asked for
    if (answer.new) {
      // A new session opens the chat: the gateway answers "/start" with the partner's greeting.
      // It goes through the outbox like any message (so exactly once), but is never shown as sent.
      outbox.unshift({ message_id: "start", text: "/start", hidden: true });
      save("outbox", outbox);
    }
    lastEventId = load("lastEventId", "");
    load("transcript", []).forEach(function (entry) {
      entries.set(entry.id, entry);
      render(entry);
    });
    els.scroller.scrollTop = els.scroller.scrollHeight;
    connect();
    ready = true;
    pump();
  }

  els.text.focus();
  start();
})();
