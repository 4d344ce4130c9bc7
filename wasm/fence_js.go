//go:build js && wasm

package main

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/internal/randid"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// The fence() area of the API: fencing tokens from IndexedDB (package
// idb), the receiver fence that applies an operation together with the
// app's writes in one transaction, and a local epoch guard for results
// that only touch memory or UI.
//
// Writes are declarative ([{store, op, key, value}]), not a callback: an
// IndexedDB transaction ends as soon as anything but an IndexedDB request
// is awaited (see FACTS: a promise, a timer, fetch), and a JavaScript
// callback crossing into Go and back is exactly that. With a list, Go
// issues every request inside the one transaction that also checks and
// advances the fence, so the writes and the fence commit together or not
// at all, whatever the page does meanwhile.

var (
	// pageGuard is the page's local epoch guard, one per resource (the
	// API promises one per page): the tokens of this page's leaderships,
	// of tokens it allocated and of fresh channel messages advance it.
	pageGuard = channel.NewGuard()

	// pageOwner identifies this page in tf_epochs when fence().allocate()
	// is called outside an election.
	pageOwner = "page-" + randid.New()

	errFenceReleased = errors.New("tabfence: fence released")
)

// fence is the Go state behind one object returned by fence(); its methods
// below are the object's (fences), and its guard's (guards).
type fence struct {
	resource string
	st       *storage
	mu       sync.Mutex
	guard    js.Value
}

// fences and guards are the page's fence and epoch guard objects (see
// objects); a guard is bound to the same *fence as its fence.
var fences, guards objects[*fence]

func init() {
	fences.Define(errFenceReleased,
		jsapi.Method[*fence]{Name: "allocate", Call: jsapi.Async, Fn: (*fence).allocate},
		jsapi.Method[*fence]{Name: "apply", Call: jsapi.Async, Fn: (*fence).apply},
		jsapi.Method[*fence]{Name: "cas", Call: jsapi.Async, Fn: (*fence).cas},
		jsapi.Method[*fence]{Name: "highest", Call: jsapi.Async, Fn: (*fence).highest},
		jsapi.Method[*fence]{Name: "guard", Call: jsapi.Sync, Fn: (*fence).guardObj},
	)
	guards.Define(errFenceReleased,
		jsapi.Method[*fence]{Name: "advance", Call: jsapi.Sync, Fn: (*fence).advance},
		jsapi.Method[*fence]{Name: "isCurrent", Call: jsapi.Sync, Fn: (*fence).isCurrent},
		jsapi.Method[*fence]{Name: "isStale", Call: jsapi.Sync, Fn: (*fence).isStale},
		jsapi.Method[*fence]{Name: "current", Call: jsapi.Getter, Fn: (*fence).current, Idle: float64(0)},
	)
}

// fenceFn is fence(resource, {database, stores, version}). It never waits:
// the database opens on first use.
func fenceFn(args []js.Value) (any, error) {
	const where = "fence"
	resource, err := jsapi.RequiredString(where, "resource", jsapi.ArgOf(jsapi.At(args, 0)))
	if err != nil {
		return nil, err
	}
	if len(resource) > idb.MaxResourceLen {
		return nil, jsapi.TypeErr(where, "resource is longer than "+strconv.Itoa(idb.MaxResourceLen)+" bytes")
	}
	opts := jsapi.At(args, 1)
	if a := jsapi.ArgOf(opts); !a.Absent() && a.Kind != jsapi.KindObject {
		return nil, jsapi.TypeErr(where, "options must be an object when given")
	}
	o, err := readStorage(where, opts, false)
	if err != nil {
		return nil, err
	}
	st, err := storageFor(where, o.Database, o.Version, o.Stores)
	if err != nil {
		return nil, err
	}
	return newFence(resource, st), nil
}

func newFence(resource string, st *storage) js.Value {
	id := fences.Add(&fence{resource: resource, st: st})
	obj := jsapi.NewObject()
	jsapi.DefineConst(obj, "resource", resource)
	jsapi.DefineConst(obj, "database", st.name)
	fences.Install(obj, id)
	return obj
}

func (f *fence) allocate([]js.Value) (any, error) {
	t, err := f.st.AllocateToken(context.Background(), f.resource, pageOwner)
	if err != nil {
		return nil, err
	}
	pageGuard.Advance(f.resource, t)
	return float64(t), nil
}

