//go:build js && wasm && !tabfence_core

package main

import (
	"context"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
)

// tf.outbox(options): reading the options into an outbox.RuntimeConfig
// (the rules are in outboxargs.go) and opening the runtime.

// openOutbox implements tf.outbox(options).
func openOutbox(args []js.Value) (any, error) {
	opts := at(args, 0)
	cfg, err := readOutboxOptions(opts)
	if err != nil {
		return nil, err
	}
	rt, err := outbox.OpenRuntime(context.Background(), cfg)
	if err != nil {
		return nil, obErr(err)
	}
	o := &outboxHandle{rt: rt}
	o.id = outboxes.add(o)
	useLoaderAppends(o)
	obj := newObject()
	defineConst(obj, "name", cfg.Name)
	defineConst(obj, "id", rt.ID())
	defineConst(obj, "lockName", rt.LockName())
	defineConst(obj, "protocol", rt.Protocol())
	defineConst(obj, "schemaVersion", cfg.Outbox.SchemaVersion)
	outboxes.install(obj, o.id)
	return obj, nil
}

// readOutboxOptions reads and validates tf.outbox's options.
func readOutboxOptions(opts js.Value) (outbox.RuntimeConfig, error) {
	var cfg outbox.RuntimeConfig
	if !isType(opts, js.TypeObject) {
		return cfg, typeErr("outbox", "options must be an object")
	}
	var err error
	for _, o := range []struct {
		name     string
		to       *string
		required bool
	}{{"name", &cfg.Name, true}, {"endpoint", &cfg.Outbox.Endpoint, true}, {"user", &cfg.Session.UserID, false}, {"fencePath", &cfg.FencePath, false}} {
		if *o.to, err = outboxString(o.name, argOf(field(opts, o.name)), o.required); err != nil {
			return cfg, err
		}
	}
	if cfg.Outbox.Policies, err = readPolicies(field(opts, "policies")); err != nil {
		return cfg, err
	}
	if err := readLimits(opts, &cfg); err != nil {
		return cfg, err
	}
	if err := outboxVersions(opts, &cfg); err != nil {
		return cfg, err
	}
	cfg.NoWebLocks = field(opts, "noWebLocks").Truthy()
	if h := field(opts, "headers"); isType(h, js.TypeObject) || isType(h, js.TypeFunction) {
		cfg.Authorize = authorize(h)
	}
	return cfg, nil
}

// readPolicies reads policies: {operationType: {dedupe, merge?, maxAttempts?, endpoint?}}.
func readPolicies(pols js.Value) (map[string]outbox.Policy, error) {
	if !isType(pols, js.TypeObject) {
		return nil, typeErr("outbox", "policies must be an object {operationType: {dedupe}}")
	}
	out := map[string]outbox.Policy{}
	keys := jsObject.Call("keys", pols)
	for i := 0; i < keys.Length(); i++ {
		k := keys.Index(i).String()
		p := field(pols, k)
		d, err := dedupeArg(k, argOf(field(p, "dedupe")))
		if err != nil {
			return nil, err
		}
		pol := outbox.Policy{Dedupe: d}
		if d == outbox.Merge {
			pol.Merge = mergeFunc(field(p, "merge"))
		}
		if ma := field(p, "maxAttempts"); ma.Type() == js.TypeNumber {
			pol.MaxAttempts = ma.Int()
		}
		if ep := field(p, "endpoint"); ep.Type() == js.TypeString {
			pol.Endpoint = ep.String()
		}
		out[k] = pol
	}
	if len(out) == 0 {
		return nil, typeErr("outbox", "policies must configure at least one operation type")
	}
	return out, nil
}

// readLimits reads the counts, backoff and durations of the options.
func readLimits(opts js.Value, cfg *outbox.RuntimeConfig) error {
	for _, o := range []struct {
		name string
		to   *int
	}{{"maxAttempts", &cfg.Outbox.MaxAttempts}, {"concurrency", &cfg.Outbox.Concurrency}, {"batchSize", &cfg.Outbox.BatchSize}, {"chargeAhead", &cfg.Outbox.ChargeAhead}} {
		if v := field(opts, o.name); v.Type() == js.TypeNumber && v.Int() > 0 {
			*o.to = v.Int()
		}
	}
	if b := field(opts, "backoff"); b.Type() == js.TypeObject {
		base, err := msArg("base", argOf(field(b, "base")))
		if err != nil {
			return err
		}
		cp, err := msArg("cap", argOf(field(b, "cap")))
		if err != nil {
			return err
		}
		cfg.Outbox.Backoff = &outbox.Backoff{Base: base, Cap: cp}
	}
	for _, o := range []struct {
		name string
		to   *time.Duration
	}{{"statusTimeoutMs", &cfg.Watch.StatusTimeout}, {"stallAfterMs", &cfg.Watch.StallAfter}, {"sendTimeoutMs", &cfg.SendTimeout}, {"leaseTTLMs", &cfg.Outbox.LeaseTTL}} {
		var err error
		if *o.to, err = msArg(o.name, argOf(field(opts, o.name))); err != nil {
			return err
		}
	}
	return nil
}

// authorize adds the headers option to every send: an object, or a
// function of the record's user returning one.
func authorize(headers js.Value) func(context.Context, outbox.Request, outbox.Header) error {
	return func(_ context.Context, req outbox.Request, h outbox.Header) error {
		hv := headers
		if hv.Type() == js.TypeFunction {
			v, err := jsglue.Invoke(hv, req.UserID)
			if err != nil {
				return err
			}
			hv = v
		}
		if !isType(hv, js.TypeObject) {
			return nil
		}
		ks := jsObject.Call("keys", hv)
		for i := 0; i < ks.Length(); i++ {
			k := ks.Index(i).String()
			if v := field(hv, k); v.Type() == js.TypeString {
				h[k] = v.String()
			}
		}
		return nil
	}
}

// mergeFunc is a Merge policy: fn(older, newer) on the parsed payloads when
// given, else a shallow merge of two JSON objects (Object.assign). It runs
// synchronous JavaScript only, so the IndexedDB transaction stays active.
func mergeFunc(fn js.Value) outbox.MergeFunc {
	return func(older, newer []byte) ([]byte, error) {
		return jsglue.Try(func() []byte {
			a := jsJSON.Call("parse", string(older))
			b := jsJSON.Call("parse", string(newer))
			var m js.Value
			if fn.Type() == js.TypeFunction {
				m = fn.Invoke(a, b)
			} else {
				m = jsObject.Call("assign", jsObject.New(), a, b)
			}
			return []byte(jsJSON.Call("stringify", m).String())
		})
	}
}
