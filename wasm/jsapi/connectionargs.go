//go:build !tabfence_core && !tabfence_noconnection

package jsapi

import (
	"context"
	"strconv"
	"time"

	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/realtime/browser"
)

// Argument validation of tf.connection's options, pure Go like args.go: the
// *_js.go binding reads each option into an Arg and hands them here. What
// makes a valid scope or store name beyond its shape (reserved prefixes,
// the lock name) is realtime/browser's rule: Open's ErrConfig reaches the
// page as a TypeError too.

const whereConnection = "connection"

// MaxReplicaStores bounds replica.stores: each store is an object store
// the runtime creates and reads; a list of thousands is a bug.
const MaxReplicaStores = 64

// maxOptionMs bounds the duration options (about 24 days): long enough
// for any interval, short of a Duration overflow.
const maxOptionMs = 1<<31 - 1

// ConnectionArgs is tf.connection's options object, field by field.
type ConnectionArgs struct {
	Options         Arg // the object itself
	Scope, Protocol Arg
	URL             Arg // a string, or a function (the binding calls it at each dial)
	Replica         Arg // the replica object
	StoresIsArray   bool
	Stores          []Arg // replica.stores, read up to MaxReplicaStores+1 elements
	Version         Arg   // replica.version
	User, FencePath Arg
	Snapshot        Arg // where a reset replica is reloaded from (GET)
	PingEveryMs     Arg
	PongTimeoutMs   Arg
	Backoff         Arg // the backoff object
	BackoffBase     Arg
	BackoffCap      Arg
	StallAfterMs    Arg
	HiddenNotifyMs  Arg
}

// ValidateConnection checks tf.connection's options and reports the first
// problem as a TypeError. A string url becomes Config.URL; for a function
// url (URLIsFunc) the binding sets Config.URL itself.
func ValidateConnection(a ConnectionArgs) (cfg browser.Config, urlIsFunc bool, err error) {
	if a.Options.Kind != KindObject {
		return cfg, false, TypeErr(whereConnection, "expects an options object {scope, url, replica: {stores}}, got "+a.Options.Kind.String())
	}
	if cfg.Scope, err = RequiredString(whereConnection, "scope", a.Scope); err != nil {
		return cfg, false, err
	}
	cfg.Protocol = 1
	if !a.Protocol.Absent() {
		if cfg.Protocol, err = ProtocolArg(whereConnection, a.Protocol); err != nil {
			return cfg, false, err
		}
	}
	if _, err := locks.Name("rt-"+cfg.Scope, cfg.Protocol); err != nil {
		return cfg, false, TypeErr(whereConnection, "scope "+Quote(cfg.Scope)+" cannot name a lock: "+err.Error())
	}
	switch {
	case a.URL.Kind == KindFunction:
		urlIsFunc = true
	case a.URL.Kind == KindString && a.URL.Str != "":
		u := a.URL.Str
		cfg.URL = func(context.Context) (string, error) { return u, nil }
	default:
		return cfg, false, TypeErr(whereConnection, "url must be a WebSocket URL (ws:, wss: or a path) or a function returning one, got "+a.URL.Kind.String())
	}
	if cfg.Stores, cfg.SchemaVersion, err = replicaArgs(a); err != nil {
		return cfg, false, err
	}
	if cfg.User, err = OptionalString(whereConnection, "user", a.User); err != nil {
		return cfg, false, err
	}
	cfg.Leader.User = cfg.User
	if cfg.FencePath, err = OptionalString(whereConnection, "fencePath", a.FencePath); err != nil {
		return cfg, false, err
	}
	if cfg.Snapshot, err = OptionalString(whereConnection, "snapshot", a.Snapshot); err != nil {
		return cfg, false, err
	}
	if err := connectionTimes(a, &cfg); err != nil {
		return cfg, false, err
	}
	return cfg, urlIsFunc, nil
}

// replicaArgs validates replica: {stores: string[], version?: number}.
func replicaArgs(a ConnectionArgs) (stores []string, version int, err error) {
	if a.Replica.Kind != KindObject {
		return nil, 0, TypeErr(whereConnection, "replica must be an object {stores: string[], version?}, got "+a.Replica.Kind.String())
	}
	if !a.StoresIsArray || len(a.Stores) == 0 {
		return nil, 0, TypeErr(whereConnection, "replica.stores must be a non-empty array of store names")
	}
	if len(a.Stores) > MaxReplicaStores {
		return nil, 0, TypeErr(whereConnection, "replica.stores has more than "+strconv.Itoa(MaxReplicaStores)+" stores")
	}
	for i, s := range a.Stores {
		name, err := RequiredString(whereConnection, "replica.stores["+strconv.Itoa(i)+"]", s)
		if err != nil {
			return nil, 0, err
		}
		for _, seen := range stores {
			if seen == name {
				return nil, 0, TypeErr(whereConnection, "replica.stores names "+Quote(name)+" twice")
			}
		}
		stores = append(stores, name)
	}
	version = 1
	if v := a.Version; !v.Absent() {
		if v.Kind != KindNumber || !(v.Num >= 1) || v.Num > MaxSchemaVersion || v.Num != float64(int(v.Num)) {
			return nil, 0, TypeErr(whereConnection, "replica.version must be an integer from 1 to "+strconv.Itoa(MaxSchemaVersion))
		}
		version = int(v.Num)
	}
	return stores, version, nil
}

