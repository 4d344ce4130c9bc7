// api.js — the JavaScript API's hooks in the loader (package main; the
// group "api" of jsglue/loader's core.js).

// layout is the version of these hooks' layout, the one Go speaks
// (apiLayout in package main): a runtime that speaks another ignores the group and takes
// its own path, so a file cached from another build is never misread.
export const layout = 1;

export function hooks(core) {
  const { enc, dec, later, enter, capture } = core;
  return {
    layout,
    // poster returns a post(kind, payload) method of the API: with exports,
    // a string kind that fits xscratch goes to the export tabfence_post with
    // (op, id); the export's verdict, bits 1 and up: 1 posted through the
    // channel's post, and the result, {id, token, seq}, is read from the
    // envelope it sent; > 1 the length of the result as JSON in buf; < 0
    // failed (fail() returns the rejected promise); 0 not taken (slow does
    // it all). Bit 0: kick (see jsglue/loader).
    poster(op, id, slow, fail, buf, kick) {
      return (kind, payload) => {
        const ex = core.exports();
        if (ex !== null && typeof kind === "string" && typeof ex.tabfence_post === "function") {
          const r = enc.encodeInto(kind, core.xscratch());
          if (r.read === kind.length) {
            const [v, e] = capture(() => enter(() => ex.tabfence_post(op, id, r.written), payload));
            if (v & 1) later(kick);
            const n = v >> 1;
            if (n === 1) return e !== null ? Promise.resolve({ id: e.id, token: e.token, seq: e.seq }) : fail();
            if (n > 1) return Promise.resolve(JSON.parse(dec.decode(buf.subarray(0, n))));
            if (n < 0) return fail();
          }
        }
        return slow(kind, payload);
      };
    },
  };
}
