//go:build js && wasm && !tabfence_core

package main

import (
	"context"
	"errors"
	"strconv"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
)

// The outbox() area of the API: a durable, fenced outbox shared by the tabs
// of one browser (package outbox, Runtime). Payloads are opaque bytes: the
// JSON of an object payload is made by the JavaScript engine
// (JSON.stringify), never by a Go encoder.

var (
	outboxes handles[*outbox.Runtime]

	obEnqueue, obFlush, obStatus, obOnStatus, obOnEvent, obDeadLetters, obRetry, obDiscard,
	obPause, obResume, obLogin, obLogout, obClose *jsglue.Callback

	jsJSON       = js.Global().Get("JSON")
	jsUint8Array = js.Global().Get("Uint8Array")
)

// namedError gives an outbox error the JavaScript name pages branch on.
type namedError struct {
	err  error
	name string
}

func (e *namedError) Error() string  { return e.err.Error() }
func (e *namedError) Unwrap() error  { return e.err }
func (e *namedError) JSName() string { return e.name }

// obErr names the errors of the outbox API.
func obErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[interface {
		error
		JSName() string
	}](err); ok {
		return err
	}
	for _, m := range []struct {
		target error
		name   string
	}{
		{outbox.ErrNoSession, "NoSessionError"},
		{outbox.ErrUnknownOperation, "UnknownOperationError"},
		{outbox.ErrInvalidRecord, "TypeError"},
		{outbox.ErrInvalidTransition, "InvalidStateError"},
		{outbox.ErrNotFound, "NotFoundError"},
		{outbox.ErrPaused, "PausedError"},
		{outbox.ErrStaleOwner, "StaleOwnerError"},
		{outbox.ErrStepDown, "StaleOwnerError"},
		{outbox.ErrAuthRequired, "AuthRequiredError"},
		{outbox.ErrSessionChanged, "SessionChangedError"},
		{outbox.ErrSessionMismatch, "SessionMismatchError"},
		{outbox.ErrFenceUnavailable, "NetworkError"},
		{outbox.ErrOffline, "NetworkError"},
		{outbox.ErrRuntimeClosed, "InvalidStateError"},
		{outbox.ErrStoreClosed, "InvalidStateError"},
		{outbox.ErrSchemaUnsupported, "NotSupportedError"},
	} {
		if errors.Is(err, m.target) {
			return &namedError{err, m.name}
		}
	}
	// A transaction IndexedDB aborted without a cause of its own (the
	// cause's name, QuotaExceededError, is kept when it has one): nothing
	// was written.
	if errors.Is(err, outbox.ErrTxAborted) && jsglue.NameOf(err) == "Error" {
		return &namedError{err, "AbortError"}
	}
	return err
}

