package channel

// loaderFastPath is the loader's FAST object (jsglue/loader/tabfence.js),
// which the browser tests install to run the channel through it, as pages
// do. TestLoaderFastPathInSync keeps the copy exact.
const loaderFastPath = `Object.freeze({
  // rx wraps a channel's Go handler: a message that is plainly a tabfence
  // envelope (these types, strings within the bounds) reaches Go as
  // (JSON header [id, kind, resource, owner, token, seq, sentAt], payload);
  // anything else as (undefined, data), for Go to decode and count.
  rx(go, maxID, maxKind, maxResource, maxOwner) {
    return (ev) => {
      const d = ev?.data;
      if (typeof d === "object" && d !== null && d.protocol === "tabfence" && d.version === 1 &&
          typeof d.id === "string" && d.id.length <= maxID && typeof d.kind === "string" && d.kind.length <= maxKind &&
          typeof d.resource === "string" && d.resource.length <= maxResource &&
          typeof d.owner === "string" && d.owner.length <= maxOwner &&
          typeof d.token === "number" && typeof d.seq === "number" && typeof d.sentAt === "number") {
        return go(JSON.stringify([d.id, d.kind, d.resource, d.owner, d.token, d.seq, d.sentAt]), d.payload);
      }
      return go(undefined, d);
    };
  },
  // post sends the envelope whose header Go wrote as JSON.
  post(bc, header, payload) {
    const e = JSON.parse(header);
    if (payload !== undefined) e.payload = payload;
    bc.postMessage(e);
  },
  // deliver hands a subscriber its message (fields as JSON, payload set in
  // its place) in a microtask, so its exceptions never unwind into Go.
  deliver(fn, message, payload) {
    const m = JSON.parse(message);
    m.payload = payload;
    queueMicrotask(fn.bind(null, m));
  },
});`
