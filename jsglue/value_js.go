//go:build js && wasm

package jsglue

import (
	"errors"
	"syscall/js"
)

// jsglue uses syscall/js directly. hack-pad/safejs gives the same
// error-instead-of-panic accessors, but importing it links fmt and reflect
// (+98 KB brotli measured), which every user of the runtime downloads; the
// handful of guarded accessors below cover what the runtime needs.

// Try runs fn and turns a JavaScript exception thrown inside it into a
// *JSError that keeps the exception's name — the name is what callers
// branch on (QuotaExceededError, TransactionInactiveError, …).
func Try[T any](fn func() T) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = recoveredError(r)
		}
	}()
	return fn(), nil
}

// Call calls method m of v, returning a thrown exception as an error.
func Call(v js.Value, m string, args ...any) (js.Value, error) {
	return Try(func() js.Value { return v.Call(m, args...) })
}

// Get reads property p of v. A getter or proxy trap that throws, or a v
// that has no properties (undefined, null), gives an error, not a panic:
// use it on any value another script may have made.
//
// It goes through Reflect.get because js.Value.Get cannot be guarded:
// wasm_exec.js's valueGet does not catch, so a throwing getter unwinds
// through the wasm instance and kills the Go program, recover or not.
// valueCall does catch, and Reflect.get is a call.
func Get(v js.Value, p string) (js.Value, error) {
	if t := v.Type(); t != js.TypeObject && t != js.TypeFunction {
		return js.Undefined(), &JSError{Name: "TypeError", Message: "property " + p + " of a non-object"}
	}
	return Call(jsReflect, "get", v, p)
}

var jsReflect = js.Global().Get("Reflect")

// Invoke calls the function f with args, returning a thrown exception as an error.
func Invoke(f js.Value, args ...any) (js.Value, error) {
	return Try(func() js.Value { return f.Invoke(args...) })
}

// InstanceOf reports whether v is an instance of the constructor t; a
// throwing Symbol.hasInstance counts as false.
func InstanceOf(v, t js.Value) bool {
	ok, err := Try(func() bool { return v.InstanceOf(t) })
	return err == nil && ok
}

func recoveredError(r any) error {
	switch e := r.(type) {
	case js.Error:
		return FromJS(e.Value)
	case *js.ValueError:
		return &JSError{Name: "TypeError", Message: e.Error()}
	case error:
		return e
	case string:
		return errors.New(e)
	}
	return errors.New("jsglue: panic in JavaScript call")
}

// FromJS converts a JavaScript exception or rejection reason to a Go error.
// Anything with a string `name` becomes a *JSError; other values (a thrown
// string, undefined) become an "Error" JSError describing them. It never
// panics, whatever the value.
func FromJS(v js.Value) error {
	if v.Type() == js.TypeObject {
		name := stringProp(v, "name")
		msg := stringProp(v, "message")
		if name != "" {
			return &JSError{Name: name, Message: msg}
		}
		if msg != "" {
			return &JSError{Name: "Error", Message: msg}
		}
	}
	s, _ := Try(func() string { return js.Global().Call("String", v).String() })
	return &JSError{Name: "Error", Message: s}
}

func stringProp(v js.Value, name string) string {
	p, err := Get(v, name)
	if err != nil || p.Type() != js.TypeString {
		return ""
	}
	return p.String()
}

// ToJS converts a Go error to a JavaScript Error object whose name is
// NameOf(err) and whose message is err.Error(). Promises handed to
// JavaScript reject with these, never with a Go panic.
func ToJS(err error) js.Value {
	e := js.Global().Get("Error").New(err.Error())
	e.Set("name", NameOf(err))
	return e
}