func registerOutbox(api js.Value) {
	get := func(args []js.Value) (*outbox.Runtime, error) {
		r, ok := outboxes.get(args)
		if !ok {
			return nil, &namedError{outbox.ErrRuntimeClosed, "InvalidStateError"}
		}
		return r, nil
	}
	ctx := context.Background()
	// A plain append (see outbox.PlainAppend) is built by Go through a wasm
	// export and written by the loader's hook in the caller's task
	// (outbox.UseLoader): no goroutine waits for its commit. obEnqueue takes
	// every other operation (a dedupe policy reads the queue first, a large
	// payload goes to the blob store, an invalid one gets its typed error),
	// and every operation on a page without the loader: a goroutine that
	// waits for the commit.
	obEnqueue = promiseFunc(func(args []js.Value) (any, error) {
		r, err := get(args)
		if err != nil {
			return nil, err
		}
		op, err := opArg(at(args, 1))
		if err != nil {
			return nil, err
		}
		return jsglue.Async(func() (any, error) {
			res, err := r.Enqueue(ctx, op)
			if err != nil {
				return nil, obErr(err)
			}
			return enqueueResult(res), nil
		}), nil
	})
	obFlush = asyncFunc(func(args []js.Value) (any, error) {
		r, err := get(args)
		if err != nil {
			return nil, err
		}
		rep, skipped, err := r.Flush(ctx)
		if err != nil && !errors.Is(err, outbox.ErrPaused) {
			return nil, obErr(err)
		}
		o := newObject()
		o.Set("skipped", skipped)
		o.Set("paused", errors.Is(err, outbox.ErrPaused))
		o.Set("claimed", rep.Claimed)
		o.Set("acked", rep.Acked)
		o.Set("retried", rep.Retried)
		o.Set("deadLettered", rep.DeadLettered)
		o.Set("terminal", rep.Terminal)
		o.Set("conflicts", rep.Conflicts)
		return o, nil
	})
	obStatus = asyncFunc(func(args []js.Value) (any, error) {
		r, err := get(args)
		if err != nil {
			return nil, err
		}
		st, err := r.Status(ctx)
		if err != nil {
			return nil, obErr(err)
		}
		return statusJS(st), nil
	})
	obOnStatus = syncFunc(func(args []js.Value) (any, error) {
		r, err := get(args)
		if err != nil {
			return nil, err
		}
		fn := at(args, 1)
		if fn.Type() != js.TypeFunction {
			return nil, typeErr("outbox.onStatus", "fn must be a function")
		}
		unsub := r.OnStatus(func(st outbox.RuntimeStatus) { callLater(fn, statusJS(st)) })
		return unsubscriber(unsub), nil
	})
	obOnEvent = syncFunc(func(args []js.Value) (any, error) {
		r, err := get(args)
		if err != nil {
			return nil, err
		}
		fn := at(args, 1)
		if fn.Type() != js.TypeFunction {
			return nil, typeErr("outbox.onEvent", "fn must be a function")
		}
		unsub := r.OnEvent(func(e outbox.Event) { callLater(fn, eventJS(e)) })
		return unsubscriber(unsub), nil
	})
	obDeadLetters = asyncFunc(func(args []js.Value) (any, error) {
		r, err := get(args)
		if err != nil {
			return nil, err
		}
		recs, err := r.DeadLetters(ctx)
		if err != nil {
			return nil, obErr(err)
		}
		arr := js.Global().Get("Array").New()
		for i := range recs {
			arr.Call("push", recordJS(&recs[i]))
		}
		return arr, nil
	})
	idFn := func(where string, fn func(r *outbox.Runtime, id string) error) *jsglue.Callback {
		return asyncFunc(func(args []js.Value) (any, error) {
			r, err := get(args)
			if err != nil {
				return nil, err
			}
			id := at(args, 1)
			if id.Type() != js.TypeString || id.String() == "" {
				return nil, typeErr("outbox."+where, "id must be a non-empty string")
			}
			return nil, obErr(fn(r, id.String()))
		})
	}
	obRetry = idFn("retry", func(r *outbox.Runtime, id string) error { return r.Retry(ctx, id) })
	obDiscard = idFn("discard", func(r *outbox.Runtime, id string) error { return r.Discard(ctx, id) })
	obPause = asyncFunc(func(args []js.Value) (any, error) {
		r, err := get(args)
		if err != nil {
			return nil, err
		}
		return nil, obErr(r.Pause(ctx))
	})
	obResume = asyncFunc(func(args []js.Value) (any, error) {
		r, err := get(args)
		if err != nil {
			return nil, err
		}
		return nil, obErr(r.Resume(ctx))
	})
	obLogin = idFn("login", func(r *outbox.Runtime, user string) error {
		return r.Login(ctx, outbox.Session{UserID: user})
	})
	obLogout = asyncFunc(func(args []js.Value) (any, error) {
		r, err := get(args)
		if err != nil {
			return nil, err
		}
		purge := field(at(args, 1), "purge").Truthy()
		n, err := r.Logout(ctx, purge)
		return n, obErr(err)
	})
	obClose = asyncFunc(func(args []js.Value) (any, error) {
		if len(args) == 0 || args[0].Type() != js.TypeNumber {
			return nil, nil
		}
		r, ok := outboxes.get(args)
		if !ok {
			return nil, nil
		}
		outboxes.remove(args[0].Float())
		return nil, r.Close()
	})
	registerOutboxSchema(get)
	api.Set("outbox", asyncFunc(openOutbox).Value)
}

