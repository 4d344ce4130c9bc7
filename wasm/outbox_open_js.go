//go:build js && wasm && !tabfence_core

package main

import (
	"context"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/browser"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// tf.outbox(options): reading the options into an browser.RuntimeConfig
// (the rules are in outboxargs.go) and opening the runtime.

// openOutbox implements tf.outbox(options).
func openOutbox(args []js.Value) (any, error) {
	opts := jsapi.At(args, 0)
	cfg, err := readOutboxOptions(opts)
	if err != nil {
		return nil, err
	}
	rt, err := browser.OpenRuntime(context.Background(), cfg)
	if err != nil {
		return nil, obErr(err)
	}
	o := &outboxHandle{rt: rt}
	o.id = outboxes.Add(o)
	useLoaderAppends(o)
	obj := queueObject(cfg, rt)
	jsapi.DefineConst(obj, "id", rt.ID())
	outboxes.Install(obj, o.id)
	return obj, nil
}

// queueObject is the object of an opened queue (tf.outbox's and
// tf.backgroundSync's) with the constants both show: name, lockName,
// protocol, schemaVersion.
func queueObject(cfg browser.RuntimeConfig, rt *browser.Runtime) js.Value {
	obj := jsapi.NewObject()
	jsapi.DefineConst(obj, "name", cfg.Name)
	jsapi.DefineConst(obj, "lockName", rt.LockName())
	jsapi.DefineConst(obj, "protocol", rt.Protocol())
	jsapi.DefineConst(obj, "schemaVersion", cfg.Outbox.SchemaVersion)
	return obj
}

// flushCounts is the JS object of a flush's counts (Outbox.flush's and
// SyncOutbox.drain's reports add their own fields).
func flushCounts(rep outbox.FlushReport) js.Value {
	r := jsapi.NewObject()
	r.Set("claimed", rep.Claimed)
	r.Set("acked", rep.Acked)
	r.Set("retried", rep.Retried)
	r.Set("deadLettered", rep.DeadLettered)
	r.Set("terminal", rep.Terminal)
	r.Set("conflicts", rep.Conflicts)
	r.Set("requests", rep.Requests)
	return r
}

// readOutboxOptions reads and validates tf.outbox's options.
func readOutboxOptions(opts js.Value) (browser.RuntimeConfig, error) {
	var cfg browser.RuntimeConfig
	if !jsapi.IsType(opts, js.TypeObject) {
		return cfg, jsapi.TypeErr("outbox", "options must be an object")
	}
	var err error
	for _, o := range []struct {
		name     string
		to       *string
		required bool
	}{{"name", &cfg.Name, true}, {"endpoint", &cfg.Outbox.Endpoint, true}, {"user", &cfg.Session.UserID, false}, {"fencePath", &cfg.FencePath, false}} {
		if *o.to, err = jsapi.OutboxString(o.name, jsapi.ArgOf(jsapi.Field(opts, o.name)), o.required); err != nil {
			return cfg, err
		}
	}
	if cfg.Outbox.Policies, err = readPolicies(jsapi.Field(opts, "policies")); err != nil {
		return cfg, err
	}
	if err := readLimits(opts, &cfg); err != nil {
		return cfg, err
	}
	if err := readBatch(jsapi.Field(opts, "batch"), &cfg.Outbox); err != nil {
		return cfg, err
	}
	if err := outboxVersions(opts, &cfg); err != nil {
		return cfg, err
	}
	cfg.NoWebLocks = jsapi.Field(opts, "noWebLocks").Truthy()
	bs, err := jsapi.BoolOption("outbox", "backgroundSync", jsapi.ArgOf(jsapi.Field(opts, "backgroundSync")), true)
	if err != nil {
		return cfg, err
	}
	cfg.NoBackgroundSync = !bs
	if h := jsapi.Field(opts, "headers"); jsapi.IsType(h, js.TypeObject) || jsapi.IsType(h, js.TypeFunction) {
		cfg.Authorize = authorize(h)
	}
	return cfg, nil
}

// readBatch reads batch: {endpoint, max?, maxBytes?}, the receiver's batch
// route (jsapi.BatchArgs has the rules); without it records go one by one.
func readBatch(b js.Value, cfg *outbox.Config) error {
	f := func(k string) jsapi.Arg { return jsapi.ArgOf(jsapi.Field(b, k)) }
	v, err := jsapi.BatchArgs(jsapi.ArgOf(b), f("endpoint"), f("max"), f("maxBytes"))
	if err != nil {
		return err
	}
	cfg.BatchEndpoint, cfg.BatchMax, cfg.BatchMaxBytes = v.Endpoint, v.Max, v.MaxBytes
	return nil
}

// readPolicies reads policies: {operationType: {dedupe, merge?, maxAttempts?, endpoint?}}.
func readPolicies(pols js.Value) (map[string]queue.Policy, error) {
	if !jsapi.IsType(pols, js.TypeObject) {
		return nil, jsapi.TypeErr("outbox", "policies must be an object {operationType: {dedupe}}")
	}
	out := map[string]queue.Policy{}
	keys := jsapi.JSObject.Call("keys", pols)
	for i := 0; i < keys.Length(); i++ {
		k := keys.Index(i).String()
		p := jsapi.Field(pols, k)
		d, err := jsapi.DedupeArg(k, jsapi.ArgOf(jsapi.Field(p, "dedupe")))
		if err != nil {
			return nil, err
		}
		pol := queue.Policy{Dedupe: d}
		if d == queue.Merge {
			pol.Merge = mergeFunc(jsapi.Field(p, "merge"))
		}
		if ma := jsapi.Field(p, "maxAttempts"); ma.Type() == js.TypeNumber {
			pol.MaxAttempts = ma.Int()
		}
		if ep := jsapi.Field(p, "endpoint"); ep.Type() == js.TypeString {
			pol.Endpoint = ep.String()
		}
		out[k] = pol
	}
	if len(out) == 0 {
		return nil, jsapi.TypeErr("outbox", "policies must configure at least one operation type")
	}
	return out, nil
}

// readLimits reads the counts, backoff and durations of the options.
func readLimits(opts js.Value, cfg *browser.RuntimeConfig) error {
	for _, o := range []struct {
		name string
		to   *int
	}{{"maxAttempts", &cfg.Outbox.MaxAttempts}, {"concurrency", &cfg.Outbox.Concurrency}, {"batchSize", &cfg.Outbox.BatchSize}, {"chargeAhead", &cfg.Outbox.ChargeAhead}} {
		if v := jsapi.Field(opts, o.name); v.Type() == js.TypeNumber && v.Int() > 0 {
			*o.to = v.Int()
		}
	}
	if b := jsapi.Field(opts, "backoff"); b.Type() == js.TypeObject {
		base, err := jsapi.MsArg("base", jsapi.ArgOf(jsapi.Field(b, "base")))
		if err != nil {
			return err
		}
		cp, err := jsapi.MsArg("cap", jsapi.ArgOf(jsapi.Field(b, "cap")))
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
		if *o.to, err = jsapi.MsArg(o.name, jsapi.ArgOf(jsapi.Field(opts, o.name))); err != nil {
			return err
		}
	}
	return nil
}

// authorize adds the headers option to every send: an object, or a
// function of the record's user returning one or a Promise of one (awaited
// within the send's timeout: a worker may read a token from IndexedDB).
func authorize(headers js.Value) func(context.Context, outbox.Request, outbox.Header) error {
	return func(ctx context.Context, req outbox.Request, h outbox.Header) error {
		hv := headers
		if hv.Type() == js.TypeFunction {
			v, err := jsglue.Invoke(hv, req.UserID)
			if err == nil {
				v, err = jsglue.Await(ctx, v)
			}
			if err != nil {
				return hookError(ctx, err)
			}
			hv = v
		}
		if !jsapi.IsType(hv, js.TypeObject) {
			return nil
		}
		ks := jsapi.JSObject.Call("keys", hv)
		for i := 0; i < ks.Length(); i++ {
			k := ks.Index(i).String()
			if v := jsapi.Field(hv, k); v.Type() == js.TypeString {
				h[k] = v.String()
			}
		}
		return nil
	}
}

// hookError is a headers hook's failure as the outbox keeps it (the last
// error of a record or of the status, in IndexedDB): the JS error's name
// only, never its message, which may carry a token. The send's own
// deadline passes through as it is.
func hookError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return jsglue.NewJSError(jsglue.NameOf(err), "the headers hook failed")
}

// mergeFunc is a Merge policy: fn(older, newer) on the parsed payloads when
// given, else a shallow merge of two JSON objects (Object.assign). It runs
// synchronous JavaScript only, so the IndexedDB transaction stays active.
func mergeFunc(fn js.Value) queue.MergeFunc {
	return func(older, newer []byte) ([]byte, error) {
		return jsglue.Try(func() []byte {
			a := jsJSON.Call("parse", string(older))
			b := jsJSON.Call("parse", string(newer))
			var m js.Value
			if fn.Type() == js.TypeFunction {
				m = fn.Invoke(a, b)
			} else {
				m = jsapi.JSObject.Call("assign", jsapi.JSObject.New(), a, b)
			}
			return []byte(jsJSON.Call("stringify", m).String())
		})
	}
}
