//go:build js && wasm

package jsglue

import (
	"errors"
	"syscall/js"

	"github.com/hack-pad/safejs"
)

// Value is a JavaScript value whose accessors return errors instead of
// panicking; use it for anything read from untrusted sources.
type Value = safejs.Value

// Global returns the JavaScript global object.
func Global() Value { return safejs.Global() }

// Safe and Unsafe convert between syscall/js and safejs values.
func Safe(v js.Value) Value   { return safejs.Safe(v) }
func Unsafe(v Value) js.Value { return safejs.Unsafe(v) }

// Try runs fn and turns a JavaScript exception thrown inside it into a
// *JSError that keeps the exception's name (safejs's own error type loses
// it, and the name is what callers branch on).
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
	sv := safejs.Safe(v)
	if v.Type() == js.TypeObject {
		name := stringProp(sv, "name")
		msg := stringProp(sv, "message")
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

func stringProp(v safejs.Value, name string) string {
	p, err := v.Get(name)
	if err != nil || p.Type() != safejs.TypeString {
		return ""
	}
	s, _ := p.String()
	return s
}

// ToJS converts a Go error to a JavaScript Error object whose name is
// NameOf(err) and whose message is err.Error(). Promises handed to
// JavaScript reject with these, never with a Go panic.
func ToJS(err error) js.Value {
	e := js.Global().Get("Error").New(err.Error())
	e.Set("name", NameOf(err))
	return e
}
