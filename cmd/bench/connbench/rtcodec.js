// rtCodec: the part of wire/realtime's codec the raw-JavaScript baseline
// speaks, written once here (codec_test.go checks it against the Go codec).
// Out: Hello and Mutation. In: Ready, Delta, Ack, Reject, Pong, Error; any
// other type decodes as {type: "other"}. The layout: a type byte, then the
// fields in order; numbers are LEB128 varints, strings and bytes a varint
// length and the bytes, a bool one byte (0 or 1), nothing after the last.
const rtCodec = (() => {
  const te = new TextEncoder();
  const td = new TextDecoder("utf-8", { fatal: true });
  const fail = (why) => { throw new Error("rtCodec: " + why); };

  function putUint(out, v) {
    if (!Number.isSafeInteger(v) || v < 0) fail("not a non-negative safe integer: " + v);
    while (v >= 0x80) {
      out.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    out.push(v);
  }
  function putBytes(out, b) {
    putUint(out, b.length);
    for (const c of b) out.push(c);
  }
  const putString = (out, s) => putBytes(out, te.encode(s));

  function hello(protocol, version, user) {
    const o = [1];
    putUint(o, protocol);
    putUint(o, version);
    putString(o, user || "");
    return new Uint8Array(o);
  }
  // m: {id, op, entity, payload (string or Uint8Array), resource?, token?}
  function mutation(m) {
    const o = [4];
    putString(o, m.id);
    putString(o, m.op);
    putString(o, m.entity);
    putBytes(o, typeof m.payload === "string" ? te.encode(m.payload) : m.payload);
    putString(o, m.resource || "");
    putUint(o, m.token || 0);
    return new Uint8Array(o);
  }

  function reader(b) {
    let i = 1;
    const r = {
      uint() {
        let v = 0, mul = 1;
        for (let k = 0; k < 10; k++) {
          if (i >= b.length) fail("truncated");
          const c = b[i++];
          v += (c & 0x7f) * mul;
          if (c < 0x80) {
            if (v > Number.MAX_SAFE_INTEGER) fail("number beyond 2^53");
            return v;
          }
          mul *= 0x80;
        }
        return fail("varint longer than 10 bytes");
      },
      bytes() {
        const n = r.uint();
        if (n > b.length - i) fail("truncated");
        const v = b.subarray(i, i + n);
        i += n;
        return v;
      },
      string: () => td.decode(r.bytes()),
      bool() {
        if (i >= b.length) fail("truncated");
        const c = b[i++];
        if (c > 1) fail("malformed bool");
        return c === 1;
      },
      problem: () => ({ type: r.string(), title: r.string(), detail: r.string(), status: r.uint(), highest: r.uint() }),
      end() { if (i !== b.length) fail("bytes after the last field"); },
    };
    return r;
  }

  // decode reads one message from a Uint8Array; it throws on bad bytes.
  function decode(b) {
    if (b.length === 0) fail("empty message");
    const r = reader(b);
    let m;
    switch (b[0]) {
      case 2: m = { type: "ready", version: r.uint(), reset: r.bool() }; break;
      case 3: m = { type: "delta", version: r.uint(), prev: r.uint(), changes: r.string() }; break;
      case 5: m = { type: "ack", id: r.string(), status: r.uint(), replayed: r.bool(), result: r.bytes() }; break;
      case 6: m = { type: "reject", id: r.string(), problem: r.problem(), retry: r.bool() }; break;
      case 8: m = { type: "pong", nonce: r.uint() }; break;
      case 9: m = { type: "error", problem: r.problem() }; break;
      default: return { type: "other", tag: b[0] };
    }
    r.end();
    return m;
  }

  return { hello, mutation, decode };
})();
