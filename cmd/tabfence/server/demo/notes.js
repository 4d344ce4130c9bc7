// The shared notes list of the tabfence demo: edits go through the durable
// outbox (tf.outbox) to POST /api/notes, the list comes from GET /api/notes.
// Every tab shows which tab sends, with which token, and the queue's counts;
// the pause switch stops sending (for every tab: the queue is shared).
//
// Tests read window.tabfenceNotes (outbox, status, events) rather than the
// markup. Query parameters: user, the outbox's (notes-options.js: outbox,
// protocol, schema, maxAttempts, backoffBase, backoffCap, statusTimeout,
// stallAfter, concurrency, bgsync=0, auth, batch=0, batchMax), list=0 (no notes list: the
// benchmarks measure the outbox, not a list that refetches and redraws every
// note of the user after each burst of acks), sw=1: register the demo's
// Service Worker (/sw.js with the outbox's parameters; on by default for a
// visitor's page, which has no parameters), and auth=cookie: the
// credentials are a cookie naming the user (every tab of the browser sends
// it, whoever set it) instead of a header per record's user;
// notes.switchUser(user) then switches the user as a login page would.
import { load } from "./dist/tabfence.js";
import { notesOptions, workerSearch } from "./notes-options.js";

const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);

const cookieAuth = params.get("auth") === "cookie";
const setCookie = (user) => { document.cookie = `tabfence_demo_user=${user}; path=/; SameSite=Strict`; };

const notes = {
  user: params.get("user") || "demo-user",
  name: notesOptions(params).name,
  outbox: null,
  status: null,
  events: [], // outbox events {kind, at, ...}, never payloads
  error: null,
  ready: false,
  // The Service Worker's registration: "off", "registering", "registered",
  // "unsupported" (no serviceWorker) or "failed: <error>".
  sw: "off",
};
window.tabfenceNotes = notes;

// Background Sync is a trigger, not the queue: the page never waits for the
// worker, and a failed registration changes nothing but who sends when
// every tab is closed.
function registerWorker() {
  if (!(params.has("sw") ? params.get("sw") === "1" : location.search === "")) return;
  if (!("serviceWorker" in navigator)) {
    notes.sw = "unsupported";
    return;
  }
  notes.sw = "registering";
  const search = workerSearch(params);
  navigator.serviceWorker.register("/sw.js" + (search ? `?${search}` : ""), { type: "module" }).then(
    () => { notes.sw = "registered"; renderSync(); },
    (err) => { notes.sw = `failed: ${err.name}: ${err.message}`; renderSync(); });
}

function renderSync() {
  const el = $("ob-sync");
  if (!el) return;
  const hasSync = typeof SyncManager !== "undefined";
  el.textContent = notes.sw === "registered"
    ? (hasSync ? "on: the Service Worker sends what is left when every tab is closed" : "no Background Sync in this browser: tabs send")
    : notes.sw;
}
registerWorker();
renderSync();

function fail(err) {
  notes.error = err;
  $("notes-error").hidden = false;
  $("notes-error").textContent = `${err.name}: ${err.message}`;
}

// owner says which tab sends the notes: the flush lock is held only while
// flushing, so "this tab" is the owner recorded in the shared lease row,
// not whether this tab holds the lock at this instant.
function owner(s) {
  if (s.leader || s.flushing || (s.ownerId && s.ownerId === s.id)) return "this tab";
  return s.ownerId ? `another tab (${s.ownerId.slice(0, 8)})` : "no tab yet";
}

let lastAcked = -1;
function render(s) {
  notes.status = s;
  $("ob-leader").textContent = owner(s);
  const side = $("side-outbox");
  if (side) side.textContent = owner(s);
  // The status is every tab's: when the count of sent notes moves, every
  // tab refreshes its list, not only the one that sent them.
  if (s.acked !== lastAcked) {
    lastAcked = s.acked;
    refreshList();
  }
  $("ob-token").textContent = s.leaseToken ? `${s.leaseToken}${s.fenceToken ? ` / server ${s.fenceToken}` : ""}` : "—";
  for (const k of ["pending", "sending", "failed", "deadLetter", "conflict", "acked"]) $(`ob-${k}`).textContent = String(s[k]);
  $("ob-offline").checked = s.paused;
  const err = s.lastError ? `${s.lastError.code}: ${s.lastError.message}` : "—";
  const next = s.nextAttemptAt ? `, next attempt ${new Date(s.nextAttemptAt).toLocaleTimeString()}` : "";
  $("ob-last-error").textContent = s.failing ? `sending fails (${s.failure}${next}): ${err}` : err;
}

let listTimer = 0;
function refreshList() {
  if (params.get("list") === "0") return;
  clearTimeout(listTimer);
  listTimer = setTimeout(async () => {
    try {
      const res = await fetch("/api/notes", cookieAuth ? {} : { headers: { "X-Demo-User": notes.user } });
      if (!res.ok) return;
      const list = await res.json();
      const ul = $("notes-list");
      ul.replaceChildren(...list.map((n) => {
        const li = document.createElement("li");
        li.textContent = `${n.id}: ${n.text}`;
        return li;
      }));
    } catch {
      // offline: the outbox keeps the edits; the list refreshes later
    }
  }, 100);
}

try {
  const tf = await load();
  if (cookieAuth) setCookie(notes.user);
  notes.outbox = await tf.outbox({ ...notesOptions(params), user: notes.user });
  $("notes-user").textContent = notes.user;
  // A switch of user as a login page makes it: the credentials change (the
  // server's answer sets the cookie), then the outbox logs out and in.
  notes.switchUser = async (user) => {
    if (cookieAuth) setCookie(user);
    await notes.outbox.logout({ purge: false });
    await notes.outbox.login(user);
    notes.user = user;
    $("notes-user").textContent = user;
  };
  notes.outbox.onStatus(render);
  notes.outbox.onEvent((e) => {
    notes.events.push(e);
    if (notes.events.length > 20000) notes.events.splice(0, 10000);
  });
  render(await notes.outbox.status());
  $("notes-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const id = $("note-id").value.trim() || `note-${Date.now()}`;
    const text = $("note-text").value;
    try {
      await notes.outbox.enqueue({
        operationType: "edit-note", entityType: "note", entityId: id, operationKey: `note:${id}`,
        payload: { id, text },
      });
      $("note-text").value = "";
    } catch (err) {
      fail(err);
    }
  });
  $("ob-offline").addEventListener("change", (ev) => {
    (ev.target.checked ? notes.outbox.pause() : notes.outbox.resume()).catch(fail);
  });
  $("ob-flush").addEventListener("click", () => notes.outbox.flush().catch(fail));
  notes.ready = true;
} catch (err) {
  fail(err);
}
