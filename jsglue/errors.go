// Package jsglue is the bridge between Go compiled to wasm and the browser's
// JavaScript: awaiting promises with a context, handing JavaScript callbacks
// that never block its event loop, and mapping exceptions to typed Go errors.
//
// It knows nothing of tabfence. The error table in this file is pure Go so it
// is tested natively; everything touching syscall/js lives in *_js.go files.
package jsglue

import (
	"context"
	"errors"
)

// Sentinel errors for the DOMException and JavaScript error names the
// runtime meets. A *JSError matches the sentinel of its name with errors.Is,
// so callers branch on meaning, never on message text.
var (
	ErrAbort               = errors.New("AbortError")
	ErrNotAllowed          = errors.New("NotAllowedError")
	ErrQuotaExceeded       = errors.New("QuotaExceededError")
	ErrInvalidState        = errors.New("InvalidStateError")
	ErrNotFound            = errors.New("NotFoundError")
	ErrNotSupported        = errors.New("NotSupportedError")
	ErrDataClone           = errors.New("DataCloneError")
	ErrData                = errors.New("DataError")
	ErrConstraint          = errors.New("ConstraintError")
	ErrTransactionInactive = errors.New("TransactionInactiveError")
	ErrReadOnly            = errors.New("ReadOnlyError")
	ErrVersion             = errors.New("VersionError")
	ErrTimeout             = errors.New("TimeoutError")
	ErrSecurity            = errors.New("SecurityError")
	ErrUnknown             = errors.New("UnknownError")
	ErrType                = errors.New("TypeError")
	ErrRange               = errors.New("RangeError")
	// ErrUnavailable means a browser API is missing in this context (for
	// example navigator.locks outside a secure context).
	ErrUnavailable = errors.New("jsglue: browser API unavailable")
)

var byName = map[string]error{}

func init() {
	for _, e := range []error{ErrAbort, ErrNotAllowed, ErrQuotaExceeded, ErrInvalidState,
		ErrNotFound, ErrNotSupported, ErrDataClone, ErrData, ErrConstraint,
		ErrTransactionInactive, ErrReadOnly, ErrVersion, ErrTimeout, ErrSecurity,
		ErrUnknown, ErrType, ErrRange} {
		byName[e.Error()] = e
	}
}

// Sentinel returns the sentinel error for a JavaScript error name, or nil
// when the name is not one jsglue knows.
func Sentinel(name string) error { return byName[name] }

// Names lists every error name with a sentinel, for tests and docs.
func Names() []string {
	out := make([]string, 0, len(byName))
	for n := range byName {
		out = append(out, n)
	}
	return out
}

// JSError is an exception or rejection reason that came from JavaScript.
type JSError struct {
	Name    string // e.g. "QuotaExceededError"; "Error" for plain errors
	Message string
}

// NewJSError builds a JSError; used where a name was read from JavaScript.
func NewJSError(name, message string) *JSError { return &JSError{Name: name, Message: message} }

func (e *JSError) Error() string {
	if e.Message == "" {
		return e.Name
	}
	return e.Name + ": " + e.Message
}

// Is reports whether target is the sentinel for e's name, so
// errors.Is(err, jsglue.ErrQuotaExceeded) works on any wrapped JSError.
func (e *JSError) Is(target error) bool {
	s := byName[e.Name]
	return s != nil && s == target
}

// namedError is an error that names its JavaScript error type itself
// (e.g. locks.LostError -> "LostLeadershipError").
type namedError interface {
	error
	JSName() string
}

// NameOf returns the JavaScript error name a Go error should carry when it
// is handed back to JavaScript: the name of a JSError or known sentinel in
// its chain, the name of a Named error, or "Error".
func NameOf(err error) string {
	// errors.AsType, not errors.As: As links reflection code into the wasm
	// download (~10 KB brotli measured); AsType only asserts types.
	if je, ok := errors.AsType[*JSError](err); ok && je.Name != "" {
		return je.Name
	}
	if n, ok := errors.AsType[namedError](err); ok {
		return n.JSName()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "AbortError"
	case errors.Is(err, context.DeadlineExceeded):
		return "TimeoutError"
	}
	for name, s := range byName {
		if errors.Is(err, s) {
			return name
		}
	}
	return "Error"
}
