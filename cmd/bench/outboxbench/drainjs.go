package outboxbench

import "strconv"

// drainVsRawJS measures the drain of a queue of n records in `entities`
// entities by the demo's outbox (its batch endpoint on) against, in the
// same page and rounds, the two ceilings of a client that sends the same
// records: a raw JavaScript loop POSTing them `per` at a time to the same
// batch route (the wire batch format, built by hand), and a raw sequential
// fetch loop of single POSTs to /api/notes; and a model of the outbox's
// durable steps in plain JavaScript (drainModelJS). Each round fills the paused
// queue (untimed), then times resume -> the n-th ack; the raw sides time
// their loops from the first request to the last answer read. One short
// untimed round of each first (2 pages: compilation, the fencing token,
// the connection), then rounds rotating the order of the sides.
// It returns the rates of the four (records/s over all rounds), the
// per-round ratios of tabfence to each baseline, and of the model to the
// raw batch loop.
func drainVsRawJS(n, entities, per, rounds int) string {
	return `(async (n, entities, per, rounds) => {
		const ob = tabfenceNotes.outbox; await ob.pause();
		const res = "raw-" + Math.random().toString(36).slice(2);
		const tok = (await (await fetch("/fence/" + res, {method: "POST", headers: {"X-Demo-User": "bench"}})).json()).token;
		const fenced = {"Content-Type": "application/json", "X-Demo-User": "bench", "X-Client-Resource": res, "X-Client-Fencing-Token": String(tok)};
		const run = Math.random().toString(36).slice(2);
		let seq = 0;
		` + drainOutboxJS + `
		const batch = async (n) => {
			const ms = [];
			for (let i = 0; i < n; i++) { const j = seq++, k = run + "-b" + j;
				ms.push({key: k, endpoint: "/api/notes", id: k, op: "put-note", entity: "note:f" + (j % entities), payload: {id: run + "-" + j, text: "x"}}); }
			const t0 = performance.now();
			for (let i = 0; i < n; i += per) {
				const page = ms.slice(i, i + per);
				const r = await fetch("/api/notes/batch", {method: "POST", cache: "no-store", headers: fenced, body: JSON.stringify({mutations: page})});
				if (!r.ok) throw new Error("raw batch " + r.status);
				const doc = await r.json();
				if (doc.results.length !== page.length || doc.results.some((x, q) => x.key !== page[q].key || x.outcome !== "applied")) throw new Error("raw batch: a mutation was not applied");
			}
			return performance.now() - t0;
		};
		const single = async (n) => {
			const t0 = performance.now();
			for (let i = 0; i < n; i++) {
				const j = seq++, k = run + "-s" + j;
				const r = await fetch("/api/notes", {method: "POST", cache: "no-store", body: JSON.stringify({id: run + "-" + j, text: "x"}),
					headers: {...fenced, "Idempotency-Key": '"' + k + '"', "X-Client-Operation-Id": k}});
				if (!r.ok) throw new Error("raw fetch " + r.status);
				await r.arrayBuffer();
			}
			return performance.now() - t0;
		};
		const req = (r) => new Promise((ok, fail) => { r.onsuccess = () => ok(r.result); r.onerror = () => fail(r.error); });
		const odb = await req(indexedDB.open("tabfence-outbox:" + tabfenceNotes.name));
		await tf(2 * per);
		` + drainModelJS + `
		const sides = {tf, batch, single, model};
		for (const s of ["batch", "single", "model"]) await sides[s](2 * per);
		const orders = [["tf", "batch", "single", "model"], ["model", "single", "tf", "batch"], ["batch", "model", "single", "tf"], ["single", "tf", "model", "batch"]];
		const total = {tf: 0, batch: 0, single: 0, model: 0}, vsBatch = [], vsSingle = [], modelVsBatch = [];
		for (let r = 0; r < rounds; r++) {
			const ms = {};
			for (const s of orders[r % orders.length]) ms[s] = await sides[s](n);
			for (const s in ms) total[s] += ms[s];
			vsBatch.push(ms.batch / ms.tf); vsSingle.push(ms.single / ms.tf); modelVsBatch.push(ms.batch / ms.model);
		}
		const rate = (ms) => n * rounds / ms * 1000;
		odb.close(); mdb.close();
		return {tf: rate(total.tf), batch: rate(total.batch), single: rate(total.single), model: rate(total.model), vsBatch, vsSingle, modelVsBatch};
	})(` + strconv.Itoa(n) + `, ` + strconv.Itoa(entities) + `, ` + strconv.Itoa(per) + `, ` + strconv.Itoa(rounds) + `)`
}

// drainOutboxJS defines drainVsRawJS's side tf: n records enqueued in the
// paused queue, 50 at a time (untimed), then resume -> the n-th ack.
const drainOutboxJS = `const tf = async (n) => {
			for (let i = 0; i < n; i += 50) {
				const ps = [];
				for (let j = i; j < Math.min(i + 50, n); j++) { const q = seq++; ps.push(ob.enqueue({operationType: "put-note", entityType: "note", entityId: "f" + (q % entities), payload: {id: run + "-" + q, text: "x"}})); }
				await Promise.all(ps);
			}
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
