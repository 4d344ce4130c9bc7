package outboxbench

import (
	"strconv"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The scripts the bench evaluates in its pages: the outbox's side of each
// figure and its raw-JavaScript baseline.

// enqueueJS: durable enqueues per second, the queue paused so no flush runs.
func enqueueJS(n int) string {
	return `(async () => { const ob = tabfenceNotes.outbox; await ob.pause();
		const t0 = performance.now();
		for (let i = 0; i < ` + strconv.Itoa(n) + `; i++) await ob.enqueue({operationType: "put-note", entityType: "note", entityId: "e" + i, payload: {id: "e" + i, text: "hello"}});
		const dt = performance.now() - t0; return ` + strconv.Itoa(n) + ` / dt * 1000; })()`
}

// rates is a comparison in alternating rounds in one page (harness.Rates).
type rates = harness.Rates

// enqueueVsRawJS measures durable enqueues against the raw put loop
// (rawPutJS's transaction) in one page: warm untimed of each, then n of each
// alternating in rounds (the order swapped every round), so a burst of disk
// or CPU load elsewhere lands on both sides alike; the per-round ratios let
// the figure be their median. The queue is paused: no flush runs. With
// model, the timed side is enqueueModelJS instead of the outbox.
func enqueueVsRawJS(n, warm, rounds int, model bool) string {
	side := `const tf = (i) => ob.enqueue({operationType: "put-note", entityType: "note", entityId: "e" + i, payload: {id: "e" + i, text: "hello"}});`
	if model {
		side = enqueueModelJS
	}
	return `(async (n, warm, rounds) => {
		const ob = tabfenceNotes.outbox; await ob.pause();
		const db = await new Promise((res, rej) => { const r = indexedDB.open("rawbench-" + Math.random(), 1);
			r.onupgradeneeded = () => r.result.createObjectStore("records", {keyPath: "id"}); r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error); });
		` + side + `
		const raw = (i) => new Promise((res, rej) => {
			const tx = db.transaction("records", "readwrite", {durability: "strict"});
			tx.objectStore("records").put({id: "r" + i, status: "pending", payload: JSON.stringify({id: "e" + i, text: "hello"}), createdAt: Date.now()});
			tx.oncomplete = res; tx.onabort = () => rej(tx.error); });
		for (let k = 1; k <= warm; k++) { await tf(-k); await raw(-k); }
		const per = Math.ceil(n / rounds), ratios = [];
		let tfMs = 0, rawMs = 0, i = 0;
		for (let r = 0; r < rounds; r++) {
			const ms = {};
			for (const side of r % 2 === 0 ? ["tf", "raw"] : ["raw", "tf"]) {
				const fn = side === "tf" ? tf : raw;
				const t0 = performance.now();
				for (let k = 0; k < per; k++) await fn(i++);
				ms[side] = performance.now() - t0;
			}
			tfMs += ms.tf; rawMs += ms.raw;
			ratios.push(ms.raw / ms.tf);
		}
		db.close();
		return {go: per * rounds / tfMs * 1000, raw: per * rounds / rawMs * 1000, ratios};
	})(` + strconv.Itoa(n) + `, ` + strconv.Itoa(warm) + `, ` + strconv.Itoa(rounds) + `)`
}

// outboxRecordJS (statements, in a page whose outbox ob is paused) stores
// one record through the outbox and reads it back from the outbox's own
// database as tpl, the stored form the models copy; odb is that database
// connection, req a request's promise.
const outboxRecordJS = `const req = (r) => new Promise((ok, fail) => { r.onsuccess = () => ok(r.result); r.onerror = () => fail(r.error); });
		await ob.enqueue({operationType: "put-note", entityType: "note", entityId: "model", payload: {id: "model", text: "x"}});
		const odb = await req(indexedDB.open("tabfence-outbox:" + tabfenceNotes.name));
		const tpl = await req(odb.transaction("records").objectStore("records").index("live").get(1));
		if (!tpl || tpl.status !== "pending") throw new Error("model: no pending outbox record to copy");`

// enqueueModelJS defines enqueueVsRawJS's timed side tf as the write of an
// enqueue without Go: the outbox's own stored record (one the paused outbox
// stored, with a new id and payload each time) put into the outbox's own
// database (its indexes), from its JSON through TextDecoder and JSON.parse
// (as the loader did until the loader built plain appends itself), in a
// strict transaction of its own, committed at once. The gap between this
// and the outbox's enqueue is what the runtime does per enqueue beyond the
// write: building the record (ids, payload hash), and the bookkeeping
// after the commit (events, status, the flush hint).
const enqueueModelJS = outboxRecordJS + `
		delete tpl.seq; delete tpl.payload;
		const json = JSON.stringify(tpl), enc = new TextEncoder(), dec = new TextDecoder(), buf = new Uint8Array(65536);
		const tf = (i) => new Promise((ok, fail) => {
			const n = enc.encodeInto(json.replace(tpl.id, "model-" + i + "-" + tpl.id), buf).written;
			const rec = JSON.parse(dec.decode(buf.subarray(0, n)));
			rec.payload = enc.encode(JSON.stringify({id: "e" + i, text: "hello"}));
			const tx = IDBDatabase.prototype.transaction.call(odb, ["records"], "readwrite", {durability: "strict"});
			tx.objectStore("records").put(rec);
			tx.oncomplete = ok; tx.onabort = () => fail(tx.error || new Error("aborted"));
			tx.commit();
		});`

// rawPutJS: one readwrite transaction per put, strict durability, awaited.
func rawPutJS(n int) string {
	return `(async () => {
		const db = await new Promise((res, rej) => { const r = indexedDB.open("rawbench-" + Math.random(), 1);
			r.onupgradeneeded = () => r.result.createObjectStore("records", {keyPath: "id"}); r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error); });
		const t0 = performance.now();
		for (let i = 0; i < ` + strconv.Itoa(n) + `; i++) await new Promise((res, rej) => {
			const tx = db.transaction("records", "readwrite", {durability: "strict"});
			tx.objectStore("records").put({id: "r" + i, status: "pending", payload: JSON.stringify({id: "e" + i, text: "hello"}), createdAt: Date.now()});
			tx.oncomplete = res; tx.onabort = () => rej(tx.error); });
		const dt = performance.now() - t0; db.close(); return ` + strconv.Itoa(n) + ` / dt * 1000; })()`
}

// flushJS: enqueue n records in `entities` entities while paused, then
// resume and flush; records acked per second from resume to the last ack.
func flushJS(n, entities int) string {
	return `(async () => {` + fillJS(n, entities, 1) + drainJS(n) + `})()`
}

// fillJS (statements) pauses the demo's queue and enqueues n records in
// `entities` entities, batch at a time (1: each awaited on its own).
func fillJS(n, entities, batch int) string {
	return `const ob = tabfenceNotes.outbox; await ob.pause();
		const run = Math.random().toString(36).slice(2);
		for (let i = 0; i < ` + strconv.Itoa(n) + `; i += ` + strconv.Itoa(batch) + `) {
			const ps = [];
			for (let j = i; j < Math.min(i + ` + strconv.Itoa(batch) + `, ` + strconv.Itoa(n) + `); j++) ps.push(ob.enqueue({operationType: "put-note", entityType: "note", entityId: "f" + (j % ` + strconv.Itoa(entities) + `), payload: {id: run + "-" + j, text: "x"}}));
			await Promise.all(ps);
		}
`
}

// drainJS (statements) resumes the queue and returns the records acked per
// second from the resume to the n-th ack.
func drainJS(n int) string {
	return `const ob2 = tabfenceNotes.outbox;
		let acked = 0;
		const t0 = performance.now();
		const done = new Promise((res, rej) => { const stop = ob2.onEvent((e) => {
			if (e.kind === "outbox.record.ack" && ++acked >= ` + strconv.Itoa(n) + `) { stop(); res(); }
			if (e.kind === "outbox.dead_letter" || e.kind === "outbox.record.terminal") { stop(); rej(new Error(e.kind)); } }); });
		await ob2.resume();
		await done;
		return ` + strconv.Itoa(n) + ` / (performance.now() - t0) * 1000;
`
}

// rawFetchJS: a sequential fetch loop to the same receiver, with the same
// headers a flush sends (idempotency key, fencing token).
func rawFetchJS(n int) string {
	return `(async () => {
		const res = "raw-" + Math.random().toString(36).slice(2);
		const tok = (await (await fetch("/fence/" + res, {method: "POST", headers: {"X-Demo-User": "bench"}})).json()).token;
		const run = Math.random().toString(36).slice(2);
		const t0 = performance.now();
		for (let i = 0; i < ` + strconv.Itoa(n) + `; i++) {
			const r = await fetch("/api/notes", {method: "POST", cache: "no-store", body: JSON.stringify({id: run + "-" + i, text: "x"}),
				headers: {"Content-Type": "application/json", "X-Demo-User": "bench", "Idempotency-Key": '"' + run + i + '"',
					"X-Client-Operation-Id": run + i, "X-Client-Resource": res, "X-Client-Fencing-Token": String(tok)}});
			if (!r.ok) throw new Error("raw fetch " + r.status);
			await r.arrayBuffer();
		}
		const dt = performance.now() - t0; return ` + strconv.Itoa(n) + ` / dt * 1000; })()`
}

// rawFetchStreamsJS: the ceiling of parallel flushing, streams sequential
// fetch loops like rawFetchJS running at once (n records in all).
func rawFetchStreamsJS(n, streams int) string {
	return `(async () => {
		const res = "raw-" + Math.random().toString(36).slice(2);
		const tok = (await (await fetch("/fence/" + res, {method: "POST", headers: {"X-Demo-User": "bench"}})).json()).token;
		const run = Math.random().toString(36).slice(2), per = ` + strconv.Itoa(n/streams) + `;
		const t0 = performance.now();
		await Promise.all(Array.from({length: ` + strconv.Itoa(streams) + `}, async (_, s) => {
			for (let i = 0; i < per; i++) {
				const k = s + "-" + i;
				const r = await fetch("/api/notes", {method: "POST", cache: "no-store", body: JSON.stringify({id: run + "-" + k, text: "x"}),
					headers: {"Content-Type": "application/json", "X-Demo-User": "bench", "Idempotency-Key": '"' + run + k + '"',
						"X-Client-Operation-Id": run + k, "X-Client-Resource": res, "X-Client-Fencing-Token": String(tok)}});
				if (!r.ok) throw new Error("raw fetch " + r.status);
				await r.arrayBuffer();
			}
		}));
		const dt = performance.now() - t0; return per * ` + strconv.Itoa(streams) + ` / dt * 1000; })()`
}
