// The election part of the tabfence demo ("Under the hood"): one leader
// election per tab, shown as it happens. (The tracker is tracker.js, the
// notes outbox notes.js.)
//
// Tests and the benchmark read window.tabfenceDemo (events with page
// timestamps, load timings) instead of scraping the page, so the markup can
// change without breaking them. Element ids (#role, #lock, #token,
// #generation, #owner, #resign, #steal, #leave, #log, #error) are stable too.
// This module starts the runtime (load) first, so its load timings are the
// page's.
import { load } from "./dist/tabfence.js";

const params = new URLSearchParams(location.search);
const scope = params.get("scope") || "demo";
const protocol = Number(params.get("protocol") || "1");
// Fenced by default: each leadership gets a token from IndexedDB, so a steal
// shows the token rising. ?fenced=0 runs the bare election (the failover
// benchmark compares that with raw Web Locks).
const fenced = params.get("fenced") !== "0";
// ?stallAfter=ms turns on the watchdog (fenced elections only): a visible
// tab steals from a leader that stopped heartbeating.
const stallAfter = Number(params.get("stallAfter") || "0");

const $ = (id) => document.getElementById(id);
/** Wall-clock milliseconds, comparable across tabs and with the test runner. */
const now = () => performance.timeOrigin + performance.now();

const demo = {
  scope,
  protocol,
  events: [], // {type: "leader"|"follower"|"lost"|..., at, ...}
  timings: {}, // loadStart, loadEnd (ms, page clock)
  tf: null,
  election: null,
  ctx: null,
  error: null,
};
window.tabfenceDemo = demo;

function record(type, detail = {}) {
  const ev = { type, at: now(), ...detail };
  demo.events.push(ev);
  const li = document.createElement("li");
  const time = new Date(ev.at).toISOString().slice(11, 23);
  li.textContent = `${time} ${type}${detail.reason ? ` (${detail.reason})` : ""}${detail.token !== undefined ? ` token ${detail.token}` : ""}`;
  $("log").prepend(li);
}

function show(role, ctx) {
  document.body.dataset.role = role;
  $("role").textContent = role;
  $("token").textContent = ctx ? String(ctx.token) : "—";
  $("generation").textContent = ctx ? String(ctx.generation) : "—";
  $("owner").textContent = ctx ? ctx.ownerID : "—";
  $("resign").disabled = role !== "leader";
  $("steal").disabled = role !== "follower";
  $("leave").disabled = role === "starting" || role === "lost"; // "lost" is brief: the election rejoins by itself
  $("leave").textContent = demo.election ? "Leave" : "Join";
}

function fail(err) {
  demo.error = err;
  $("error").hidden = false;
  $("error").textContent = `${err.name}: ${err.message}`;
  record("error", { name: err.name, message: err.message });
}

function join() {
  try {
    demo.election = demo.tf.elect({
      scope,
      protocol,
      // Its own database, so the demo's election never pins the page's
      // default one (a page declares a database's stores once).
      ...(fenced ? { resource: "demo:" + scope, database: "tabfence-demo" } : {}),
      ...(stallAfter ? { stallAfter } : {}),
      onLeader(ctx) {
        demo.ctx = ctx; // the latest leader context, kept after it ends (tests write with it)
        record("leader", { token: ctx.token, generation: ctx.generation });
        show("leader", ctx);
        ctx.signal.addEventListener("abort", () => record("signal-abort", { name: ctx.signal.reason?.name }), {
          once: true,
        });
      },
      onFollower() {
        record("follower");
        show("follower");
      },
      onLost(reason, err) {
        record("lost", { reason, error: err?.name });
        // Unless closed, the election rejoins the queue by itself and
        // onLeader or onFollower follows.
        show(reason === "closed" ? "left" : "lost");
      },
    });
    $("lock").textContent = demo.election.lockName;
    record("joined");
  } catch (err) {
    fail(err);
    show("error");
  }
}

async function leave() {
  const e = demo.election;
  demo.election = null;
  await e?.close();
  record("left");
  show("left");
}

$("resign").addEventListener("click", async () => {
  try {
    await demo.election.resign();
  } catch (err) {
    fail(err);
  }
});

$("steal").addEventListener("click", async () => {
  try {
    await demo.election.steal();
  } catch (err) {
    fail(err);
  }
});

$("leave").addEventListener("click", async () => {
  if (demo.election) {
    await leave();
  } else {
    join();
  }
});

try {
  demo.timings.loadStart = now();
  demo.tf = await load(); // tabfence.wasm beside the loader, under its content-hashed name
  demo.timings.loadEnd = now();
  record("ready", { ms: Math.round(demo.timings.loadEnd - demo.timings.loadStart) });
  join();
} catch (err) {
  fail(err);
  show("error");
}
