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

// flushVsRawJS measures flushing against raw fetches in one page: each
// round enqueues n records in `entities` entities while the queue is paused
// (untimed), then times from resume to the n-th ack; the raw side times n
// fetches of the same request (headers included) in `entities` parallel
// sequential loops. One untimed round of each first (compilation, the fence
// token, the connection), then rounds alternating in order. With model, the
// timed side is flushModelJS instead of the outbox (entities must be 1).
func flushVsRawJS(n, rounds, entities int, model bool) string {
	side := flushOutboxJS
	if model {
		side = flushModelJS
	}
	return `(async (n, rounds, entities) => {
		const ob = tabfenceNotes.outbox; await ob.pause();
		const res = "raw-" + Math.random().toString(36).slice(2);
		const tok = (await (await fetch("/fence/" + res, {method: "POST", headers: {"X-Demo-User": "bench"}})).json()).token;
		const run = Math.random().toString(36).slice(2);
		const headersOf = (k) => ({"Content-Type": "application/json", "X-Demo-User": "bench", "Idempotency-Key": '"' + k + '"',
			"X-Client-Operation-Id": k, "X-Client-Resource": res, "X-Client-Fencing-Token": String(tok)});
		let seq = 0;
		` + side + `
		const raw = async () => {
			const t0 = performance.now();
			await Promise.all(Array.from({length: entities}, async () => {
				for (let i = 0; i < n / entities; i++) {
					const k = "r" + seq++;
					const r = await fetch("/api/notes", {method: "POST", cache: "no-store", body: JSON.stringify({id: run + "-" + k, text: "x"}),
						headers: headersOf(run + k)});
					if (!r.ok) throw new Error("raw fetch " + r.status);
					await r.arrayBuffer();
				}
			}));
			return performance.now() - t0;
		};
		await tf(); await raw();
		const ratios = [];
		let tfMs = 0, rawMs = 0;
		for (let r = 0; r < rounds; r++) {
			const ms = {};
			for (const side of r % 2 === 0 ? ["tf", "raw"] : ["raw", "tf"]) ms[side] = await (side === "tf" ? tf : raw)();
			tfMs += ms.tf; rawMs += ms.raw;
			ratios.push(ms.raw / ms.tf);
		}
		return {go: n * rounds / tfMs * 1000, raw: n * rounds / rawMs * 1000, ratios};
	})(` + strconv.Itoa(n) + `, ` + strconv.Itoa(rounds) + `, ` + strconv.Itoa(entities) + `)`
}

// flushOutboxJS defines flushVsRawJS's timed side tf: the outbox.
const flushOutboxJS = `const tf = async () => {
			for (let i = 0; i < n; i++) { const j = seq++; await ob.enqueue({operationType: "put-note", entityType: "note", entityId: "f" + (j % entities), payload: {id: run + "-" + j, text: "x"}}); }
			let acked = 0;
			const done = new Promise((ok, fail) => { const stop = ob.onEvent((e) => {
				if (e.kind === "outbox.record.ack" && ++acked >= n) { stop(); ok(); }
				if (e.kind === "outbox.dead_letter" || e.kind === "outbox.record.terminal") { stop(); fail(new Error(e.kind)); } }); });
			const t0 = performance.now();
			await ob.resume();
			await done;
			const ms = performance.now() - t0;
			await ob.pause();
			return ms;
		};`

