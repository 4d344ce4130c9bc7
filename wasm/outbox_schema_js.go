//go:build js && wasm && !tabfence_core

package main

import (
	"errors"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox/browser"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// The versions of an outbox (queue.Names, queue.SchemaGate): protocol,
// schemaVersion and migrations of tf.outbox.
// What a runtime sends, migrates or leaves alone is decided in Go; the app's
// migrations are plain functions Go calls one step at a time.

// outboxVersions reads the protocol, schemaVersion and migrations options
// into cfg. migrations[v] upgrades a payload of schema v to v+1.
func outboxVersions(opts js.Value, cfg *browser.RuntimeConfig) error {
	if p := jsapi.ArgOf(jsapi.Field(opts, "protocol")); !p.Absent() {
		n, err := jsapi.ProtocolArg("outbox", p)
		if err != nil {
			return err
		}
		cfg.Protocol = n
	}
	schema, err := jsapi.SchemaVersionArg(jsapi.ArgOf(jsapi.Field(opts, "schemaVersion")))
	if err != nil {
		return err
	}
	cfg.Outbox.SchemaVersion = schema
	migs := jsapi.Field(opts, "migrations")
	if migs.IsUndefined() || migs.IsNull() {
		return nil
	}
	if !jsapi.IsType(migs, js.TypeObject) {
		return jsapi.TypeErr("outbox", "migrations must be an object {fromVersion: payload => payload}")
	}
	keys := jsapi.JSObject.Call("keys", migs)
	for i := 0; i < keys.Length() && i < jsapi.MaxSchemaVersion; i++ {
		k := keys.Index(i).String()
		from, err := jsapi.MigrationFrom(k, schema)
		if err != nil {
			return err
		}
		fn := jsapi.Field(migs, k)
		if !jsapi.IsType(fn, js.TypeFunction) {
			return jsapi.TypeErr("outbox", "migrations."+k+" must be a function")
		}
		cfg.Outbox.Migrations = append(cfg.Outbox.Migrations, queue.Migration{From: from, To: from + 1, Migrate: migrationFunc(fn)})
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
// the record stays as stored (queue.SchemaRefused).
func migrationFunc(fn js.Value) func([]byte) ([]byte, error) {
	return func(p []byte) ([]byte, error) {
		out, err := jsglue.Invoke(fn, jsapi.PayloadValue(p))
		if err != nil {
			return nil, err
		}
		if out.Type() == js.TypeObject && out.Get("then").Type() == js.TypeFunction {
			return nil, errMigrationPromise
		}
		b, ok := jsapi.PayloadBytes(out)
		if !ok {
			return nil, errMigrationResult
		}
		return b, nil
	}
}
