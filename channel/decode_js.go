//go:build js && wasm

package channel

import (
	"math"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// Decoding untrusted values: what any same-origin script may post on the
// channel's BroadcastChannel, read without the loader's help (or when its
// rx leaves a message to Go), and the measures of outgoing payloads.

// receivedPayloadReason is clonedPayloadReason, recovering like decode.
func receivedPayloadReason(p js.Value, l Limits) (why Reason) {
	defer func() {
		if recover() != nil {
			why = Malformed
		}
	}()
	return clonedPayloadReason(p, l)
}

var (
	// JSON.parse, called with Invoke: it ignores this, and a call by
	// reference needs no method name decoded per message.
	jsJSONParse   = js.Global().Get("JSON").Get("parse")
	jsArrayBuffer = js.Global().Get("ArrayBuffer")
	jsBlob        = js.Global().Get("Blob")
	// charCodeAt(i) is NaN when i is past the end of the string: one call
	// that bounds a string's length without copying it or boxing it.
	jsCharCodeAt = js.Global().Get("String").Get("prototype").Get("charCodeAt")
	// jsProtocol is held for the life of the program, so wasm_exec.js keeps
	// one reference ID for the string "tabfence" and every received
	// "tabfence" string gets that same ID: Equal compares without a copy.
	jsProtocol = js.ValueOf(Protocol)
)

// decode reads an envelope from any value any same-origin script may have
// posted, in one pass of plain js.Value reads: one crossing into JavaScript
// per field, one more to bound each string (charCodeAt, no copy) and the
// copy itself; the protocol is compared without a copy. Every field's type
// and bounds are checked; strings are bounded before they are copied into
// Go. (A one-call variant, JSON.stringify(data, keys) parsed in Go, was
// measured: once it also checks that no field is a wrapper object or Date,
// which JSON reads as primitives, it is no faster than this; see
// docs/fastpath.md.)
//
// Why plain Get is safe here, unlike on values the page's own scripts hand
// the API (see jsglue.Get): data is the data of a MessageEvent from a
// BroadcastChannel, a structured clone made by the browser. A clone holds
// only plain data — objects, arrays, primitives, typed arrays, Blobs,
// Maps, Sets… — never a getter, a Proxy or a function (the sender's
// postMessage throws DataCloneError on those), so reading its properties
// runs no script and cannot throw. (A script running in this very page
// could patch Object.prototype with a throwing getter, but such a script
// can already replace BroadcastChannel itself; the channel defends against
// what other tabs post, not against the page it runs in.)
//
// What a clone can still hold is any *shape*: wrong types, huge strings,
// NaN, and BigInts, on which js.Value.Type panics ("bad type flag"): that
// panic is recovered here and the message counted as malformed.
//
// The strings that recur from message to message — kind, resource, owner —
// are looked up in hdrs (nil: no cache) before they are bounded and copied.
func decode(data js.Value, l Limits, hdrs *hdrCache) (e Envelope, why Reason) {
	defer func() {
		if recover() != nil {
			e, why = Envelope{}, Malformed
		}
	}()
	if data.Type() != js.TypeObject {
		return Envelope{}, Malformed
	}
	// Protocol first: a value that is not ours is foreign, not malformed.
	if p := data.Get("protocol"); !p.Equal(jsProtocol) {
		return Envelope{}, ForeignProtocol
	}
	e.Protocol = Protocol
	ver, why := num(data.Get("version"))
	if why != ReasonNone {
		return Envelope{}, why
	}
	if ver != Version {
		return Envelope{}, WrongVersion
	}
	e.Version = Version
	if e.ID, why = str(data.Get("id"), l.MaxID); why != ReasonNone {
		return Envelope{}, why
	}
	if e.Kind, why = hdrs.str(data.Get("kind"), l.MaxKind); why != ReasonNone {
		return Envelope{}, why
	}
	if e.Resource, why = hdrs.str(data.Get("resource"), l.MaxResource); why != ReasonNone {
		return Envelope{}, why
	}
	if e.Owner, why = hdrs.str(data.Get("owner"), l.MaxOwner); why != ReasonNone {
		return Envelope{}, why
	}
	if e.Token, why = num(data.Get("token")); why != ReasonNone {
		return Envelope{}, why
	}
	if e.Seq, why = num(data.Get("seq")); why != ReasonNone {
		return Envelope{}, why
	}
	ts, why := num(data.Get("sentAt"))
	if why != ReasonNone {
		return Envelope{}, why
	}
	e.SentAt = int64(ts)
	pl := data.Get("payload")
	if why := clonedPayloadReason(pl, l); why != ReasonNone {
		return Envelope{}, why
	}
	e.Payload = pl
	return e, ReasonNone
}

// str copies a JavaScript string into Go after checking that it has at
// most max UTF-16 units; anything else is malformed.
func str(f js.Value, max int) (string, Reason) {
	if f.Type() != js.TypeString {
		return "", Malformed
	}
	if longer(f, max) {
		return "", Oversized
	}
	return f.String(), ReasonNone
}

// hdrCache remembers a few received header strings as JavaScript values.
// wasm_exec.js gives equal strings the same reference while Go holds one,
// so a string that recurs (the kind, resource and owner of a leader's
// messages) is recognised by comparing references, in Go: no bounding call
// and no copy into Go. A string from another tab or a hostile script only
// replaces an entry; the cache never grows.
type hdrCache struct {
	mu   sync.Mutex
	ents [8]struct {
		v   js.Value
		s   string
		max int // the bound it was checked against: valid for fields bounded by >= max
	}
	next int
}

// str is the package-level str, through the cache.
func (h *hdrCache) str(f js.Value, max int) (string, Reason) {
	if h == nil {
		return str(f, max)
	}
	if f.Type() != js.TypeString {
		return "", Malformed
	}
	h.mu.Lock()
	for i := range h.ents {
		if e := &h.ents[i]; e.max != 0 && e.max <= max && e.v.Equal(f) {
			s := e.s
			h.mu.Unlock()
			return s, ReasonNone
		}
	}
	h.mu.Unlock()
	s, why := str(f, max)
	if why != ReasonNone {
		return s, why
	}
	h.mu.Lock()
	e := &h.ents[h.next]
	e.v, e.s, e.max = f, s, max
	h.next = (h.next + 1) % len(h.ents)
	h.mu.Unlock()
	return s, ReasonNone
}

// longer reports whether the string f has more than max UTF-16 units.
func longer(f js.Value, max int) bool {
	return !math.IsNaN(jsCharCodeAt.Call("call", f, max).Float())
}

// num reads a non-negative integer <= 2^53-1: NaN, Infinity, negatives,
// fractions, strings and missing fields are malformed.
func num(f js.Value) (uint64, Reason) {
	if f.Type() != js.TypeNumber {
		return 0, Malformed
	}
	x := f.Float()
	if math.IsNaN(x) || x < 0 || x > MaxToken || x != math.Trunc(x) {
		return 0, Malformed
	}
	return uint64(x), ReasonNone
}

// clonedPayloadReason is payloadReason for a received (structured-cloned)
// payload: plain reads, see decode.
func clonedPayloadReason(p js.Value, l Limits) Reason {
	max := float64(l.MaxPayload)
	t, ok := typeOf(p)
	if !ok {
		return ReasonNone // a BigInt: cloneable, nothing to measure
	}
	switch t {
	case js.TypeString:
		if longer(p, l.MaxPayload) {
			return Oversized
		}
	case js.TypeObject:
		switch {
		case p.InstanceOf(jsArrayBuffer):
			return sizeOf(p.Get("byteLength"), max)
		case jsArrayBuffer.Call("isView", p).Truthy():
			return sizeOf(p.Get("byteLength"), max)
		case jsBlob.Type() == js.TypeFunction && p.InstanceOf(jsBlob):
			return sizeOf(p.Get("size"), max)
		}
	}
	return ReasonNone
}

// payloadReason measures an outgoing payload, which the app made and which
// may be anything (a Proxy, an object with getters): guarded accessors.
func payloadReason(p js.Value, l Limits) Reason {
	max := float64(l.MaxPayload)
	t, ok := typeOf(p)
	if !ok {
		return ReasonNone // a BigInt: cloneable, nothing to measure
	}
	switch t {
	case js.TypeString:
		if longer(p, l.MaxPayload) {
			return Oversized
		}
	case js.TypeObject:
		if jsglue.InstanceOf(p, jsArrayBuffer) {
			return sizeProp(p, "byteLength", max)
		}
		if isView, err := jsglue.Call(jsArrayBuffer, "isView", p); err == nil && isView.Truthy() {
			return sizeProp(p, "byteLength", max)
		}
		if jsBlob.Type() == js.TypeFunction && jsglue.InstanceOf(p, jsBlob) {
			return sizeProp(p, "size", max)
		}
	}
	return ReasonNone
}

func typeOf(v js.Value) (t js.Type, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return v.Type(), true
}

func sizeOf(n js.Value, max float64) Reason {
	if n.Type() != js.TypeNumber {
		return Malformed
	}
	if n.Float() > max {
		return Oversized
	}
	return ReasonNone
}

func sizeProp(p js.Value, prop string, max float64) Reason {
	n, err := jsglue.Get(p, prop)
	if err != nil || n.Type() != js.TypeNumber {
		return Malformed
	}
	if x := n.Float(); x > max {
		return Oversized
	}
	return ReasonNone
}
