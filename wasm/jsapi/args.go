package jsapi

import (
	"strconv"
	"time"

	"github.com/tabfence/tabfence/internal/quote"
	"github.com/tabfence/tabfence/locks"
)

// Argument validation for the JavaScript API, kept free of syscall/js so it
// is tested natively. The *_js.go files read a JavaScript value into an arg
// and hand it here; every bad argument becomes a TypeError that JavaScript
// sees as thrown or as a rejected promise, never a Go panic.

// Kind mirrors js.Type (plus "array" and "integer" are not separate: the
// number check is done on the value).
type Kind int

const (
	KindUndefined Kind = iota
	KindNull
	KindBoolean
	KindNumber
	KindString
	KindSymbol
	KindObject
	KindFunction
	KindBigInt
)

var kindNames = [...]string{"undefined", "null", "boolean", "number", "string", "symbol", "object", "function", "bigint"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Arg is one JavaScript value as validation sees it.
type Arg struct {
	Kind Kind
	Str  string  // for kindString
	Num  float64 // for kindNumber
}

func (a Arg) Absent() bool { return a.Kind == KindUndefined || a.Kind == KindNull }

// TypeError is an argument error; jsglue.ToJS names it "TypeError" through
// JSName, so JavaScript callers can tell misuse from a runtime failure.
type TypeError struct{ Msg string }

func (e *TypeError) Error() string  { return e.Msg }
func (e *TypeError) JSName() string { return "TypeError" }

func TypeErr(where, msg string) error { return &TypeError{Msg: "tabfence." + where + ": " + msg} }

// maxProtocol keeps protocol an exact int on every platform and readable in a
// lock name.
const maxProtocol = 1<<31 - 1

// maxNameLen bounds scope, resource and owner id. Web Lock names have no
// limit, but a megabyte scope is a bug, and it would be copied into every
// lock and channel name.
const maxNameLen = 256

// RequiredString validates a non-empty string option.
func RequiredString(where, Field string, a Arg) (string, error) {
	if a.Kind != KindString {
		return "", TypeErr(where, Field+" must be a non-empty string, got "+a.Kind.String())
	}
	return CheckedString(where, Field, a.Str)
}

// OptionalString validates a string option that may be left out.
func OptionalString(where, Field string, a Arg) (string, error) {
	if a.Absent() {
		return "", nil
	}
	if a.Kind != KindString {
		return "", TypeErr(where, Field+" must be a string when given, got "+a.Kind.String())
	}
	return CheckedString(where, Field, a.Str)
}

func CheckedString(where, Field, s string) (string, error) {
	if s == "" {
		return "", TypeErr(where, Field+" must not be empty")
	}
	if len(s) > maxNameLen {
		return "", TypeErr(where, Field+" is "+strconv.Itoa(len(s))+" bytes long; the limit is "+strconv.Itoa(maxNameLen))
	}
	return s, nil
}

// ProtocolArg validates a protocol version: a number (not a numeric string,
// which would hide a caller passing the wrong field) that is a positive
// integer. The version is part of the lock name so that an old tab left open
// after a deploy cannot lead tabs of the new version.
func ProtocolArg(where string, a Arg) (int, error) {
	if a.Kind != KindNumber {
		return 0, TypeErr(where, "protocol must be a positive integer number, got "+a.Kind.String())
	}
	n := a.Num
	if n != n || n < 1 || n > maxProtocol || n != float64(int64(n)) {
		return 0, TypeErr(where, "protocol must be an integer from 1 to "+strconv.Itoa(maxProtocol)+", got "+strconv.FormatFloat(n, 'g', -1, 64))
	}
	return int(n), nil
}

// OptionalFunc checks that a callback option is a function or absent.
func OptionalFunc(where, Field string, a Arg) (bool, error) {
	if a.Absent() {
		return false, nil
	}
	if a.Kind != KindFunction {
		return false, TypeErr(where, Field+" must be a function when given, got "+a.Kind.String())
	}
	return true, nil
}

// ElectArgs is the options object of elect(), field by field.
type ElectArgs struct {
	Options                      Arg // the object itself
	Scope, Protocol              Arg
	Resource, OwnerID            Arg
	OnLeader, OnFollower, OnLost Arg
}

// ElectOptions is electArgs once validated.
type ElectOptions struct {
	Scope, Resource, OwnerID              string
	Protocol                              int
	HasOnLeader, HasOnFollower, HasOnLost bool
}

// ValidateElect checks elect()'s options and reports the first problem.
func ValidateElect(a ElectArgs) (ElectOptions, error) {
	const where = "elect"
	var o ElectOptions
	if a.Options.Kind != KindObject {
		return o, TypeErr(where, "expects an options object {scope, protocol, onLeader, onFollower, onLost}, got "+a.Options.Kind.String())
	}
	var err error
	if o.Scope, err = RequiredString(where, "scope", a.Scope); err != nil {
		return o, err
	}
	if o.Protocol, err = ProtocolArg(where, a.Protocol); err != nil {
		return o, err
	}
	// locks.Name has the last word on what makes a lock name (length,
	// control characters); its complaint is still a TypeError to the caller.
	if _, err := locks.Name(o.Scope, o.Protocol); err != nil {
		return o, TypeErr(where, "scope "+Quote(o.Scope)+" cannot name a lock: "+err.Error())
	}
	if o.Resource, err = OptionalString(where, "resource", a.Resource); err != nil {
		return o, err
	}
	if o.OwnerID, err = OptionalString(where, "ownerID", a.OwnerID); err != nil {
		return o, err
	}
	if o.HasOnLeader, err = OptionalFunc(where, "onLeader", a.OnLeader); err != nil {
		return o, err
	}
	if o.HasOnFollower, err = OptionalFunc(where, "onFollower", a.OnFollower); err != nil {
		return o, err
	}
	if o.HasOnLost, err = OptionalFunc(where, "onLost", a.OnLost); err != nil {
		return o, err
	}
	return o, nil
}

// Quote renders s for an error message (see internal/quote).
func Quote(s string) string { return quote.Quote(s) }

// StallAfterArg reads elect()'s stallAfter, the watchdog: absent, null or
// false (none), true (locks.DefaultStallAfter), or a whole number of
// milliseconds (0: none), which locks.ValidStallAfter judges (boolean true
// arrives with Num 1, see argOf).
func StallAfterArg(where string, a Arg, fenced bool) (time.Duration, error) {
	var d time.Duration
	switch a.Kind {
	case KindUndefined, KindNull:
		return 0, nil
	case KindBoolean:
		if a.Num != 0 {
			d = locks.DefaultStallAfter
		}
	case KindNumber:
		n := a.Num
		if n != n || n < 0 || n > float64(2*locks.MaxStallAfter/time.Millisecond) || n != float64(int64(n)) {
			return 0, TypeErr(where, "stallAfter must be a whole number of milliseconds")
		}
		d = time.Duration(n) * time.Millisecond
	default:
		return 0, TypeErr(where, "stallAfter must be a number of milliseconds or a boolean, got "+a.Kind.String())
	}
	if err := locks.ValidStallAfter(d, fenced); err != nil {
		return 0, TypeErr(where, err.Error())
	}
	return d, nil
}

// OrList renders names as "a, b, c or d", each in quote marks q.
func OrList(names []string, q string) string {
	s := ""
	for i, n := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			s += " or "
		default:
			s += ", "
		}
		s += q + n + q
	}
	return s
}