// connectionTimes validates the duration options (absent: the runtime's
// defaults) and the backoff.
func connectionTimes(a ConnectionArgs, cfg *browser.Config) error {
	for _, o := range []struct {
		name string
		arg  Arg
		to   *time.Duration
	}{
		{"pingEveryMs", a.PingEveryMs, &cfg.Leader.PingEvery},
		{"pongTimeoutMs", a.PongTimeoutMs, &cfg.Leader.PongTimeout},
		{"hiddenNotifyMs", a.HiddenNotifyMs, &cfg.HiddenNotify},
	} {
		var err error
		if *o.to, err = PositiveMsArg(o.name, o.arg); err != nil {
			return err
		}
	}
	if !a.Backoff.Absent() {
		if a.Backoff.Kind != KindObject {
			return TypeErr(whereConnection, "backoff must be an object {base?, cap?}, got "+a.Backoff.Kind.String())
		}
		base, err := PositiveMsArg("backoff.base", a.BackoffBase)
		if err != nil {
			return err
		}
		cp, err := PositiveMsArg("backoff.cap", a.BackoffCap)
		if err != nil {
			return err
		}
		if base > 0 && cp > 0 && cp < base {
			return TypeErr(whereConnection, "backoff.cap must not be below backoff.base")
		}
		cfg.Leader.Backoff = &outbox.Backoff{Base: base, Cap: cp}
	}
	if s := a.StallAfterMs; !s.Absent() {
		if s.Kind != KindNumber || s.Num != float64(int64(s.Num)) || s.Num < 0 || s.Num > maxOptionMs {
			return TypeErr(whereConnection, "stallAfterMs must be a whole number of milliseconds")
		}
		d := time.Duration(s.Num) * time.Millisecond
		// The connection's election is always fenced.
		if err := locks.ValidStallAfter(d, true); err != nil {
			return TypeErr(whereConnection, "stallAfterMs must be 0 (no watchdog) or from "+
				strconv.FormatInt(int64(locks.MinStallAfter/time.Millisecond), 10)+" to "+
				strconv.FormatInt(int64(locks.MaxStallAfter/time.Millisecond), 10))
		}
		cfg.StallAfter = d
	}
	return nil
}

// PositiveMsArg validates a duration in milliseconds that must be positive
// when given (absent: 0, the default).
func PositiveMsArg(name string, a Arg) (time.Duration, error) {
	if a.Absent() {
		return 0, nil
	}
	if a.Kind != KindNumber || !(a.Num > 0) || a.Num > maxOptionMs {
		return 0, TypeErr(whereConnection, name+" must be a positive number of milliseconds")
	}
	return time.Duration(a.Num * float64(time.Millisecond)), nil
}

// MutationArgs is mutate()'s argument, field by field (the payload's bytes
// are made by the binding: a string, bytes or JSON.stringify).
type MutationArgs struct {
	Mutation   Arg // the object itself
	Op, Entity Arg
	ID         Arg
	HasPayload bool // the payload was given and could be made into bytes
}

// maxMutationID bounds a mutation's id (the idempotency key), as the
// receiver bounds its keys.
const maxMutationID = 200

// ValidateMutation checks mutate()'s argument: op a non-empty string,
// entity and id strings when given, a payload.
func ValidateMutation(a MutationArgs) (browser.Mutation, error) {
	const where = "connection.mutate"
	var m browser.Mutation
	if a.Mutation.Kind != KindObject {
		return m, TypeErr(where, "expects a mutation {op, payload, entity?, id?}, got "+a.Mutation.Kind.String())
	}
	var err error
	if m.Op, err = RequiredString(where, "op", a.Op); err != nil {
		return m, err
	}
	if !a.Entity.Absent() {
		if a.Entity.Kind != KindString {
			return m, TypeErr(where, "entity must be a string when given, got "+a.Entity.Kind.String())
		}
		m.Entity = a.Entity.Str
	}
	if !a.ID.Absent() {
		if a.ID.Kind != KindString || a.ID.Str == "" || len(a.ID.Str) > maxMutationID {
			return m, TypeErr(where, "id must be a non-empty string of at most "+strconv.Itoa(maxMutationID)+" bytes when given")
		}
		m.ID = a.ID.Str
	}
	if !a.HasPayload {
		return m, TypeErr(where, "payload must be a string, a Uint8Array or JSON-serializable")
	}
	return m, nil
}
