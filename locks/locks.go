package locks

import (
	"context"
	"strconv"
	"unicode/utf8"

	"github.com/tabfence/tabfence/jsglue"
)

// Error is the type of this package's sentinel errors. JSName is the name a
// rejected JavaScript promise carries (see jsglue.NameOf), so the JS API
// can hand these to pages as named errors.
type Error struct {
	msg    string
	jsName string
	is     error // an extra error it matches with errors.Is, if any
}

func (e *Error) Error() string  { return e.msg }
func (e *Error) JSName() string { return e.jsName }

// Is lets ErrUnavailable match jsglue.ErrUnavailable too.
func (e *Error) Is(target error) bool { return e.is != nil && target == e.is }

var (
	// ErrUnavailable: navigator.locks is missing (not a secure context, an
	// old browser, or not running in a browser at all). It also matches
	// jsglue.ErrUnavailable.
	ErrUnavailable = &Error{"locks: navigator.locks is unavailable (Web Locks need a secure context)", "NotSupportedError", jsglue.ErrUnavailable}
	// ErrNotAcquired: an IfAvailable request found the lock held (or other
	// requests queued for it); fn did not run.
	ErrNotAcquired = &Error{"locks: lock not acquired (held by another request)", "NotAcquiredError", nil}
	// ErrStolen: another request took the held lock with Steal. The
	// browser rejected the holder's request with AbortError; fn's context
	// was cancelled with this cause.
	ErrStolen = &Error{"locks: lock stolen by another request", "LockStolenError", nil}
	// ErrClosed: the election was closed.
	ErrClosed = &Error{"locks: election closed", "InvalidStateError", nil}
	// ErrResigned: the leader resigned (Election.Resign).
	ErrResigned = &Error{"locks: leadership resigned", "AbortError", nil}
	// ErrFenced: the leader stepped down because a write or message of
	// its was rejected as stale (Leadership.StepDown).
	ErrFenced = &Error{"locks: leadership fenced: a newer leader exists", "StaleOwnerError", nil}
	// ErrInvalidOptions: a combination the Web Locks spec rejects.
	ErrInvalidOptions = &Error{"locks: invalid lock options", "NotSupportedError", nil}
	// ErrInvalidName: a scope or protocol that cannot make a lock name.
	ErrInvalidName = &Error{"locks: invalid lock name", "SyntaxError", nil}
)

// Mode is a lock mode. The zero value is Exclusive.
type Mode int

const (
	Exclusive Mode = iota // one holder at a time
	Shared                // any number of Shared holders, no Exclusive one
)

// String returns the Web Locks spelling: "exclusive" or "shared".
func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode is the inverse of Mode.String (navigator.locks.query reports
// modes as strings).
func ParseMode(s string) (Mode, bool) {
	switch s {
	case "exclusive":
		return Exclusive, true
	case "shared":
		return Shared, true
	}
	return 0, false
}

// Options are the options of one lock request.
type Options struct {
	Mode Mode
	// IfAvailable grants the lock only if it can be granted at once;
	// otherwise Request returns ErrNotAcquired without running fn.
	IfAvailable bool
	// Steal releases any held lock of that name (its holder's request
	// rejects with AbortError) and grants this request at once, ahead of
	// the queue. Safe only when the protected resource is fenced.
	Steal bool
}

// Validate reports combinations the Web Locks spec rejects with
// NotSupportedError: steal with ifAvailable, steal with shared mode, and
// unknown modes. The browser would reject them anyway; checking here gives
// a Go error before any JavaScript runs.
func (o Options) Validate() error {
	switch {
	case o.Mode != Exclusive && o.Mode != Shared:
		return wrap(ErrInvalidOptions, "unknown mode "+o.Mode.String())
	case o.Steal && o.IfAvailable:
		return wrap(ErrInvalidOptions, "steal and ifAvailable cannot be combined")
	case o.Steal && o.Mode == Shared:
		return wrap(ErrInvalidOptions, "steal requires exclusive mode")
	}
	return nil
}

// MaxScopeLen is the longest scope Name accepts, in bytes.
const MaxScopeLen = 200

// Name builds the lock (and channel) name "tabfence:<scope>:v<protocol>".
//
// The protocol version is part of the name on purpose: a leader holds its
// lock until its tab closes, so a tab left open on an old build would
// otherwise keep leading after a deploy while every new tab waits behind it.
// Each protocol version elects its own leader instead.
//
// scope must be non-empty valid UTF-8 of at most MaxScopeLen bytes without
// control characters; protocol must be >= 1. Otherwise ErrInvalidName.
func Name(scope string, protocol int) (string, error) {
	if err := validScope(scope); err != nil {
		return "", err
	}
	if protocol < 1 {
		return "", wrap(ErrInvalidName, "protocol must be >= 1, got "+strconv.Itoa(protocol))
	}
	return "tabfence:" + scope + ":v" + strconv.Itoa(protocol), nil
}

func validScope(scope string) error {
	switch {
	case scope == "":
		return wrap(ErrInvalidName, "empty scope")
	case len(scope) > MaxScopeLen:
		return wrap(ErrInvalidName, "scope longer than "+strconv.Itoa(MaxScopeLen)+" bytes")
	}
	// Not utf8.ValidString: the range loop below already decodes, and an
	// invalid byte is the only way it yields RuneError one byte wide
	// (a literal U+FFFD is three bytes). Checked in a first pass so a scope
	// with both faults is still reported as invalid UTF-8.
	for i, r := range scope {
		if r == utf8.RuneError && (len(scope) < i+3 || scope[i:i+3] != "\uFFFD") {
			return wrap(ErrInvalidName, "scope is not valid UTF-8")
		}
	}
	for i, r := range scope {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return wrap(ErrInvalidName, "control character in scope at byte "+strconv.Itoa(i))
		}
	}
	return nil
}

