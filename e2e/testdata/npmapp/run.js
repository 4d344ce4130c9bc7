// What the test apps do with the runtime: elect a leader and enqueue one
// note against the demo server's API, then report both.
export async function run(loading) {
  const tf = await loading;
  const user = "npm-" + Math.random().toString(36).slice(2);
  const lockName = await new Promise((resolve) =>
    tf.elect({ scope: "npm-" + user, protocol: 1, onLeader: (ctx) => resolve(ctx.lockName) }),
  );
  const outbox = await tf.outbox({
    name: "npm-app-" + user, // one app per page: each page its own queue and user
    endpoint: "/api/notes",
    user,
    headers: (u) => ({ "X-Demo-User": u }),
    policies: { "put-note": { dedupe: "append" } },
  });
  const acked = new Promise((resolve) => outbox.onEvent((e) => e.kind === "outbox.record.ack" && resolve()));
  await outbox.enqueue({ operationType: "put-note", entityType: "note", entityId: "n1", payload: { id: "n1", text: "from the bundle" } });
  await acked;
  const notes = await (await fetch("/api/notes", { headers: { "X-Demo-User": user } })).json();
  return { lockName, notes: notes.map((n) => n.id + ":" + n.text).join(",") };
}