func (f *fence) apply(args []js.Value) (any, error) {
	o, err := readOp("fence.apply", jsapi.At(args, 0), 0)
	if err != nil {
		return nil, err
	}
	ws, err := readWrites("fence.apply", jsapi.At(args, 1))
	if err != nil {
		return nil, err
	}
	res, err := apply(f.st, f.resource, o, ws)
	if err != nil {
		return nil, err
	}
	if res == idb.Stale {
		learnNewest(f.st, f.resource)
		stepDownStale(f.resource, o.Token, staleApply(f.resource, o))
	} else if res == idb.Accepted {
		pageGuard.Advance(f.resource, o.Token)
	}
	return res.String(), nil
}

func (f *fence) cas(args []js.Value) (any, error) {
	const where = "fence.cas"
	store, err := jsapi.RequiredString(where, "store", jsapi.ArgOf(jsapi.At(args, 0)))
	if err != nil {
		return nil, err
	}
	key, err := jsapi.RequiredString(where, "key", jsapi.ArgOf(jsapi.At(args, 1)))
	if err != nil {
		return nil, err
	}
	token, err := jsapi.IntArg(where, "token", jsapi.ArgOf(jsapi.At(args, 2)), 1, false)
	if err != nil {
		return nil, err
	}
	value := jsapi.At(args, 3)
	if value.IsUndefined() {
		return nil, jsapi.TypeErr(where, "value is required")
	}
	db, err := f.st.open(context.Background())
	if err != nil {
		return nil, f.st.wrap(err)
	}
	ok, err := db.CompareAndSwap(context.Background(), f.resource, store, key, token, value)
	if err != nil {
		return nil, f.st.wrap(err)
	}
	if !ok {
		learnNewest(f.st, f.resource)
		stepDownStale(f.resource, token, &StaleError{"tabfence: cas of " + store + "/" + key + " with token " +
			strconv.FormatUint(token, 10) + " rejected: a newer token wrote it"})
	}
	return ok, nil
}

func (f *fence) highest([]js.Value) (any, error) {
	db, err := f.st.open(context.Background())
	if err != nil {
		return nil, f.st.wrap(err)
	}
	rec, err := db.Fence(context.Background(), f.resource)
	if err != nil {
		return nil, f.st.wrap(err)
	}
	return float64(rec.Highest), nil
}

// guardObj returns the fence's guard object, the same one every call.
func (f *fence) guardObj([]js.Value) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.guard.IsUndefined() {
		g := jsapi.NewObject()
		jsapi.DefineConst(g, "resource", f.resource)
		guards.Install(g, guards.Add(f))
		f.guard = g
	}
	return f.guard, nil
}

func (f *fence) advance(args []js.Value) (any, error) {
	t, err := jsapi.IntArg("guard.advance", "token", jsapi.ArgOf(jsapi.At(args, 0)), 0, false)
	if err != nil {
		return nil, err
	}
	pageGuard.Advance(f.resource, t)
	return float64(pageGuard.Current(f.resource)), nil
}

func (f *fence) isCurrent(args []js.Value) (any, error) {
	t, err := jsapi.IntArg("guard.isCurrent", "token", jsapi.ArgOf(jsapi.At(args, 0)), 0, false)
	return err == nil && pageGuard.IsCurrent(f.resource, t), err
}

func (f *fence) isStale(args []js.Value) (any, error) {
	t, err := jsapi.IntArg("guard.isStale", "token", jsapi.ArgOf(jsapi.At(args, 0)), 0, false)
	return err == nil && pageGuard.IsStale(f.resource, t), err
}

func (f *fence) current([]js.Value) (any, error) {
	return float64(pageGuard.Current(f.resource)), nil
}

// deleteDatabase(name?) deletes the runtime's database (sign-out): every
// tab's connection closes itself, and their fenced elections end with
// "deleted". Resolves once deleted.
func deleteDatabase(args []js.Value) (any, error) {
	name, err := jsapi.OptionalString("deleteDatabase", "name", jsapi.ArgOf(jsapi.At(args, 0)))
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = jsapi.DefaultDatabase
	}
	return nil, idb.Delete(context.Background(), name, nil)
}

// write is one validated declarative write.
type write struct {
	store      string
	kind       jsapi.WriteKind
	key, value js.Value
}

