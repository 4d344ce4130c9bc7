// fast.js — the channel's hooks in the loader (package channel; the group
// "channel" of jsglue/loader's core.js). A message enters Go once, with
// one header string, instead of Go reading each field of the event; an
// envelope Go posts or delivers is built from one header. They only
// reshape data: every check (protocol, types, bounds, cursor, fencing) is
// Go's, and without them Go reads the fields itself, with the same results
// (TestFastPathDecodesLikeGo).

const hex8 = (x) => (x >>> 0).toString(16).padStart(8, "0");
const prim = (v) => (typeof v === "string" || typeof v === "number" ? v : null);
const len = (v) => (typeof v === "string" ? v.length : 0);

// layout is the version of these hooks' layout, the one Go speaks
// (channel.loaderLayout): a runtime that speaks another ignores the group and takes
// its own path, so a file cached from another build is never misread.
export const layout = 1;

export function hooks(core) {
  const { enc, text, later, enter, sent } = core;
  return {
    layout,
    // rx wraps a channel's Go handler: a received object reaches Go as
    // (JSON header [protocol, version, id, kind, resource, owner, token,
    // seq, sentAt], payload), the header in buf (its length) or as a string,
    // for Go to judge (decodeHeaderJSON); anything else as (undefined,
    // data). A field crosses as itself when it is a string or a number and
    // as null otherwise (JSON would make a wrapper object or a Date a
    // primitive). One bound stays here, for memory: strings longer together
    // than maxText (Go's limits allow no more) are not copied into a
    // header, and Go reads that message's fields itself. With exports, a
    // header that fits xscratch goes to tabfence_channel_rx2 instead, naming
    // the channel by id.
    rx(go, maxText, buf, id, kick) {
      return (ev) => {
        const d = ev?.data;
        if (typeof d === "object" && d !== null) {
          const p = d.protocol, i = d.id, k = d.kind, r = d.resource, o = d.owner;
          if (len(p) + len(i) + len(k) + len(r) + len(o) <= maxText) {
            const h = JSON.stringify([prim(p), prim(d.version), prim(i), prim(k), prim(r), prim(o), prim(d.token), prim(d.seq), prim(d.sentAt)]);
            const ex = core.exports();
            if (ex !== null && id > 0 && typeof ex.tabfence_channel_rx2 === "function") {
              const x = enc.encodeInto(h, core.xscratch());
              if (x.read === h.length) {
                if (enter(() => ex.tabfence_channel_rx2(id, x.written), d.payload, d) & 1) later(kick);
                return;
              }
            }
            const w = enc.encodeInto(h, buf);
            return go(w.read === h.length ? w.written : h, d.payload);
          }
        }
        return go(undefined, d);
      };
    },
    // post sends the envelope whose header Go wrote as JSON (text(buf, h)).
    post(bc, buf, h, payload) {
      const e = JSON.parse(text(buf, h));
      if (payload !== undefined) e.payload = payload;
      bc.postMessage(e);
      sent(e);
    },
    // post2 is post for an envelope whose ID is 32 hex digits, handed over
    // as four 32-bit words, and whose other fields come as values (the
    // strings made once by Go): no JSON text decoded and parsed per post.
    post2(bc, kind, resource, owner, a, b, c, d, token, seq, sentAt, payload) {
      const e = { protocol: "tabfence", version: 1, id: hex8(a) + hex8(b) + hex8(c) + hex8(d), kind, resource, owner, token, seq, sentAt };
      if (payload !== undefined) e.payload = payload;
      bc.postMessage(e);
      sent(e);
    },
    // deliver hands a subscriber its message (fields as JSON, payload set
    // in its place) in a microtask, so its exceptions never unwind into Go.
    deliver(fn, buf, h, payload) {
      const m = JSON.parse(text(buf, h));
      m.payload = payload;
      later(fn, m);
    },
    // deliverHeld is deliver for the envelope being handed to
    // tabfence_channel_rx2, which Go accepted and found plain (no escape in
    // its header: every string is exactly the one received): the message
    // is built from it, in deliver's field order, instead of from JSON.
    // Numbers + 0: -0 arrives as 0, as through JSON.
    deliverHeld(fn, gap) {
      const d = core.envelope();
      later(fn, { id: d.id, kind: d.kind, payload: d.payload, token: d.token + 0, seq: d.seq + 0,
        resource: d.resource, owner: d.owner, sentAt: d.sentAt + 0, gap: gap === true });
    },
  };
}
