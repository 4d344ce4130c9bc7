package outboxbench

// drainModelJS defines drainVsRawJS's side model: the IndexedDB steps of
// a durable batched drain in plain JavaScript, the ceiling any durable
// per-record outbox reaches here. Its database has the outbox's schema
// (its records store and indexes, copied from the outbox's own database)
// and its records the outbox's stored shape (a record the warm round left
// there, made pending again with a new id, entity and payload). Filled
// untimed in one transaction; then, per page of per records: read the
// page (the live index, in seq order), one readwrite transaction marking
// each sending (get by id + put), the batch POST (same route, same
// document as the raw batch loop), one readwrite transaction writing each
// result (get by id + put of the acked record with its response). It runs
// after drainVsRawJS's definitions (req, fenced, seq, run, entities, per,
// odb) and the warm round of tf.
const drainModelJS = `const mdb = await (async () => {
			const src = odb.transaction("records").objectStore("records");
			const tpl0 = await req(src.openCursor()).then((c) => c && c.value);
			if (!tpl0) throw new Error("model: no outbox record to copy");
			const ixs = Array.from(src.indexNames, (nm) => { const ix = src.index(nm); return [nm, ix.keyPath, {unique: ix.unique, multiEntry: ix.multiEntry}]; });
			const o = indexedDB.open("drainmodel-" + Math.random().toString(36).slice(2), 1);
			o.onupgradeneeded = () => { const st = o.result.createObjectStore("records", {keyPath: src.keyPath, autoIncrement: src.autoIncrement});
				for (const [nm, kp, opt] of ixs) st.createIndex(nm, kp, opt); };
			const db = await req(o);
			db.tpl = tpl0;
			return db;
		})();
		const menc = new TextEncoder(), mdec = new TextDecoder();
		// done awaits tx; now: commit at once (no request is issued after it).
		const done = (tx, now) => new Promise((ok, fail) => { tx.oncomplete = ok; tx.onabort = () => fail(tx.error || new Error("aborted")); if (now) tx.commit(); });
		const mfill = async (n) => {
			const tx = mdb.transaction("records", "readwrite"), st = tx.objectStore("records");
			for (let i = 0; i < n; i++) {
				const j = seq++, id = run + "-m" + j, ent = "note:m" + (j % entities);
				const rec = {...mdb.tpl, id, entityId: ent.slice(5), status: "pending", attempts: 0, response: null, lastError: null,
					leaseOwner: "", leaseToken: 0, operationKey: id, idempotencyKey: id, _live: 1, _entity: ent,
					payload: menc.encode(JSON.stringify({id: run + "-" + j, text: "x"}))};
				delete rec.seq;
				rec._opKey = [rec.userId || "", id];
				st.put(rec);
			}
			await done(tx, true);
		};
		const model = async (n) => {
			await mfill(n);
			const t0 = performance.now();
			for (let left = n; left > 0; left -= per) {
				const page = await req(mdb.transaction("records").objectStore("records").index("live").getAll(1, Math.min(per, left)));
				let tx = mdb.transaction("records", "readwrite"), byId = tx.objectStore("records").index("id");
				for (const r of page) byId.get(r.id).onsuccess = (e) => { const v = e.target.result; v.status = "sending"; v.attempts++; v.sends++; v.updatedAt = Date.now(); e.target.source.objectStore.put(v); };
				await done(tx, false);
				const ms = page.map((r) => ({key: r.id, endpoint: "/api/notes", id: r.id, op: "put-note", entity: r._entity, payload: JSON.parse(mdec.decode(r.payload))}));
				const resp = await fetch("/api/notes/batch", {method: "POST", cache: "no-store", headers: fenced, body: JSON.stringify({mutations: ms})});
				if (!resp.ok) throw new Error("model batch " + resp.status);
				const doc = await resp.json();
				if (doc.results.length !== ms.length || doc.results.some((x, q) => x.key !== ms[q].key || x.outcome !== "applied")) throw new Error("model batch: a mutation was not applied");
				tx = mdb.transaction("records", "readwrite"), byId = tx.objectStore("records").index("id");
				doc.results.forEach((x, q) => { byId.get(page[q].id).onsuccess = (e) => { const v = e.target.result;
					v.status = "acked"; v.ackedAt = v.updatedAt = Date.now(); v.response = {status: x.status, body: menc.encode(JSON.stringify(x.body === undefined ? null : x.body)), replayed: false};
					delete v._live; delete v._entity; delete v._opKey; e.target.source.objectStore.put(v); }; });
				await done(tx, false);
			}
			return performance.now() - t0;
		};`
