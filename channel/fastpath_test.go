package channel

// loaderFastPath is the loader's FAST object (jsglue/loader/tabfence.js),
// which the browser tests install to run the channel through it, as pages
// do. TestLoaderFastPathInSync keeps the copy exact.
const loaderFastPath = `(() => {
  // Go hands every channel a scratch Uint8Array (buf): a header or message
  // written there crosses as its length, a number, which costs no
  // reference; one that does not fit crosses as a string.
  const enc = new TextEncoder(), dec = new TextDecoder();
  const text = (buf, h) => (typeof h === "number" ? dec.decode(buf.subarray(0, h)) : h);
  return Object.freeze({
    // rx wraps a channel's Go handler: a message that is plainly a tabfence
    // envelope (these types, strings within the bounds) reaches Go as
    // (JSON header [id, kind, resource, owner, token, seq, sentAt], payload),
    // the header in buf (its length) or as a string; anything else as
    // (undefined, data), for Go to decode and count.
    rx(go, maxID, maxKind, maxResource, maxOwner, buf) {
      return (ev) => {
        const d = ev?.data;
        if (typeof d === "object" && d !== null && d.protocol === "tabfence" && d.version === 1 &&
            typeof d.id === "string" && d.id.length <= maxID && typeof d.kind === "string" && d.kind.length <= maxKind &&
            typeof d.resource === "string" && d.resource.length <= maxResource &&
            typeof d.owner === "string" && d.owner.length <= maxOwner &&
            typeof d.token === "number" && typeof d.seq === "number" && typeof d.sentAt === "number") {
          const h = JSON.stringify([d.id, d.kind, d.resource, d.owner, d.token, d.seq, d.sentAt]);
          const r = buf ? enc.encodeInto(h, buf) : null;
          return go(r !== null && r.read === h.length ? r.written : h, d.payload);
        }
        return go(undefined, d);
      };
    },
    // post sends the envelope whose header Go wrote as JSON (in buf, or h).
    post(bc, buf, h, payload) {
      const e = JSON.parse(text(buf, h));
      if (payload !== undefined) e.payload = payload;
      bc.postMessage(e);
    },
    // deliver hands a subscriber its message (fields as JSON in buf or h,
    // payload set in its place) in a microtask, so its exceptions never
    // unwind into Go.
    deliver(fn, buf, h, payload) {
      const m = JSON.parse(text(buf, h));
      m.payload = payload;
      queueMicrotask(fn.bind(null, m));
    },
  });
})();`
