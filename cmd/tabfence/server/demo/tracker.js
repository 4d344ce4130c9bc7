// The shared issue tracker of the tabfence demo, on tf.connection: one tab
// holds the WebSocket to /realtime for every tab of the browser; the list is
// the replica (store "issues"), kept current by onDelta; edits are
// mutations (issue.put {id, title, done}, issue.delete {id}) shown at once,
// from the pending store, as "saving…" until the server acknowledges them.
//
// Tests read window.tabfenceTracker (conn, issues, pending, status, deltas,
// error) rather than the markup. Query parameters: user (the demo user the
// page signs in as when the browser has no demo cookie), rtProtocol, and
// tracker=0 (no tracker: pages that measure something else).
import { load } from "./dist/tabfence.js";

const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);
const COOKIE = "tabfence_demo_user";

const tracker = {
  user: null,
  conn: null,
  issues: new Map(), // id -> {id, title, done, by, updatedAt}: the replica as this tab knows it
  pending: [], // the pending mutations of every tab, oldest first
  status: null,
  deltas: [], // {version, at, n}: what onDelta delivered
  reloads: 0,
  error: null,
  ready: false,
};
window.tabfenceTracker = tracker;

const cookieUser = () => document.cookie.split("; ").find((c) => c.startsWith(COOKIE + "="))?.slice(COOKIE.length + 1) || "";

// The browser's WebSocket sends cookies, never custom headers: the demo's
// sign-in is a cookie naming the user, set on the first visit.
function signIn() {
  let user = cookieUser();
  if (!user) {
    user = params.get("user") || "demo-user";
    document.cookie = `${COOKIE}=${user}; path=/; SameSite=Strict`;
  }
  return user;
}

function fail(err) {
  tracker.error = err;
  const problem = err?.problem ? ` (${err.problem.title || err.problem.type})` : "";
  $("rt-error").textContent = `${err?.name ?? "Error"}: ${err?.message ?? err}${problem}`;
}

// ---- the list ----

