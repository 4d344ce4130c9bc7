//go:build js && wasm

package jsapi

import (
	"syscall/js"
	"time"
	"unicode/utf8"

	"github.com/tabfence/tabfence/jsglue"
)

// Values shared by the API areas (the outbox, the connection): payloads,
// callbacks and times as JavaScript sees them.

var (
	JSJSON       = js.Global().Get("JSON")
	JSUint8Array = js.Global().Get("Uint8Array")
)

// PayloadBytes is p as a payload: a string or bytes as is, anything else
// (but undefined) as JSON.stringify; ok false when it is none of these.
// The JSON is made by the JavaScript engine, never by a Go encoder.
func PayloadBytes(p js.Value) (b []byte, ok bool) {
	switch pt, _ := jsglue.TypeOf(p); {
	case pt == js.TypeString:
		return []byte(p.String()), true
	case jsglue.InstanceOf(p, JSUint8Array):
		b = make([]byte, p.Length())
		js.CopyBytesToGo(b, p)
		return b, true
	case pt == js.TypeUndefined:
		return nil, false
	}
	s, err := jsglue.Call(JSJSON, "stringify", p)
	if err != nil || s.Type() != js.TypeString {
		return nil, false
	}
	return []byte(s.String()), true
}

// PayloadValue is a stored payload as JavaScript sees it: parsed JSON, the
// string when it is not JSON, a Uint8Array when it is not UTF-8 (so bytes
// arrive intact).
func PayloadValue(p []byte) js.Value {
	if !utf8.Valid(p) {
		b := JSUint8Array.New(len(p))
		js.CopyBytesToJS(b, p)
		return b
	}
	s := string(p)
	v, err := jsglue.Call(JSJSON, "parse", s)
	if err != nil {
		return js.ValueOf(s)
	}
	return v
}

// CallbackArg is a listener argument (onStatus, onDelta…): a function.
func CallbackArg(where string, args []js.Value) (js.Value, error) {
	fn := At(args, 0)
	if !IsType(fn, js.TypeFunction) {
		return fn, TypeErr(where, "fn must be a function")
	}
	return fn, nil
}

// Unsubscriber is the function a listener method returns; one callback
// per subscription, released when called.
func Unsubscriber(unsub func()) js.Value {
	var cb *jsglue.Callback
	cb = jsglue.NewCallback(func(js.Value, []js.Value) any {
		unsub()
		cb.Release()
		return nil
	})
	return cb.Value
}

// Ms is t in milliseconds since the epoch, or null for the zero time.
func Ms(t time.Time) any {
	if t.IsZero() {
		return js.Null()
	}
	return float64(t.UnixNano()) / 1e6
}
