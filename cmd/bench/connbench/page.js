// A tab of the connection bench (connbench). ?side=tf joins tf.connection;
// ?side=raw is the raw-JavaScript baseline: the tab that wins a Web Lock
// (or every tab, with role=each) holds its own WebSocket to the same
// endpoint, speaks the protocol with rtCodec, and forwards each delta on
// one BroadcastChannel hop to the other tabs. Both sides record, per delta
// version, when it was applied in this tab (page clock, comparable with the
// bench's server clock) in window.__rtb, which the bench reads.
(() => {
  const p = new URLSearchParams(location.search);
  const side = p.get("side"), scope = p.get("scope"), url = p.get("url"), role = p.get("role") || "lock";
  const now = () => performance.timeOrigin + performance.now();
  const rtb = {
    side, ready: false, joined: false, leader: false, state: "starting", version: 0,
    error: null, unavailable: null, applied: {}, acks: 0, lastAckAt: 0, mutErrors: [],
  };
  window.__rtb = rtb;
  const waiters = new Map(); // version -> [resolve]
  // The demo server authenticates /realtime by this cookie (demo only).
  document.cookie = "tabfence_demo_user=bench; path=/; SameSite=Strict";

  const keys = new Set(); // the record keys of every change applied here
  rtb.hasKey = (key) => keys.has(key);
  function applied(version, asLeader, changes) {
    for (const c of changes) keys.add(c.key);
    if (rtb.applied[version] === undefined) rtb.applied[version] = { at: now(), leader: asLeader };
    if (version > rtb.version) rtb.version = version;
    for (const f of waiters.get(version) || []) f();
    waiters.delete(version);
  }
  // wait resolves with {at, leader} once version was applied here.
  rtb.wait = (version, ms) => new Promise((resolve, reject) => {
    if (rtb.applied[version]) return resolve(rtb.applied[version]);
    const timer = setTimeout(() => reject(new Error(`version ${version} not applied in ${ms} ms (at ${rtb.version})`)), ms);
    const list = waiters.get(version) || [];
    list.push(() => { clearTimeout(timer); resolve(rtb.applied[version]); });
    waiters.set(version, list);
  });
  const acked = () => { rtb.acks++; rtb.lastAckAt = now(); };
  const failed = (e) => { rtb.error = String(e && e.stack || e); };

  async function startTF() {
    const { load } = await import("/dist/tabfence.js");
    const tf = await load();
    if (typeof tf.connection !== "function") {
      rtb.unavailable = "this build of the runtime has no tf.connection";
      return;
    }
    const conn = await tf.connection({ scope, url, replica: { stores: ["issues"] } });
    const status = () => {
      const s = conn.status();
      rtb.leader = s.leader; rtb.state = s.state; rtb.ready = s.state === "ready"; rtb.joined = true;
    };
    conn.onStatus(status);
    status();
    conn.onDelta((d) => applied(d.version, conn.status().leader, d.changes));
    rtb.setOffline = (off) => conn.setOffline(off);
    rtb.pendingCount = async () => (await conn.pending()).length;
    rtb.mutateAll = (n, prefix) => {
      for (let i = 0; i < n; i++) {
        const id = `${prefix}-${i}`;
        conn.mutate({ op: "issue.put", entity: "issue", id, payload: { id, title: `bench ${i}`, done: false } })
          .then(acked, (e) => rtb.mutErrors.push(String(e)));
      }
    };
  }

  function startRaw() {
    const bc = new BroadcastChannel("rtbench:" + scope);
    const pending = []; // {id, bytes}, in order, until acked
    let ws = null;
    bc.onmessage = (e) => {
      if (rtb.leader) return;
      applied(e.data.version, false, JSON.parse(e.data.changes));
    };
    const send = () => { for (const m of pending) ws.send(m.bytes); };
    function lead() {
      rtb.leader = true; rtb.state = "connecting";
      ws = new WebSocket(url);
      ws.binaryType = "arraybuffer";
      ws.onopen = () => ws.send(rtCodec.hello(1, rtb.version, ""));
      ws.onclose = (e) => { rtb.ready = false; rtb.state = "closed " + e.code; };
      ws.onmessage = (e) => {
        const m = rtCodec.decode(new Uint8Array(e.data));
        if (m.type === "ready") { rtb.ready = true; rtb.state = "ready"; send(); }
        if (m.type === "delta") {
          applied(m.version, true, JSON.parse(m.changes));
          bc.postMessage({ version: m.version, prev: m.prev, changes: m.changes });
        }
        if (m.type === "ack") {
          const i = pending.findIndex((x) => x.id === m.id);
          if (i >= 0) { pending.splice(i, 1); acked(); }
        }
        if (m.type === "reject" || m.type === "error") rtb.mutErrors.push(JSON.stringify(m.problem));
      };
    }
    // A follower keeps its mutations until it leads (no channel to the leader:
    // the floor of a resend, without durability).
    rtb.mutateAll = (n, prefix) => {
      for (let i = 0; i < n; i++) {
        const id = `${prefix}-${i}`;
        const bytes = rtCodec.mutation({ id, op: "issue.put", entity: "issue", payload: JSON.stringify({ id, title: `bench ${i}`, done: false }) });
        pending.push({ id, bytes });
        if (rtb.ready) ws.send(bytes);
      }
    };
    rtb.pendingCount = async () => pending.length;
    if (role === "each") lead();
    else navigator.locks.request("rtbench:" + scope, () => { lead(); return new Promise(() => {}); }).catch(failed);
    rtb.joined = true;
  }

  try {
    if (side === "tf") startTF().catch(failed);
    else startRaw();
  } catch (e) {
    failed(e);
  }
})();