// flushModelJS defines flushVsRawJS's timed side tf as a model of one
// entity's flush in raw JavaScript: the ceiling of a flush that makes the
// outbox's durable steps, whatever language runs them. Its records are the
// outbox's own stored form (a record the paused outbox stored, copied), in
// a database with the outbox's stores and indexes. Per claim (50 records):
// the lease renewed, the metadata read, the lease checked and a page of 100
// live records read, one transaction each. Per step of 8 records, one
// transaction: the lease checked, the previous step's records rewritten as
// acked (their response kept) and the step's records as charged (sending,
// an attempt counted). Per record, one fetch with the raw loop's headers and
// its body read. It leaves out what the outbox does beyond that: its
// events, its status projection, its checks of each record's state.
const flushModelJS = outboxRecordJS + `
		odb.close();
		const txDone = (tx) => new Promise((ok, fail) => { tx.oncomplete = ok; tx.onabort = () => fail(tx.error || new Error("aborted")); });
		const mdb = await new Promise((ok, fail) => { const r = indexedDB.open("flushmodel-" + Math.random(), 1);
			r.onupgradeneeded = () => { const db = r.result, s = db.createObjectStore("records", {keyPath: "seq", autoIncrement: true});
				s.createIndex("id", "id", {unique: true});
				for (const [name, path] of [["live", "_live"], ["opKey", "_opKey"], ["entity", "_entity"], ["status", "status"], ["user", "userId"], ["schema", "payloadSchemaVersion"]]) s.createIndex(name, path);
				db.createObjectStore("leases", {keyPath: "name"}); db.createObjectStore("meta"); db.createObjectStore("blobs"); };
			r.onsuccess = () => ok(r.result); r.onerror = () => fail(r.error); });
		const enc = new TextEncoder(), ttl = 30000;
		let token = 0;
		const tf = async () => {
			const fill = mdb.transaction(["records", "leases"], "readwrite");
			for (let i = 0; i < n; i++) {
				const id = run + "-m" + seq++, now = Date.now();
				const r = {...tpl, id, idempotencyKey: id, payload: enc.encode(JSON.stringify({id, text: "x"})), createdAt: now, updatedAt: now};
				delete r.seq;
				fill.objectStore("records").put(r);
			}
			const lease = {name: "flush", owner: "model", token: ++token, expiresAt: Date.now() + ttl};
			fill.objectStore("leases").put(lease);
			await txDone(fill);
			const t0 = performance.now();
			// step: one transaction: the lease checked, acks written, next charged.
			const step = (acks, next) => {
				const tx = mdb.transaction(["records", "leases"], "readwrite");
				const rs = tx.objectStore("records"), byId = rs.index("id");
				tx.objectStore("leases").get("flush").onsuccess = (e) => { if (e.target.result.token !== lease.token) tx.abort(); };
				for (const a of acks) byId.get(a.id).onsuccess = (e) => { const r = e.target.result, now = Date.now();
					r.status = "acked"; r.ackedAt = now; r.updatedAt = now; r.response = {status: a.status, body: a.body, replayed: false};
					delete r._live; delete r._entity; delete r._opKey; rs.put(r); };
				for (const id of next) byId.get(id).onsuccess = (e) => { const r = e.target.result, now = Date.now();
					r.status = "sending"; r.attempts++; r.sends++; r.leaseOwner = lease.owner; r.leaseToken = lease.token;
					r.leaseExpiresAt = now + ttl; r.updatedAt = now; rs.put(r); };
				return txDone(tx);
			};
			let acks = [];
			for (;;) {
				const renew = mdb.transaction("leases", "readwrite"), ls = renew.objectStore("leases");
				ls.get("flush").onsuccess = (e) => { const l = e.target.result; l.expiresAt = Date.now() + ttl; ls.put(l); };
				await txDone(renew);
				const meta = mdb.transaction("meta", "readwrite"); meta.objectStore("meta").get("meta"); await txDone(meta);
				const claim = mdb.transaction(["records", "leases"], "readwrite");
				claim.objectStore("leases").get("flush");
				const page = claim.objectStore("records").index("live").getAll(IDBKeyRange.only(1), 100);
				await txDone(claim);
				const batch = page.result.filter((r) => r.status === "pending").slice(0, 50);
				if (batch.length === 0) break;
				for (let i = 0; i < batch.length; i += 8) {
					const recs = batch.slice(i, i + 8);
					await step(acks, recs.map((r) => r.id));
					acks = [];
					for (const rec of recs) {
						const r = await fetch("/api/notes", {method: "POST", cache: "no-store", body: rec.payload, headers: headersOf(rec.idempotencyKey)});
						if (!r.ok) throw new Error("model fetch " + r.status);
						acks.push({id: rec.id, status: r.status, body: new Uint8Array(await r.arrayBuffer())});
					}
				}
			}
			await step(acks, []);
			return performance.now() - t0;
		};`

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

// backlogJS is flushJS with the queue filled 50 enqueues at a time (the
// figure is the flush; filling it one by one would only take longer).
func backlogJS(n, entities int) string {
	return `(async () => {` + fillJS(n, entities, 50) + drainJS(n) + `})()`
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
