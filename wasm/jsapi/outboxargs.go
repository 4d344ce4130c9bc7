//go:build !tabfence_core

package jsapi

import (
	"strconv"
	"time"

	"github.com/tabfence/tabfence/outbox/queue"
)

// Argument validation of tf.outbox's options, pure Go like args.go.

// DedupeArg validates policies[key].dedupe against the table of
// policies (queue.DedupePolicies), which the d.ts's Dedupe lists too
// (TestDTSMatchesGo).
func DedupeArg(key string, a Arg) (queue.Dedupe, error) {
	policies := queue.DedupePolicies()
	names := make([]string, len(policies))
	for i, d := range policies {
		names[i] = string(d)
		if a.Kind == KindString && a.Str == string(d) {
			return d, nil
		}
	}
	return "", TypeErr("outbox", "policies."+key+".dedupe must be "+OrList(names, ""))
}

// OutboxString validates a string option: required ones non-empty.
func OutboxString(name string, a Arg, required bool) (string, error) {
	switch {
	case a.Absent() && required:
		return "", TypeErr("outbox", name+" is required")
	case a.Absent():
		return "", nil
	case a.Kind != KindString || (required && a.Str == ""):
		return "", TypeErr("outbox", name+" must be a non-empty string")
	}
	return a.Str, nil
}

// MsArg validates a duration option in milliseconds (absent: 0, the
// default).
func MsArg(name string, a Arg) (time.Duration, error) {
	if a.Absent() {
		return 0, nil
	}
	if a.Kind != KindNumber || a.Num < 0 {
		return 0, TypeErr("outbox", name+" must be a non-negative number of milliseconds")
	}
	return time.Duration(a.Num * float64(time.Millisecond)), nil
}

// MaxBatchMax bounds batch.max: a page of records is built and parsed in
// memory, and a receiver refuses pages above its own limit anyway (413).
const MaxBatchMax = 1000

// MaxBatchBytes bounds batch.maxBytes: a request body held in memory.
const MaxBatchBytes = 64 << 20

// Batch is tab.outbox's batch option: the receiver's batch route, and the
// mutations and bytes of one request (0: the outbox's defaults).
type Batch struct {
	Endpoint      string
	Max, MaxBytes int
}

// BatchArgs validates batch: {endpoint, max?, maxBytes?} (absent: no batch
// endpoint, records go one by one; absent max or maxBytes: 0, the
// outbox's default).
func BatchArgs(batch, endpoint, max, maxBytes Arg) (Batch, error) {
	if batch.Absent() {
		return Batch{}, nil
	}
	if batch.Kind != KindObject {
		return Batch{}, TypeErr("outbox", "batch must be an object {endpoint, max?, maxBytes?}, got "+batch.Kind.String())
	}
	ep, err := OutboxString("batch.endpoint", endpoint, true)
	if err != nil {
		return Batch{}, err
	}
	b := Batch{Endpoint: ep}
	if b.Max, err = optionalCount("batch.max", max, MaxBatchMax); err != nil {
		return Batch{}, err
	}
	if b.MaxBytes, err = optionalCount("batch.maxBytes", maxBytes, MaxBatchBytes); err != nil {
		return Batch{}, err
	}
	return b, nil
}

// optionalCount validates an optional integer option from 1 to hi (absent: 0).
func optionalCount(name string, a Arg, hi int) (int, error) {
	if a.Absent() {
		return 0, nil
	}
	if a.Kind != KindNumber || !(a.Num >= 1) || a.Num > float64(hi) || a.Num != float64(int(a.Num)) {
		return 0, TypeErr("outbox", name+" must be an integer from 1 to "+strconv.Itoa(hi))
	}
	return int(a.Num), nil
}

// MaxSchemaVersion keeps a schema version an exact int and its migrations
// a short list.
const MaxSchemaVersion = 1 << 20

// SchemaVersionArg validates schemaVersion (absent: 1).
func SchemaVersionArg(a Arg) (int, error) {
	if a.Absent() {
		return 1, nil
	}
	if a.Kind != KindNumber || !(a.Num >= 1) || a.Num > MaxSchemaVersion || a.Num != float64(int(a.Num)) {
		return 0, TypeErr("outbox", "schemaVersion must be an integer from 1 to "+strconv.Itoa(MaxSchemaVersion))
	}
	return int(a.Num), nil
}

// MigrationFrom validates a key of migrations: a schema version below
// schema.
func MigrationFrom(key string, schema int) (int, error) {
	from, ok := SmallInt(key)
	if !ok || from >= schema {
		return 0, TypeErr("outbox", "migrations."+key+": the key must be a schema version below schemaVersion ("+strconv.Itoa(schema)+")")
	}
	return from, nil
}

// SmallInt parses a canonical decimal integer of at most 7 digits (no sign,
// no leading zero), by hand: strconv.Atoi's *NumError would link
// strconv.Quote and its Unicode tables into the download.
func SmallInt(s string) (int, bool) {
	if s == "" || len(s) > 7 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// BoolOption reads an optional boolean option of where (absent: def).
func BoolOption(where, name string, a Arg, def bool) (bool, error) {
	switch {
	case a.Absent():
		return def, nil
	case a.Kind == KindBoolean:
		return a.Num != 0, nil
	}
	return false, TypeErr(where, name+" must be a boolean, got "+a.Kind.String())
}

// DefaultDrainTimeout is how long a drain waits for the flush lock and
// flushes by default: within the ~3 minutes Chromium gives a sync event.
const DefaultDrainTimeout = 2 * time.Minute

// DrainArgs reads SyncOutbox.drain's {lastChance, timeoutMs} (absent
// timeoutMs: DefaultDrainTimeout; 0 is not a timeout).
func DrainArgs(lastChance, timeoutMs Arg) (last bool, timeout time.Duration, err error) {
	if last, err = BoolOption("backgroundSync.drain", "lastChance", lastChance, false); err != nil {
		return false, 0, err
	}
	if timeoutMs.Absent() {
		return last, DefaultDrainTimeout, nil
	}
	if n := timeoutMs.Num; timeoutMs.Kind != KindNumber || !(n >= 1) || n > 24*3600e3 {
		return false, 0, TypeErr("backgroundSync.drain", "timeoutMs must be a number of milliseconds from 1 to a day")
	}
	return last, time.Duration(timeoutMs.Num * float64(time.Millisecond)), nil
}