/** The issues as shown: the replica's, with every pending edit applied on top. */
function shown() {
  const rows = new Map([...tracker.issues].map(([id, v]) => [id, { ...v, saving: false, deleting: false }]));
  for (const p of tracker.pending) {
    const id = p.payload?.id ?? p.entity;
    if (!id) continue;
    if (p.op === "issue.delete") {
      const r = rows.get(id);
      if (r) r.deleting = true;
    } else if (p.op === "issue.put") {
      rows.set(id, { ...rows.get(id), ...p.payload, saving: true, deleting: false });
    }
  }
  return [...rows.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

function issueItem(r) {
  const li = document.createElement("li");
  li.dataset.id = r.id;
  li.classList.toggle("done", !!r.done);
  li.classList.toggle("deleting", r.deleting);
  const done = document.createElement("input");
  done.type = "checkbox";
  done.className = "done";
  done.checked = !!r.done;
  done.setAttribute("aria-label", "Done");
  done.addEventListener("change", () => put({ id: r.id, title: r.title, done: done.checked }));
  const title = document.createElement("input");
  title.className = "title";
  title.value = r.title ?? "";
  title.setAttribute("aria-label", "Title");
  title.addEventListener("change", () => title.value.trim() && put({ id: r.id, title: title.value.trim(), done: !!r.done }));
  const note = document.createElement("span");
  if (r.deleting || r.saving) {
    note.className = "saving";
    note.textContent = r.deleting ? "deleting…" : "saving…";
  } else {
    note.className = "by";
    note.textContent = r.by ? `by ${r.by}` : "";
  }
  const del = document.createElement("button");
  del.type = "button";
  del.className = "delete";
  del.textContent = "Delete";
  del.addEventListener("click", () => remove(r.id));
  li.append(done, title, note, del);
  return li;
}

function renderList() {
  const ul = $("issues");
  const focused = document.activeElement?.closest?.("#issues li")?.dataset.id;
  const rows = shown();
  // Keep the row being typed in: redrawing it would drop the user's text.
  ul.replaceChildren(...rows.map((r) => (r.id === focused ? ul.querySelector(`li[data-id="${CSS.escape(r.id)}"]`) ?? issueItem(r) : issueItem(r))));
  $("issues-empty").hidden = rows.length > 0;
}

function applyDelta(d) {
  for (const c of d.changes) {
    if (c.store !== "issues") continue;
    if (c.deleted) tracker.issues.delete(c.key);
    else tracker.issues.set(c.key, c.value);
  }
  tracker.deltas.push({ version: d.version, at: performance.timeOrigin + performance.now(), n: d.changes.length });
  if (tracker.deltas.length > 10000) tracker.deltas.splice(0, 5000);
  renderList();
}

async function reload() {
  const recs = await tracker.conn.read("issues");
  tracker.issues = new Map(recs.map((r) => [r.key, r.value]));
  renderList();
}

// ---- edits ----

const newID = () => `i-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;

function put(issue) {
  tracker.conn.mutate({ op: "issue.put", entity: issue.id, payload: issue }).catch(fail);
}

function remove(id) {
  tracker.conn.mutate({ op: "issue.delete", entity: id, payload: { id } }).catch(fail);
}

// ---- the side panel ----

const stateWords = {
  connecting: "Connecting to the server…",
  ready: "Connected: edits are sent at once",
  unauthorized: "Signed out: not connected (sign in, then Retry)",
  offline: "Offline: edits wait in this browser",
  outdated: "This version of the app is out of date: reload the page",
  closed: "Closed",
};
const closedWords = {
  deleted: "Signed out in another tab: this tab's data was deleted",
  upgraded: "A newer version of the app opened in another tab: reload this one",
  closed: "This tab left the connection",
};

function age(ms) {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

function renderStatus(s) {
  tracker.status = s;
  const role = s.closed ? "closed" : s.leader ? "leader" : "follower";
  document.body.dataset.connection = role;
  $("rt-role").textContent = s.closed
    ? closedWords[s.closed] ?? "Closed"
    : s.leader
      ? "This tab holds the connection"
      : "Another tab holds the connection";
  $("rt-state").textContent = stateWords[s.state] ?? s.state;
  $("rt-token").textContent = s.token ? String(s.token) : "—";
  $("rt-pending").textContent = s.pending
    ? `${s.pending} edit${s.pending === 1 ? "" : "s"}, oldest ${age(s.oldestPendingAgeMs)}`
    : "nothing";
  $("rt-version").textContent = String(s.version);
  $("rt-offline").checked = s.offline; // the switch is the browser's: any tab may have flipped it
  if (!tracker.error) $("rt-error").textContent = s.lastError ?? "none";
  $("rt-retry").hidden = s.state !== "unauthorized" || !!s.closed;
  $("rt-signout").textContent = s.closed ? "Sign in again" : "Sign out";
}

// ---- start ----

function wire(conn) {
  conn.onDelta(applyDelta);
  conn.onReload(() => {
    tracker.reloads++;
    reload().catch(fail);
  });
  conn.onPending((p) => {
    tracker.pending = p;
    renderList();
  });
  conn.onStatus(renderStatus);
  // The pending edits' age grows without a status change.
  setInterval(() => tracker.status?.pending && renderStatus(conn.status()), 1000);

  $("issue-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const title = $("issue-title").value.trim();
    if (!title) return;
    put({ id: newID(), title, done: false });
    $("issue-title").value = "";
  });
  $("rt-offline").addEventListener("change", (ev) => conn.setOffline(ev.target.checked).catch(fail));
  // Signed out (the server refused the session): sign in again in this
  // tab, then ask the leader, wherever it is, to connect again.
  $("rt-retry").addEventListener("click", () => {
    tracker.user = signIn();
    $("rt-user").textContent = tracker.user;
    conn.retry().catch(fail);
  });
  $("rt-signout").addEventListener("click", async () => {
    if (tracker.status?.closed) {
      location.reload(); // signs in again on load
      return;
    }
    document.cookie = `${COOKIE}=; path=/; max-age=0`;
    await conn.signOut().catch(fail);
  });
}

if (params.get("tracker") !== "0") {
  try {
    tracker.user = signIn();
    $("rt-user").textContent = tracker.user;
    const tf = await load();
    tracker.conn = await tf.connection({
      scope: `tracker-${tracker.user}`, // one replica per user of this browser
      protocol: Number(params.get("rtProtocol") || "1"),
      url: "/realtime",
      replica: { stores: ["issues"] },
      user: tracker.user,
      snapshot: "/realtime/snapshot", // a reset (the server forgot this browser's version) reloads every issue
    });
    // Subscribe, then read: a delta that lands meanwhile is in the replica
    // already (written before it is announced), so nothing falls between.
    wire(tracker.conn);
    await reload();
    tracker.pending = await tracker.conn.pending();
    renderList();
    renderStatus(tracker.conn.status());
    tracker.ready = true;
  } catch (err) {
    document.body.dataset.connection = "error";
    $("rt-role").textContent = "No connection";
    fail(err);
  }
} else {
  $("rt-role").textContent = "Tracker off (?tracker=0)";
}