func at(args []js.Value, i int) js.Value {
	if i < len(args) {
		return args[i]
	}
	return js.Undefined()
}

func unsubscriber(unsub func()) js.Value {
	var cb *jsglue.Callback
	cb = jsglue.NewCallback(func(js.Value, []js.Value) any {
		unsub()
		cb.Release()
		return nil
	})
	return cb.Value
}

func msOpt(opts js.Value, name string) (time.Duration, error) {
	v := field(opts, name)
	if v.IsUndefined() || v.IsNull() {
		return 0, nil
	}
	if v.Type() != js.TypeNumber || v.Float() < 0 {
		return 0, typeErr("outbox", name+" must be a non-negative number of milliseconds")
	}
	return time.Duration(v.Float() * float64(time.Millisecond)), nil
}

func strOpt(opts js.Value, name string, required bool) (string, error) {
	v := field(opts, name)
	if v.IsUndefined() || v.IsNull() {
		if required {
			return "", typeErr("outbox", name+" is required")
		}
		return "", nil
	}
	if v.Type() != js.TypeString || (required && v.String() == "") {
		return "", typeErr("outbox", name+" must be a non-empty string")
	}
	return v.String(), nil
}

// openOutbox implements tf.outbox(options).
func openOutbox(args []js.Value) (any, error) {
	opts := at(args, 0)
	if t, _ := typeOf(opts); t != js.TypeObject {
		return nil, typeErr("outbox", "options must be an object")
	}
	name, err := strOpt(opts, "name", true)
	if err != nil {
		return nil, err
	}
	endpoint, err := strOpt(opts, "endpoint", true)
	if err != nil {
		return nil, err
	}
	user, err := strOpt(opts, "user", false)
	if err != nil {
		return nil, err
	}
	fencePath, err := strOpt(opts, "fencePath", false)
	if err != nil {
		return nil, err
	}
	cfg := outbox.RuntimeConfig{Name: name, FencePath: fencePath, Session: outbox.Session{UserID: user}}
	cfg.Outbox.Endpoint = endpoint
	cfg.Outbox.Policies = map[string]outbox.Policy{}
	pols := field(opts, "policies")
	if t, _ := typeOf(pols); t != js.TypeObject {
		return nil, typeErr("outbox", "policies must be an object {operationType: {dedupe}}")
	}
	keys := jsObject.Call("keys", pols)
	for i := 0; i < keys.Length(); i++ {
		k := keys.Index(i).String()
		p := field(pols, k)
		d := field(p, "dedupe")
		if d.Type() != js.TypeString {
			return nil, typeErr("outbox", "policies."+k+".dedupe must be append, replace-latest, merge or drop-if-exists")
		}
		pol := outbox.Policy{Dedupe: outbox.Dedupe(d.String())}
		switch pol.Dedupe {
		case outbox.Append, outbox.ReplaceLatest, outbox.DropIfExists:
		case outbox.Merge:
			pol.Merge = mergeFunc(field(p, "merge"))
		default:
			return nil, typeErr("outbox", "policies."+k+".dedupe must be append, replace-latest, merge or drop-if-exists")
		}
		if ma := field(p, "maxAttempts"); ma.Type() == js.TypeNumber {
			pol.MaxAttempts = ma.Int()
		}
		if ep := field(p, "endpoint"); ep.Type() == js.TypeString {
			pol.Endpoint = ep.String()
		}
		cfg.Outbox.Policies[k] = pol
	}
	if len(cfg.Outbox.Policies) == 0 {
		return nil, typeErr("outbox", "policies must configure at least one operation type")
	}
	for _, o := range []struct {
		name string
		to   *int
	}{{"maxAttempts", &cfg.Outbox.MaxAttempts}, {"concurrency", &cfg.Outbox.Concurrency}, {"batchSize", &cfg.Outbox.BatchSize}, {"chargeAhead", &cfg.Outbox.ChargeAhead}} {
		if v := field(opts, o.name); v.Type() == js.TypeNumber && v.Int() > 0 {
			*o.to = v.Int()
		}
	}
	if b := field(opts, "backoff"); b.Type() == js.TypeObject {
		base, err := msOpt(b, "base")
		if err != nil {
			return nil, err
		}
		cp, err := msOpt(b, "cap")
		if err != nil {
			return nil, err
		}
		cfg.Outbox.Backoff = &outbox.Backoff{Base: base, Cap: cp}
	}
	for _, o := range []struct {
		name string
		to   *time.Duration
	}{{"statusTimeoutMs", &cfg.Watch.StatusTimeout}, {"stallAfterMs", &cfg.Watch.StallAfter}, {"sendTimeoutMs", &cfg.SendTimeout}, {"leaseTTLMs", &cfg.Outbox.LeaseTTL}} {
		if *o.to, err = msOpt(opts, o.name); err != nil {
			return nil, err
		}
	}
	if err := outboxVersions(opts, &cfg); err != nil {
		return nil, err
	}
	cfg.NoWebLocks = field(opts, "noWebLocks").Truthy()
	headers := field(opts, "headers")
	if t, _ := typeOf(headers); t == js.TypeObject || t == js.TypeFunction {
		cfg.Authorize = func(_ context.Context, req outbox.Request, h outbox.Header) error {
			hv := headers
			if hv.Type() == js.TypeFunction {
				v, err := jsglue.Invoke(hv, req.UserID)
				if err != nil {
					return err
				}
				hv = v
			}
			if t, _ := typeOf(hv); t != js.TypeObject {
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
	rt, err := outbox.OpenRuntime(context.Background(), cfg)
	if err != nil {
		return nil, obErr(err)
	}
	id := outboxes.add(rt)
	loaderOpFields = outbox.LoaderOpFields()
	rt.UseLoader(int(id), func(err error) js.Value { return jsglue.ToJS(obErr(err)) })
	obj := newObject()
	defineConst(obj, "name", name)
	defineConst(obj, "id", rt.ID())
	defineConst(obj, "lockName", rt.LockName())
	defineConst(obj, "protocol", rt.Protocol())
	defineConst(obj, "schemaVersion", cfg.Outbox.SchemaVersion)
	for _, m := range []struct {
		name string
		cb   *jsglue.Callback
	}{
		{"enqueue", obEnqueue}, {"flush", obFlush}, {"status", obStatus}, {"onStatus", obOnStatus},
		{"onEvent", obOnEvent}, {"deadLetters", obDeadLetters}, {"retry", obRetry}, {"discard", obDiscard},
		{"pause", obPause}, {"resume", obResume}, {"login", obLogin}, {"logout", obLogout}, {"close", obClose},
		{"unsupported", obUnsupported},
	} {
		if m.name == "enqueue" {
			defineConst(obj, m.name, enqueueMethod(id))
			continue
		}
		defineConst(obj, m.name, bound(m.cb, id))
	}
	return obj, nil
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

// enqueueMethod returns the enqueue method of outbox handle id: the
// loader's enqueuer around the js.Func (plain appends are written in the
// caller's task, see outbox.UseLoader), or the js.Func.
func enqueueMethod(id float64) js.Value {
	slow := bound(obEnqueue, id)
	m := outbox.EnqueueMethod(int(id), slow)
	if !m.Equal(slow) {
		jsReflect.Call("set", m, symAsync, true)
	}
	return m
}

// enqueueResult is enqueue's result object.
func enqueueResult(res outbox.EnqueueResult) js.Value {
	o := newObject()
	o.Set("id", res.ID)
	o.Set("action", recurring.get(string(res.Action)))
	return o
}

// loaderOpFields is the loader's opFields hook, or undefined without the
// loader: looked up when an outbox is made, not per enqueue.
var loaderOpFields js.Value

// opArg reads enqueue's operation: through the loader's opFields when
// the page has it (one call instead of one per field; it takes plainly
// shaped operations only), else field by field.
func opArg(v js.Value) (outbox.Op, error) {
	if op, ok := opArgFast(v); ok {
		if op.OperationType == "" {
			return op, typeErr("outbox.enqueue", "operationType must be a string")
		}
		return op, nil
	}
	return opArgSlow(v)
}

// maxDependencyIDs bounds an operation's dependencyIds (its TypeError
// names the number; the loader's opFields leaves longer lists here).
const maxDependencyIDs = outbox.MaxDependencyIDs

// isType reports whether v has type t (false for a BigInt, which
// syscall/js cannot type).
func isType(v js.Value, t js.Type) bool {
	vt, ok := typeOf(v)
	return ok && vt == t
}

// opBuf is opFields' buffer; an operation that does not fit is read
// field by field.
var opBufV js.Value

func opBuf() js.Value {
	if opBufV.IsUndefined() { // js/wasm runs one goroutine at a time, none between these lines
		opBufV = jsUint8Array.New(72 << 10) // a 64 KiB payload and the other fields
	}
	return opBufV
}

// opArgFast reads v with the loader's opFields, ok false when it did not
// take v.
func opArgFast(v js.Value) (op outbox.Op, ok bool) {
	if loaderOpFields.Type() != js.TypeFunction {
		return op, false
	}
	r, err := jsglue.Invoke(loaderOpFields, v, opBuf())
	if err != nil || r.Type() != js.TypeNumber {
		return op, false
	}
	return opFromBuf(r.Int())
}

// opFromBuf decodes the n bytes opFields wrote into opBuf.
func opFromBuf(n int) (op outbox.Op, ok bool) {
	buf := opBuf()
	if n < 4 || n > buf.Length() {
		return op, false
	}
	b := make([]byte, n)
	js.CopyBytesToGo(b, buf)
	return outbox.DecodeOpFields(b)
}

// payloadBytes is p as a payload: a string or bytes as is, anything else
// (but undefined) as JSON.stringify; ok false when it is none of these.
func payloadBytes(p js.Value) (b []byte, ok bool) {
	switch pt, _ := typeOf(p); {
	case pt == js.TypeString:
		return []byte(p.String()), true
	case jsglue.InstanceOf(p, jsUint8Array):
		b = make([]byte, p.Length())
		js.CopyBytesToGo(b, p)
		return b, true
	case pt == js.TypeUndefined:
		return nil, false
	}
	s, err := jsglue.Call(jsJSON, "stringify", p)
	if err != nil || s.Type() != js.TypeString {
		return nil, false
	}
	return []byte(s.String()), true
}

// opArgSlow reads enqueue's operation field by field.
func opArgSlow(v js.Value) (outbox.Op, error) {
	if t, _ := typeOf(v); t != js.TypeObject {
		return outbox.Op{}, typeErr("outbox.enqueue", "op must be an object")
	}
	var op outbox.Op
	str := func(name string, required bool) (string, error) {
		f := field(v, name)
		ft, _ := typeOf(f) // a BigInt is neither
		switch {
		case ft == js.TypeString && (f.String() != "" || !required):
			return f.String(), nil
		case (ft == js.TypeUndefined || ft == js.TypeNull) && !required:
			return "", nil
		}
		return "", typeErr("outbox.enqueue", name+" must be a string")
	}
	var err error
	if op.OperationType, err = str("operationType", true); err != nil {
		return op, err
	}
	if op.EntityType, err = str("entityType", false); err != nil {
		return op, err
	}
	if op.EntityID, err = str("entityId", false); err != nil {
		return op, err
	}
	if op.OperationKey, err = str("operationKey", false); err != nil {
		return op, err
	}
	p := field(v, "payload")
	if isType(p, js.TypeUndefined) {
		return op, typeErr("outbox.enqueue", "payload is required")
	}
	var ok bool
	if op.Payload, ok = payloadBytes(p); !ok {
		return op, typeErr("outbox.enqueue", "payload must be a string, a Uint8Array or JSON-serializable")
	}
	if deps := field(v, "dependencyIds"); isType(deps, js.TypeObject) {
		// Read by index through Reflect.get (a throwing getter or proxy
		// trap is an absent element, as for the fields above), bounded: a
		// forged length must not keep the tab in this loop.
		l := field(deps, "length")
		if !isType(l, js.TypeNumber) || !(l.Float() >= 0) || l.Float() > maxDependencyIDs {
			return op, typeErr("outbox.enqueue", "dependencyIds must be an array of at most 1000 ids")
		}
		for i := range int(l.Float()) {
			if d := field(deps, strconv.Itoa(i)); isType(d, js.TypeString) {
				op.DependencyIDs = append(op.DependencyIDs, d.String())
			}
		}
	}
	return op, nil
}

func ms(t time.Time) any {
	if t.IsZero() {
		return js.Null()
	}
	return float64(t.UnixNano()) / 1e6
}

func errorInfoJS(e *outbox.ErrorInfo) any {
	if e == nil {
		return js.Null()
	}
	o := newObject()
	o.Set("code", e.Code)
	o.Set("message", e.Message)
	o.Set("status", e.Status)
	o.Set("at", ms(e.At))
	return o
}

func statusJS(st outbox.RuntimeStatus) js.Value {
	o := newObject()
	o.Set("pending", st.Pending)
	o.Set("sending", st.Sending)
	o.Set("failed", st.Failed)
	o.Set("deadLetter", st.DeadLetter)
	o.Set("conflict", st.Conflict)
	o.Set("terminal", st.Terminal)
	o.Set("acked", st.Acked)
	o.Set("unsupported", st.Unsupported)
	o.Set("oldestPendingAgeMs", float64(st.OldestPendingAge)/1e6)
	o.Set("lastFlushAt", ms(st.LastFlushAt))
	o.Set("lastError", errorInfoJS(st.LastError))
	setFailureJS(o, st.Failure)
	o.Set("paused", st.Paused)
	o.Set("leader", st.Owner)
	o.Set("flushing", st.Flushing)
	o.Set("ownerId", st.OwnerID)
	o.Set("leaseToken", float64(st.LeaseToken))
	o.Set("fenceToken", float64(st.FenceToken))
	o.Set("id", st.ID)
	return o
}

func eventJS(e outbox.Event) js.Value {
	o := newObject()
	// Kinds, owners, reasons and error codes recur from event to event:
	// their JavaScript strings come from the cache (see recurring).
	o.Set("kind", recurring.get(string(e.Kind)))
	o.Set("at", ms(e.At))
	if e.RecordID != "" {
		o.Set("recordId", e.RecordID)
	}
	if e.OperationKeyHash != "" {
		o.Set("operationKeyHash", e.OperationKeyHash)
	}
	if e.Owner != "" {
		o.Set("ownerId", recurring.get(e.Owner))
	}
	if e.Reason != "" {
		o.Set("reason", recurring.get(e.Reason))
	}
	if e.ErrorCode != "" {
		o.Set("errorCode", recurring.get(e.ErrorCode))
	}
	if e.LeaseToken != 0 {
		o.Set("leaseToken", float64(e.LeaseToken))
	}
	if e.Attempt != 0 {
		o.Set("attempt", e.Attempt)
	}
	if e.Duration != 0 {
		o.Set("durationMs", float64(e.Duration)/1e6)
	}
	return o
}

func recordJS(r *outbox.Record) js.Value {
	o := newObject()
	o.Set("id", r.ID)
	o.Set("status", string(r.Status))
	o.Set("operationType", r.OperationType)
	o.Set("operationKey", r.OperationKey)
	o.Set("entityType", r.EntityType)
	o.Set("entityId", r.EntityID)
	o.Set("attempts", r.Attempts)
	o.Set("maxAttempts", r.MaxAttempts)
	o.Set("createdAt", ms(r.CreatedAt))
	o.Set("updatedAt", ms(r.UpdatedAt))
	o.Set("user", r.UserID)
	o.Set("schemaVersion", r.PayloadSchemaVersion)
	o.Set("lastError", errorInfoJS(r.LastError))
	return o
}
