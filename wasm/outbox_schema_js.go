//go:build js && wasm && !tabfence_core

package main

import (
	"context"
	"errors"
	"strconv"
	"syscall/js"
	"unicode/utf8"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/browser"
)

// The versions of an outbox (outbox.Names, outbox.SchemaGate): protocol,
// schemaVersion and migrations of tf.outbox, and the unsupported() listing.
// What a runtime sends, migrates or leaves alone is decided in Go; the app's
// migrations are plain functions Go calls one step at a time.

var obUnsupported *jsglue.Callback

// maxSchemaVersion keeps a schema version an exact int and its migrations
// a short list.
const maxSchemaVersion = 1 << 20

func registerOutboxSchema(get func(args []js.Value) (*browser.Runtime, error)) {
	obUnsupported = asyncFunc(func(args []js.Value) (any, error) {
		r, err := get(args)
		if err != nil {
			return nil, err
		}
		recs, err := r.Outbox().Unsupported(context.Background())
		if err != nil {
			return nil, obErr(err)
		}
		arr := js.Global().Get("Array").New()
		for i := range recs {
			arr.Call("push", recordJS(&recs[i]))
		}
		return arr, nil
	})
}

// outboxVersions reads the protocol, schemaVersion and migrations options
// into cfg. migrations[v] upgrades a payload of schema v to v+1.
func outboxVersions(opts js.Value, cfg *browser.RuntimeConfig) error {
	if p := argOf(field(opts, "protocol")); !p.absent() {
		n, err := protocolArg("outbox", p)
		if err != nil {
			return err
		}
		cfg.Protocol = n
	}
	schema := 1
	if v := field(opts, "schemaVersion"); !v.IsUndefined() && !v.IsNull() {
		if !isType(v, js.TypeNumber) || !(v.Float() >= 1) || v.Float() > maxSchemaVersion || v.Float() != float64(int(v.Float())) {
			return typeErr("outbox", "schemaVersion must be an integer from 1 to "+strconv.Itoa(maxSchemaVersion))
		}
		schema = v.Int()
	}
	cfg.Outbox.SchemaVersion = schema
	migs := field(opts, "migrations")
	if migs.IsUndefined() || migs.IsNull() {
		return nil
	}
	if !isType(migs, js.TypeObject) {
		return typeErr("outbox", "migrations must be an object {fromVersion: payload => payload}")
	}
	keys := jsObject.Call("keys", migs)
	for i := 0; i < keys.Length() && i < maxSchemaVersion; i++ {
		k := keys.Index(i).String()
		from, ok := smallInt(k)
		if !ok || from >= schema {
			return typeErr("outbox", "migrations."+k+": the key must be a schema version below schemaVersion ("+strconv.Itoa(schema)+")")
		}
		fn := field(migs, k)
		if !isType(fn, js.TypeFunction) {
			return typeErr("outbox", "migrations."+k+" must be a function")
		}
		cfg.Outbox.Migrations = append(cfg.Outbox.Migrations, outbox.Migration{From: from, To: from + 1, Migrate: migrationFunc(fn)})
	}
	return nil
}

var (
	errMigrationResult  = errors.New("migration returned no payload (undefined, or not JSON-serializable)")
	errMigrationPromise = errors.New("migration returned a promise: migrations must be synchronous")
)

// migrationFunc calls fn with the parsed JSON payload (the string when it
// is not JSON; a Uint8Array when it is not UTF-8, so bytes reach it intact)
// and takes its result as enqueue takes a payload: a string or bytes as
// is, anything else as JSON.stringify. A throw, or a promise (an async
// function: JSON.stringify would send "{}"), is the migration's failure:
// the record stays as stored (outbox.SchemaRefused).
func migrationFunc(fn js.Value) func([]byte) ([]byte, error) {
	return func(p []byte) ([]byte, error) {
		var in js.Value
		if utf8.Valid(p) {
			s := string(p)
			var err error
			if in, err = jsglue.Call(jsJSON, "parse", s); err != nil {
				in = js.ValueOf(s)
			}
		} else {
			in = jsUint8Array.New(len(p))
			js.CopyBytesToJS(in, p)
		}
		out, err := jsglue.Invoke(fn, in)
		if err != nil {
			return nil, err
		}
		if out.Type() == js.TypeObject && out.Get("then").Type() == js.TypeFunction {
			return nil, errMigrationPromise
		}
		b, ok := payloadBytes(out)
		if !ok {
			return nil, errMigrationResult
		}
		return b, nil
	}
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
