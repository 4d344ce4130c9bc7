package queue

import (
	"strconv"
	"time"

	"github.com/tabfence/tabfence/locks"
)

// This file holds the two versions of a queue. The protocol is the queue's
// compatibility with the server: tabs of different protocols never share
// anything (database, Web Lock, channel, lease, server fencing resource), so a
// tab left open from before a deploy keeps its own queue and never leads the
// new one. The payload schema is a record's shape within one protocol: a
// runtime sends its own schema, migrates older ones with the app's
// migrations, and leaves the rest alone (SchemaGate).

// QueueNames are the names of one queue at one protocol.
type QueueNames struct {
	// Lock names the Web Lock and the BroadcastChannel:
	// "tabfence:outbox-<name>:v<protocol>" (locks.Name).
	Lock string
	// Database is the IndexedDB database. Protocol 1 keeps the name it had
	// before protocols existed ("tabfence-outbox:<name>"), so an existing
	// queue drains after an upgrade; any other protocol uses Lock, so its
	// queue starts empty and never sees another protocol's records.
	Database string
	// Lease is the lease row in that database: "outbox-flush:v<protocol>:<name>".
	Lease string
}

// Names returns the names of queue name at protocol (>= 1). The error is
// ErrInvalidRecord for an empty name, locks.ErrInvalidName's for a name or
// protocol that cannot make a lock name.
func Names(name string, protocol int) (QueueNames, error) {
	if name == "" {
		return QueueNames{}, &opError{op: "names", detail: "empty queue name", err: ErrInvalidRecord}
	}
	lock, err := locks.Name("outbox-"+name, protocol)
	if err != nil {
		return QueueNames{}, err
	}
	n := QueueNames{Lock: lock, Database: lock, Lease: LeaseName(name, protocol)}
	if protocol == 1 {
		n.Database = protocol1DB(name)
	}
	return n, nil
}

func protocol1DB(name string) string { return "tabfence-outbox:" + name }

// FenceResource is the server fencing resource of queue name's flush owner
// for user at protocol: "outbox:<name>:<user>" at protocol 1 (as before
// protocols), else "outbox-v<protocol>:<name>:<user>", with the characters
// the receiver does not accept in a resource ([A-Za-z0-9-_.:/@]) replaced
// by '_' and cut to 200. Only protocol 1's starts "outbox:" and the prefix
// up to the first ':' names the protocol, so no (name, protocol) pair takes
// another protocol's resource, whatever the name holds (a suffix
// ":v<digits>" of the name would, at the end).
func FenceResource(name string, protocol int, user string) string {
	if protocol <= 1 {
		return sanitizeResource("outbox:" + name + ":" + user)
	}
	return sanitizeResource("outbox-v" + strconv.Itoa(protocol) + ":" + name + ":" + user)
}

// sanitizeResource replaces the characters the receiver does not accept
// in a resource by '_' and cuts it to 200 bytes.
func sanitizeResource(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == ':' || c == '/' || c == '@'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// LeaseName is the lease row of queue name at protocol (QueueNames.Lease).
func LeaseName(name string, protocol int) string {
	return "outbox-flush:v" + strconv.Itoa(protocol) + ":" + name
}

// CodeSchemaUnsupported is the ErrorInfo code of a record whose migration to
// the runtime's schema failed.
const CodeSchemaUnsupported = "schema_unsupported"

// SchemaAction is what a runtime does with a record's payload schema.
type SchemaAction int

const (
	SchemaSend        SchemaAction = iota // the runtime's schema: sent as stored
	SchemaMigrate                         // older, with a migration path: migrated at each send
	SchemaUnsupported                     // left alone: never sent, never deleted, counted as unsupported
)

// SchemaGate is the one rule of which records a runtime may send, must
// migrate first, or leaves alone. The claim, the charge, the send and the
// status count all ask it, so a runtime never sends a record it shows as
// unsupported, nor the reverse.
type SchemaGate struct {
	// Version is the schema this runtime writes and sends; <= 0 sends
	// every record as stored (no gate).
	Version int
	// Migrations are the app's one-way steps (only From and To are read).
	Migrations []Migration
	// Since is when this runtime started. A record whose migration failed
	// at or after Since (LastError CodeSchemaUnsupported) is left alone: it
	// failed here already. A runtime started later (a fixed build) tries it
	// again, once.
	Since time.Time
}

// Action returns what the runtime does with r. A record without a schema
// version (0) is of schema 1, the default (stores need not keep a zero).
func (g SchemaGate) Action(r *Record) SchemaAction {
	v := max(r.PayloadSchemaVersion, 1)
	switch {
	case g.Version <= 0 || v == g.Version:
		return SchemaSend
	case v > g.Version, !g.hasPath(v), g.failedHere(r):
		return SchemaUnsupported
	}
	return SchemaMigrate
}

// Unsupported reports whether r is an unsettled record the runtime leaves
// alone because of its schema (outbox.Projection.Unsupported).
func (g SchemaGate) Unsupported(r *Record) bool {
	return !r.Status.Settled() && g.Action(r) == SchemaUnsupported
}

// hasPath reports whether the migrations lead from v to Version, taking the
// steps MigratePayload takes.
func (g SchemaGate) hasPath(v int) bool {
	for v < g.Version {
		next := nextStep(g.Migrations, v, g.Version)
		if next == nil {
			return false
		}
		v = next.To
	}
	return v == g.Version
}

func (g SchemaGate) failedHere(r *Record) bool {
	e := r.LastError
	return e != nil && e.Code == CodeSchemaUnsupported && !e.At.Before(g.Since)
}

// nextStep is the migration MigratePayload applies from version from on the
// way to version to: the first one starting at from that does not overshoot.
func nextStep(migs []Migration, from, to int) *Migration {
	for i := range migs {
		if migs[i].From == from && migs[i].To > from && migs[i].To <= to {
			return &migs[i]
		}
	}
	return nil
}

// SchemaRefused is the transition of a charged record whose migration
// failed: the charge is taken back (Unsend: it never reached the transport),
// the payload and schema stay as stored, and the error is kept, so the
// record stays waiting and visible as unsupported (SchemaGate.failedHere).
func SchemaRefused(r Record, l Lease, now time.Time, e ErrorInfo) (Record, error) {
	n, err := Unsend(r, l, now)
	if err != nil {
		return n, err
	}
	e.Code, e.At = CodeSchemaUnsupported, now
	n.LastError = &e
	return n, nil
}