// detailError adds detail to a sentinel while still matching it.
type detailError struct {
	sentinel *Error
	detail   string
}

func (e *detailError) Error() string  { return e.sentinel.msg + ": " + e.detail }
func (e *detailError) Unwrap() error  { return e.sentinel }
func (e *detailError) JSName() string { return e.sentinel.jsName }

func wrap(s *Error, detail string) error { return &detailError{s, detail} }

// Info describes one held or pending lock request (navigator.locks.query).
type Info struct {
	Name     string
	Mode     Mode
	ClientID string // the browser's id of the tab or worker that made it
}

// Snapshot is the state of this origin's locks at one moment. It is a
// snapshot: by the time it is read, it may have changed.
type Snapshot struct {
	Held    []Info
	Pending []Info
}

// Holds reports whether some request holds the lock called name.
func (s Snapshot) Holds(name string) bool { return hasName(s.Held, name) }

// Waiting reports how many requests are queued for the lock called name.
func (s Snapshot) Waiting(name string) int {
	n := 0
	for _, i := range s.Pending {
		if i.Name == name {
			n++
		}
	}
	return n
}

func hasName(infos []Info, name string) bool {
	for _, i := range infos {
		if i.Name == name {
			return true
		}
	}
	return false
}

// Request asks for the lock called name and runs fn while it is held.
//
// fn runs on its own goroutine. The JavaScript lock callback returns at once
// a promise that is settled when fn returns, which releases the lock: the
// event loop is never blocked while fn works.
//
// fn's ctx is cancelled when ctx ends or, with cause ErrStolen, when another
// request steals the lock; fn should then return promptly. Request returns
// only after fn has returned, so fn never outlives it.
//
// Results: fn's error; ErrNotAcquired (IfAvailable, lock not free);
// ErrStolen (the lock was stolen while held); ctx.Err() when ctx ended while
// the request was still waiting (the request is withdrawn from the queue
// through an AbortSignal); ErrUnavailable without navigator.locks;
// ErrInvalidOptions. A panic in fn is recovered and returned as an error.
//
// Request waits: call it from a goroutine, never from a JavaScript callback.
func Request(ctx context.Context, name string, opts Options, fn func(ctx context.Context) error) error {
	return request(ctx, name, opts, fn, nil)
}

func request(ctx context.Context, name string, opts Options, fn func(ctx context.Context) error, queued func()) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	if fn == nil {
		return wrap(ErrInvalidOptions, "nil fn")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return platformRequest(ctx, name, opts, fn, queued)
}

// Query returns a snapshot of this origin's held and pending locks
// (navigator.locks.query), across all tabs and workers.
func Query(ctx context.Context) (Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return Snapshot{}, err
	}
	return platformQuery(ctx)
}

// runFn calls fn, turning a panic into an error.
func runFn(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicErr("lock callback", r)
		}
	}()
	return fn(ctx)
}

// PanicError is a panic recovered from user code (a Request fn or an
// election callback).
type PanicError struct {
	Where string // "lock callback", "OnLeader", ...
	Value any
}

func (e *PanicError) Error() string {
	s := "locks: panic in " + e.Where
	switch v := e.Value.(type) {
	case error:
		return s + ": " + v.Error()
	case string:
		return s + ": " + v
	}
	return s
}

// Unwrap returns the panic value when it was an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

func panicErr(where string, r any) error { return &PanicError{Where: where, Value: r} }
