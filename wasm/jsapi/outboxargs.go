//go:build !tabfence_core

package main

import (
	"strconv"
	"time"

	"github.com/tabfence/tabfence/outbox"
)

// Argument validation of tf.outbox's options, pure Go like args.go.

// dedupePolicies are the dedupe policies an outbox option may name, in the
// order the TypeError lists them; the d.ts's Dedupe lists the same
// (TestDTSMatchesGo).
var dedupePolicies = []outbox.Dedupe{outbox.Append, outbox.ReplaceLatest, outbox.Merge, outbox.DropIfExists}

// dedupeArg validates policies[key].dedupe.
func dedupeArg(key string, a arg) (outbox.Dedupe, error) {
	names := make([]string, len(dedupePolicies))
	for i, d := range dedupePolicies {
		names[i] = string(d)
		if a.Kind == kindString && a.Str == string(d) {
			return d, nil
		}
	}
	return "", typeErr("outbox", "policies."+key+".dedupe must be "+orList(names, ""))
}

// outboxString validates a string option: required ones non-empty.
func outboxString(name string, a arg, required bool) (string, error) {
	switch {
	case a.absent() && required:
		return "", typeErr("outbox", name+" is required")
	case a.absent():
		return "", nil
	case a.Kind != kindString || (required && a.Str == ""):
		return "", typeErr("outbox", name+" must be a non-empty string")
	}
	return a.Str, nil
}

// msArg validates a duration option in milliseconds (absent: 0, the
// default).
func msArg(name string, a arg) (time.Duration, error) {
	if a.absent() {
		return 0, nil
	}
	if a.Kind != kindNumber || a.Num < 0 {
		return 0, typeErr("outbox", name+" must be a non-negative number of milliseconds")
	}
	return time.Duration(a.Num * float64(time.Millisecond)), nil
}

// maxSchemaVersion keeps a schema version an exact int and its migrations
// a short list.
const maxSchemaVersion = 1 << 20

// schemaVersionArg validates schemaVersion (absent: 1).
func schemaVersionArg(a arg) (int, error) {
	if a.absent() {
		return 1, nil
	}
	if a.Kind != kindNumber || !(a.Num >= 1) || a.Num > maxSchemaVersion || a.Num != float64(int(a.Num)) {
		return 0, typeErr("outbox", "schemaVersion must be an integer from 1 to "+strconv.Itoa(maxSchemaVersion))
	}
	return int(a.Num), nil
}

// migrationFrom validates a key of migrations: a schema version below
// schema.
func migrationFrom(key string, schema int) (int, error) {
	from, ok := smallInt(key)
	if !ok || from >= schema {
		return 0, typeErr("outbox", "migrations."+key+": the key must be a schema version below schemaVersion ("+strconv.Itoa(schema)+")")
	}
	return from, nil
}

// smallInt parses a canonical decimal integer of at most 7 digits (no sign,
// no leading zero), by hand: strconv.Atoi's *NumError would link
// strconv.Quote and its Unicode tables into the download.
func smallInt(s string) (int, bool) {
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
