//go:build js && wasm

package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/internal/randid"
	"github.com/tabfence/tabfence/jsglue"
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
	fences.define(errFenceReleased,
		method[*fence]{name: "allocate", call: asyncCall, fn: (*fence).allocate},
		method[*fence]{name: "apply", call: asyncCall, fn: (*fence).apply},
		method[*fence]{name: "cas", call: asyncCall, fn: (*fence).cas},
		method[*fence]{name: "highest", call: asyncCall, fn: (*fence).highest},
		method[*fence]{name: "guard", call: syncCall, fn: (*fence).guardObj},
	)
	guards.define(errFenceReleased,
		method[*fence]{name: "advance", call: syncCall, fn: (*fence).advance},
		method[*fence]{name: "isCurrent", call: syncCall, fn: (*fence).isCurrent},
		method[*fence]{name: "isStale", call: syncCall, fn: (*fence).isStale},
		method[*fence]{name: "current", call: getterCall, fn: (*fence).current, idle: float64(0)},
	)
}

// fenceFn is fence(resource, {database, stores, version}). It never waits:
// the database opens on first use.
func fenceFn(args []js.Value) (any, error) {
	const where = "fence"
	resource, err := requiredString(where, "resource", argOf(at(args, 0)))
	if err != nil {
		return nil, err
	}
	if len(resource) > idb.MaxResourceLen {
		return nil, typeErr(where, "resource is longer than "+itoa(idb.MaxResourceLen)+" bytes")
	}
	opts := at(args, 1)
	if a := argOf(opts); !a.absent() && a.Kind != kindObject {
		return nil, typeErr(where, "options must be an object when given")
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
	id := fences.add(&fence{resource: resource, st: st})
	obj := newObject()
	defineConst(obj, "resource", resource)
	defineConst(obj, "database", st.name)
	fences.install(obj, id)
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
	o, err := readOp("fence.apply", at(args, 0), 0)
	if err != nil {
		return nil, err
	}
	ws, err := readWrites("fence.apply", at(args, 1))
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
	store, err := requiredString(where, "store", argOf(at(args, 0)))
	if err != nil {
		return nil, err
	}
	key, err := requiredString(where, "key", argOf(at(args, 1)))
	if err != nil {
		return nil, err
	}
	token, err := intArg(where, "token", argOf(at(args, 2)), 1, false)
	if err != nil {
		return nil, err
	}
	value := at(args, 3)
	if value.IsUndefined() {
		return nil, typeErr(where, "value is required")
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
		g := newObject()
		defineConst(g, "resource", f.resource)
		guards.install(g, guards.add(f))
		f.guard = g
	}
	return f.guard, nil
}

func (f *fence) advance(args []js.Value) (any, error) {
	t, err := intArg("guard.advance", "token", argOf(at(args, 0)), 0, false)
	if err != nil {
		return nil, err
	}
	pageGuard.Advance(f.resource, t)
	return float64(pageGuard.Current(f.resource)), nil
}

func (f *fence) isCurrent(args []js.Value) (any, error) {
	t, err := intArg("guard.isCurrent", "token", argOf(at(args, 0)), 0, false)
	return err == nil && pageGuard.IsCurrent(f.resource, t), err
}

func (f *fence) isStale(args []js.Value) (any, error) {
	t, err := intArg("guard.isStale", "token", argOf(at(args, 0)), 0, false)
	return err == nil && pageGuard.IsStale(f.resource, t), err
}

func (f *fence) current([]js.Value) (any, error) {
	return float64(pageGuard.Current(f.resource)), nil
}

// deleteDatabase(name?) deletes the runtime's database (sign-out): every
// tab's connection closes itself, and their fenced elections end with
// "deleted". Resolves once deleted.
func deleteDatabase(args []js.Value) (any, error) {
	name, err := optionalString("deleteDatabase", "name", argOf(at(args, 0)))
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = defaultDatabase
	}
	return nil, idb.Delete(context.Background(), name, nil)
}

// write is one validated declarative write.
type write struct {
	store      string
	kind       writeKind
	key, value js.Value
}

func readOp(where string, v js.Value, defaultToken uint64) (opOptions, error) {
	if defaultToken == 0 && where == "ctx.apply" {
		return opOptions{}, typeErr(where, "this leadership is not fenced (token 0): elect with fenced: true")
	}
	return validateOp(where, opArgs{
		Op:          argOf(v),
		Token:       argOf(field(v, "token")),
		OperationID: argOf(field(v, "operationID")),
		Seqnce:      argOf(field(v, "sequence")),
	}, defaultToken)
}

// readWrites reads every write before the transaction starts: a getter
// that waits or throws must not run inside it.
func readWrites(where string, v js.Value) ([]write, error) {
	if v.IsUndefined() || v.IsNull() {
		return nil, nil
	}
	if !jsglue.IsArray(v) {
		return nil, typeErr(where, "writes must be an array of {store, op, key, value}")
	}
	n := jsglue.Len(v)
	if n > maxWrites {
		return nil, typeErr(where, "at most "+itoa(maxWrites)+" writes per apply")
	}
	out := make([]write, 0, n)
	for i := 0; i < n; i++ {
		it := jsglue.Index(v, i)
		key, value := field(it, "key"), field(it, "value")
		store, k, err := validateWrite(where, i, argOf(it), argOf(field(it, "store")), argOf(field(it, "op")), argOf(key), argOf(value))
		if err != nil {
			return nil, err
		}
		out = append(out, write{store: store, kind: k, key: key, value: value})
	}
	return out, nil
}

// readStorage reads the storage options of elect() or fence().
func readStorage(where string, opts js.Value, forElect bool) (storageOptions, error) {
	a := storageArgs{
		Database: argOf(field(opts, "database")),
		Version:  argOf(field(opts, "version")),
	}
	if forElect {
		a.Fenced = argOf(field(opts, "fenced"))
		a.Resource = argOf(field(opts, "resource"))
	}
	stores := field(opts, "stores")
	a.Stores = argOf(stores)
	if !a.Stores.absent() && jsglue.IsArray(stores) {
		a.StoresArray = true
		n := jsglue.Len(stores)
		if n > maxStores {
			return storageOptions{}, typeErr(where, "at most "+itoa(maxStores)+" stores")
		}
		for i := 0; i < n; i++ {
			a.StoreItems = append(a.StoreItems, argOf(jsglue.Index(stores, i)))
		}
	}
	return validateStorage(where, a, forElect)
}

// apply runs one fenced apply: the fence check, the writes and the fence
// update in one readwrite transaction over tf_fences and the written stores.
func apply(st *storage, resource string, o opOptions, ws []write) (idb.Result, error) {
	db, err := st.open(context.Background())
	if err != nil {
		return 0, st.wrap(err)
	}
	stores := []string{} // fence only: no app store in the transaction
	for _, w := range ws {
		if !contains(stores, w.store) {
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
		case writePut:
			err = tx.Put(w.store, w.key, w.value)
		case writeAdd:
			err = tx.Add(w.store, w.key, w.value)
		case writeDelete:
			err = tx.Delete(w.store, w.key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