func readOp(where string, v js.Value, defaultToken uint64) (jsapi.OpOptions, error) {
	if defaultToken == 0 && where == "ctx.apply" {
		return jsapi.OpOptions{}, jsapi.TypeErr(where, "this leadership is not fenced (token 0): elect with fenced: true")
	}
	return jsapi.ValidateOp(where, jsapi.OpArgs{
		Op:          jsapi.ArgOf(v),
		Token:       jsapi.ArgOf(jsapi.Field(v, "token")),
		OperationID: jsapi.ArgOf(jsapi.Field(v, "operationID")),
		Seqnce:      jsapi.ArgOf(jsapi.Field(v, "sequence")),
	}, defaultToken)
}

// readWrites reads every write before the transaction starts: a getter
// that waits or throws must not run inside it.
func readWrites(where string, v js.Value) ([]write, error) {
	if v.IsUndefined() || v.IsNull() {
		return nil, nil
	}
	if !jsglue.IsArray(v) {
		return nil, jsapi.TypeErr(where, "writes must be an array of {store, op, key, value}")
	}
	n := jsglue.Len(v)
	if n > jsapi.MaxWrites {
		return nil, jsapi.TypeErr(where, "at most "+strconv.Itoa(jsapi.MaxWrites)+" writes per apply")
	}
	out := make([]write, 0, n)
	for i := 0; i < n; i++ {
		it := jsglue.Index(v, i)
		key, value := jsapi.Field(it, "key"), jsapi.Field(it, "value")
		store, k, err := jsapi.ValidateWrite(where, i, jsapi.ArgOf(it), jsapi.ArgOf(jsapi.Field(it, "store")), jsapi.ArgOf(jsapi.Field(it, "op")), jsapi.ArgOf(key), jsapi.ArgOf(value))
		if err != nil {
			return nil, err
		}
		out = append(out, write{store: store, kind: k, key: key, value: value})
	}
	return out, nil
}

// readStorage reads the storage options of elect() or fence().
func readStorage(where string, opts js.Value, forElect bool) (jsapi.StorageOptions, error) {
	a := jsapi.StorageArgs{
		Database: jsapi.ArgOf(jsapi.Field(opts, "database")),
		Version:  jsapi.ArgOf(jsapi.Field(opts, "version")),
	}
	if forElect {
		a.Fenced = jsapi.ArgOf(jsapi.Field(opts, "fenced"))
		a.Resource = jsapi.ArgOf(jsapi.Field(opts, "resource"))
	}
	stores := jsapi.Field(opts, "stores")
	a.Stores = jsapi.ArgOf(stores)
	if !a.Stores.Absent() && jsglue.IsArray(stores) {
		a.StoresArray = true
		n := jsglue.Len(stores)
		if n > jsapi.MaxStores {
			return jsapi.StorageOptions{}, jsapi.TypeErr(where, "at most "+strconv.Itoa(jsapi.MaxStores)+" stores")
		}
		for i := 0; i < n; i++ {
			a.StoreItems = append(a.StoreItems, jsapi.ArgOf(jsglue.Index(stores, i)))
		}
	}
	return jsapi.ValidateStorage(where, a, forElect)
}

// apply runs one fenced apply: the fence check, the writes and the fence
// update in one readwrite transaction over tf_fences and the written stores.
func apply(st *storage, resource string, o jsapi.OpOptions, ws []write) (idb.Result, error) {
	db, err := st.open(context.Background())
	if err != nil {
		return 0, st.wrap(err)
	}
	stores := []string{} // fence only: no app store in the transaction
	for _, w := range ws {
		if !slices.Contains(stores, w.store) {
			stores = append(stores, w.store)
		}
	}
	var fn func(tx *idb.WriteTx) error
	if len(ws) > 0 {
		fn = func(tx *idb.WriteTx) error { return issueWrites(tx, ws) }
	}
	res, err := db.Apply(context.Background(), idb.Op{Resource: resource, Token: o.Token, OperationID: o.OperationID, Sequence: o.Sequence}, fn, stores...)
	return res, st.wrap(err)
}

func issueWrites(tx *idb.WriteTx, ws []write) error {
	for _, w := range ws {
		var err error
		switch w.kind {
		case jsapi.WritePut:
			err = tx.Put(w.store, w.key, w.value)
		case jsapi.WriteAdd:
			err = tx.Add(w.store, w.key, w.value)
		case jsapi.WriteDelete:
			err = tx.Delete(w.store, w.key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
