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
	"github.com/tabfence/tabfence/locks"
)

// The fence() area of the API and fenced leadership: fencing tokens from
// IndexedDB (package idb), the receiver fence that applies an operation
// together with the app's writes in one transaction, and a local epoch
// guard for results that only touch memory or UI.
//
// Writes are declarative ([{store, op, key, value}]), not a callback: an
// IndexedDB transaction ends as soon as anything but an IndexedDB request
// is awaited (see FACTS: a promise, a timer, fetch), and a JavaScript
// callback crossing into Go and back is exactly that. With a list, Go
// issues every request inside the one transaction that also checks and
// advances the fence, so the writes and the fence commit together or not
// at all, whatever the page does meanwhile.

var (
	jsConsole = js.Global().Get("console")
	jsArray   = js.Global().Get("Array")

	// pageGuard is the page's local epoch guard, one per resource: the
	// tokens of this page's leaderships, of tokens it allocated and of
	// fresh channel messages advance it.
	pageGuard = channel.NewGuard()

	// pageOwner identifies this page in tf_epochs when fence().allocate()
	// is called outside an election.
	pageOwner = "page-" + randid.New()

	fencedMu        sync.Mutex
	fencedElections electionSet

	fences     handles[*fence]
	leaderRefs handles[*leaderRef]

	fenceAllocate, fenceApply, fenceCAS, fenceGuard, fenceHighest *jsglue.Callback
	guardAdvance, guardIsCurrent, guardIsStale, guardCurrent      *jsglue.Callback
	ctxApply, ctxPost                                             *jsglue.Callback
	electFenceCB, electChannelCB                                  *jsglue.Callback
)

// electFence is the fenced part of an election (nil when unfenced).
type electFence struct {
	st   *storage
	opts storageOptions

	mu       sync.Mutex
	goneWhy  string // "deleted", "upgraded", "storage-closed": why the election was closed
	goneErr  error
	reported bool // onLost was delivered for goneWhy
	seqL     *locks.Leadership
	seqs     map[string]*channel.Sequencer // per channel name, for seqL
	ch       *chanState                    // the election's own channel, for ctx.post
	chOnce   sync.Once
	chErr    error
}

// fence is one object returned by fence().
type fence struct {
	resource string
	st       *storage
	mu       sync.Mutex
	guard    js.Value
}

// leaderRef is what a leader context's methods are bound to.
type leaderRef struct {
	el *election
	l  *locks.Leadership
}

// StaleError is why a fenced leader stepped down: the fence (or a newer
// token heard on the channel) says a newer leader exists.
type StaleError struct{ Msg string }

func (e *StaleError) Error() string  { return e.Msg }
func (e *StaleError) JSName() string { return "StaleOwnerError" }

// NotLeaderError: post() without a current fenced leadership.
type NotLeaderError struct{ Msg string }

func (e *NotLeaderError) Error() string  { return e.Msg }
func (e *NotLeaderError) JSName() string { return "NotLeaderError" }

func registerFence(api js.Value) {
	fenceAllocate = asyncFunc(func(args []js.Value) (any, error) {
		f, ok := fences.get(args)
		if !ok {
			return nil, errors.New("tabfence: fence released")
		}
		t, err := f.st.AllocateToken(context.Background(), f.resource, pageOwner)
		if err != nil {
			return nil, err
		}
		pageGuard.Advance(f.resource, t)
		return float64(t), nil
	})
	fenceApply = asyncFunc(func(args []js.Value) (any, error) {
		f, ok := fences.get(args)
		if !ok {
			return nil, errors.New("tabfence: fence released")
		}
		a := padArgs(args[1:], 2)
		o, err := readOp("fence.apply", a[0], 0)
		if err != nil {
			return nil, err
		}
		ws, err := readWrites("fence.apply", a[1])
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
	})
	fenceCAS = asyncFunc(func(args []js.Value) (any, error) {
		f, ok := fences.get(args)
		if !ok {
			return nil, errors.New("tabfence: fence released")
		}
		const where = "fence.cas"
		a := padArgs(args[1:], 4)
		store, err := requiredString(where, "store", argOf(a[0]))
		if err != nil {
			return nil, err
		}
		key, err := requiredString(where, "key", argOf(a[1]))
		if err != nil {
			return nil, err
		}
		token, err := intArg(where, "token", argOf(a[2]), 1, false)
		if err != nil {
			return nil, err
		}
		if a[3].IsUndefined() {
			return nil, typeErr(where, "value is required")
		}
		db, err := f.st.open(context.Background())
		if err != nil {
			return nil, f.st.wrap(err)
		}
		ok, err = db.CompareAndSwap(context.Background(), f.resource, store, key, token, a[3])
		if err != nil {
			return nil, f.st.wrap(err)
		}
		if !ok {
			learnNewest(f.st, f.resource)
			stepDownStale(f.resource, token, &StaleError{"tabfence: cas of " + store + "/" + key + " with token " +
				strconv.FormatUint(token, 10) + " rejected: a newer token wrote it"})
		}
		return ok, nil
	})
	fenceHighest = asyncFunc(func(args []js.Value) (any, error) {
		f, ok := fences.get(args)
		if !ok {
			return nil, errors.New("tabfence: fence released")
		}
		db, err := f.st.open(context.Background())
		if err != nil {
			return nil, f.st.wrap(err)
		}
		rec, err := db.Fence(context.Background(), f.resource)
		if err != nil {
			return nil, f.st.wrap(err)
		}
		return float64(rec.Highest), nil
	})
	fenceGuard = syncFunc(func(args []js.Value) (any, error) {
		f, ok := fences.get(args)
		if !ok {
			return nil, errors.New("tabfence: fence released")
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.guard.IsUndefined() {
			id := args[0].Float()
			g := newObject()
			defineConst(g, "resource", f.resource)
			defineConst(g, "advance", bound(guardAdvance, id))
			defineConst(g, "isCurrent", bound(guardIsCurrent, id))
			defineConst(g, "isStale", bound(guardIsStale, id))
			defineGetter(g, "current", bound(guardCurrent, id))
			f.guard = g
		}
		return f.guard, nil
	})
	guardTok := func(where string, args []js.Value) (*fence, uint64, error) {
		f, ok := fences.get(args)
		if !ok {
			return nil, 0, errors.New("tabfence: fence released")
		}
		a := padArgs(args[1:], 1)
		t, err := intArg(where, "token", argOf(a[0]), 0, false)
		return f, t, err
	}
	guardAdvance = syncFunc(func(args []js.Value) (any, error) {
		f, t, err := guardTok("guard.advance", args)
		if err != nil {
			return nil, err
		}
		pageGuard.Advance(f.resource, t)
		return float64(pageGuard.Current(f.resource)), nil
	})
	guardIsCurrent = syncFunc(func(args []js.Value) (any, error) {
		f, t, err := guardTok("guard.isCurrent", args)
		if err != nil {
			return nil, err
		}
		return pageGuard.IsCurrent(f.resource, t), nil
	})
	guardIsStale = syncFunc(func(args []js.Value) (any, error) {
		f, t, err := guardTok("guard.isStale", args)
		if err != nil {
			return nil, err
		}
		return pageGuard.IsStale(f.resource, t), nil
	})
	guardCurrent = syncFunc(func(args []js.Value) (any, error) {
		f, ok := fences.get(args)
		if !ok {
			return 0, nil
		}
		return float64(pageGuard.Current(f.resource)), nil
	})

	ctxApply = asyncFunc(func(args []js.Value) (any, error) {
		r, ok := leaderRefs.get(args)
		if !ok {
			return nil, errors.New("tabfence: leader context released")
		}
		a := padArgs(args[1:], 2)
		o, err := readOp("ctx.apply", a[0], r.l.Token)
		if err != nil {
			return nil, err
		}
		ws, err := readWrites("ctx.apply", a[1])
		if err != nil {
			return nil, err
		}
		res, err := apply(r.el.fx.st, r.l.Resource, o, ws)
		if err != nil {
			return nil, err
		}
		if res == idb.Stale {
			learnNewest(r.el.fx.st, r.l.Resource)
			stepDownStale(r.l.Resource, o.Token, staleApply(r.l.Resource, o))
		}
		return res.String(), nil
	})
	ctxPost = promiseFunc(func(args []js.Value) (any, error) {
		r, ok := leaderRefs.get(args)
		if !ok {
			return nil, errLeaderReleased
		}
		cs, err := r.el.fx.channel(r.el)
		if err != nil {
			return nil, err
		}
		a := padArgs(args[1:], 2)
		return cs.post("ctx.post", r.el, r.l, a[0], a[1])
	})
	electFenceCB = syncFunc(func(args []js.Value) (any, error) {
		el, ok := elections.get(args)
		if !ok {
			return nil, locks.ErrClosed
		}
		if el.fx == nil {
			return nil, typeErr("election.fence", "this election is not fenced (fenced: false)")
		}
		return newFence(el.e.Resource(), el.fx.st), nil
	})
	electChannelCB = syncFunc(func(args []js.Value) (any, error) {
		el, ok := elections.get(args)
		if !ok {
			return nil, locks.ErrClosed
		}
		a := padArgs(args[1:], 1)
		return openChannel("election.channel", el.e.LockName(), a[0], el)
	})

	api.Set("fence", syncFunc(fenceFn).Value)
	api.Set("deleteDatabase", asyncFunc(deleteDatabase).Value)
}

func padArgs(args []js.Value, n int) []js.Value {
	if len(args) >= n {
		return args
	}
	out := make([]js.Value, n)
	copy(out, args)
	for i := len(args); i < n; i++ {
		out[i] = js.Undefined()
	}
	return out
}

// boolArg is argOf with a boolean's value in Num (1 for true).
func boolArg(v js.Value) arg {
	a := argOf(v)
	if a.Kind == kindBoolean && v.Bool() {
		a.Num = 1
	}
	return a
}

// readStorage reads the storage options of elect() or fence().
func readStorage(where string, opts js.Value, forElect bool) (storageOptions, error) {
	a := storageArgs{
		Database: argOf(field(opts, "database")),
		Version:  argOf(field(opts, "version")),
	}
	if forElect {
		a.Fenced = boolArg(field(opts, "fenced"))
		a.Resource = argOf(field(opts, "resource"))
	}
	stores := field(opts, "stores")
	a.Stores = argOf(stores)
	if !a.Stores.absent() && isArray(stores) {
		a.StoresArray = true
		n := arrayLen(stores)
		if n > 256 {
			return storageOptions{}, typeErr(where, "at most 256 stores")
		}
		for i := 0; i < n; i++ {
			a.StoreItems = append(a.StoreItems, argOf(index(stores, i)))
		}
	}
	return validateStorage(where, a, forElect)
}

func isArray(v js.Value) bool {
	r, err := jsglue.Call(jsArray, "isArray", v)
	return err == nil && r.Type() == js.TypeBoolean && r.Bool()
}

// arrayLen reads an array's length without trusting it (a Proxy could lie).
func arrayLen(v js.Value) int {
	n := field(v, "length")
	if n.Type() != js.TypeNumber {
		return 0
	}
	f := n.Float()
	if f != f || f < 0 {
		return 0
	}
	if f > 1<<20 {
		return 1 << 20
	}
	return int(f)
}

func index(v js.Value, i int) js.Value {
	r, err := jsglue.Call(jsReflect, "get", v, i)
	if err != nil {
		return js.Undefined()
	}
	return r
}

// fence(resource, {database, stores, version}) returns a fence object. It
// never waits: the database opens on first use.
func fenceFn(args []js.Value) (any, error) {
	const where = "fence"
	a := padArgs(args, 2)
	resource, err := requiredString(where, "resource", argOf(a[0]))
	if err != nil {
		return nil, err
	}
	if len(resource) > idb.MaxResourceLen {
		return nil, typeErr(where, "resource is longer than "+itoa(idb.MaxResourceLen)+" bytes")
	}
	if t, _ := typeOf(a[1]); !a[1].IsUndefined() && !a[1].IsNull() && t != js.TypeObject {
		return nil, typeErr(where, "options must be an object when given")
	}
	o, err := readStorage(where, a[1], false)
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
	defineConst(obj, "allocate", bound(fenceAllocate, id))
	defineConst(obj, "apply", bound(fenceApply, id))
	defineConst(obj, "cas", bound(fenceCAS, id))
	defineConst(obj, "highest", bound(fenceHighest, id))
	defineConst(obj, "guard", bound(fenceGuard, id))
	return obj
}

// deleteDatabase(name?) deletes the runtime's database (sign-out): every
// tab's connection closes itself, and their fenced elections end with
// "deleted". Resolves once deleted.
func deleteDatabase(args []js.Value) (any, error) {
	a := padArgs(args, 1)
	name, err := optionalString("deleteDatabase", "name", argOf(a[0]))
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
	if !isArray(v) {
		return nil, typeErr(where, "writes must be an array of {store, op, key, value}")
	}
	n := arrayLen(v)
	if n > maxWrites {
		return nil, typeErr(where, "at most "+itoa(maxWrites)+" writes per apply")
	}
	out := make([]write, 0, n)
	for i := 0; i < n; i++ {
		it := index(v, i)
		key, value := field(it, "key"), field(it, "value")
		store, k, err := validateWrite(where, i, argOf(it), argOf(field(it, "store")), argOf(field(it, "op")), argOf(key), argOf(value))
		if err != nil {
			return nil, err
		}
		out = append(out, write{store: store, kind: k, key: key, value: value})
	}
	return out, nil
}

// apply runs one fenced apply: the fence check, the writes and the fence
// update in one readwrite transaction over tf_fences and the written stores.
func apply(st *storage, resource string, o opOptions, ws []write) (idb.Result, error) {
	db, err := st.open(context.Background())
	if err != nil {
		return 0, st.wrap(err)
	}
	var stores []string
	for _, w := range ws {
		if !contains(stores, w.store) {
			stores = append(stores, w.store)
		}
	}
	var fn func(tx *idb.WriteTx) error
	if len(ws) > 0 {
		fn = func(tx *idb.WriteTx) error {
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
	} else {
		stores = []string{} // fence only: no app store in the transaction
	}
	res, err := db.Apply(context.Background(), idb.Op{Resource: resource, Token: o.Token, OperationID: o.OperationID, Sequence: o.Sequence}, fn, stores...)
	return res, st.wrap(err)
}

func staleApply(resource string, o opOptions) error {
	return &StaleError{"tabfence: operation " + o.OperationID + " with token " + strconv.FormatUint(o.Token, 10) +
		" was rejected as stale by the fence of " + resource + ": a newer leader exists"}
}

// learnNewest advances the page's guard to the newest token of resource
// (its allocation record or its fence) after a fence said stale, before the
// caller hears it: from then on guard.isStale(thatToken) is true too.
func learnNewest(st *storage, resource string) {
	db, err := st.open(context.Background())
	if err != nil {
		return
	}
	if rec, err := db.Epoch(context.Background(), resource); err == nil {
		pageGuard.Advance(resource, rec.Epoch)
	}
	if rec, err := db.Fence(context.Background(), resource); err == nil {
		pageGuard.Advance(resource, rec.Highest)
	}
}

// stepDownStale ends every leadership of this page on resource whose token
// is token or older: a receiver has rejected it, so a newer leader exists.
func stepDownStale(resource string, token uint64, cause error) {
	fencedMu.Lock()
	var ls []*locks.Leadership
	for _, el := range fencedElections {
		if l := el.e.Leadership(); l != nil && l.Resource == resource && l.Token != 0 && l.Token <= token {
			ls = append(ls, l)
		}
	}
	fencedMu.Unlock()
	for _, l := range ls {
		l.StepDown(cause)
	}
}

// ---- the fenced part of elect() ----

// setupFenced reads elect()'s storage options and, when fenced, binds the
// election to its database. It returns the Fencer for locks.Config.
func setupFenced(el *election, opts js.Value) (locks.Fencer, error) {
	o, err := readStorage("elect", opts, true)
	if err != nil || !o.Fenced {
		return nil, err
	}
	st, err := storageFor("elect", o.Database, o.Version, o.Stores)
	if err != nil {
		return nil, err
	}
	el.fx = &electFence{st: st, opts: o}
	return st, nil
}

// startFenced runs once the election started.
func (el *election) startFenced() {
	if el.fx == nil {
		return
	}
	if r := el.e.Resource(); len(r) > idb.MaxResourceLen {
		reportError("tabfence: resource too long for a fencing token:", errors.New(r))
	}
	fencedMu.Lock()
	fencedElections.add(el)
	fencedMu.Unlock()
	el.fx.st.watch(el)
	el.fx.st.warm()
}

// releaseFenced forgets a closed election.
func (el *election) releaseFenced() {
	if el.fx == nil {
		return
	}
	fencedMu.Lock()
	fencedElections.remove(el)
	fencedMu.Unlock()
	el.fx.st.unwatch(el)
	el.fx.mu.Lock()
	ch := el.fx.ch
	el.fx.mu.Unlock()
	if ch != nil {
		ch.close()
	}
}

// storageLost closes the election because its database was deleted,
// upgraded or closed by the browser: a leader releases its lock (it must
// not lead on from memory), a follower leaves the queue. onLost reports
// "deleted", "upgraded" or "storage-closed" once, leader or not.
func (el *election) storageLost(kind idb.EventKind, err error) {
	fx := el.fx
	why := "storage-closed"
	switch kind {
	case idb.Deleted:
		why = "deleted"
	case idb.Upgraded:
		why = "upgraded"
	}
	fx.mu.Lock()
	if fx.goneWhy != "" {
		fx.mu.Unlock()
		return
	}
	fx.goneWhy, fx.goneErr = why, err
	fx.mu.Unlock()
	_ = el.e.Close()
	go func() {
		<-el.e.Done()
		el.releaseFenced()
		fx.mu.Lock()
		reported := fx.reported
		fx.reported = true
		fx.mu.Unlock()
		if !reported {
			callLater(el.onLost, why, jsglue.ToJS(err))
		}
	}()
}

// lostReason maps locks' "closed" to the storage reason when the election
// was closed because of its database.
func (fx *electFence) lostReason(reason string, err error) (string, error) {
	if fx == nil || reason != locks.ReasonClosed.String() {
		return reason, err
	}
	fx.mu.Lock()
	why, gone := fx.goneWhy, fx.goneErr
	if why != "" {
		fx.reported = true
	}
	fx.mu.Unlock()
	if why == "" {
		return reason, err
	}
	return why, &locks.LostError{Reason: locks.ReasonClosed, Resource: leResource(err), Token: leToken(err), Err: gone}
}

func leResource(err error) string {
	if le, ok := errors.AsType[*locks.LostError](err); ok {
		return le.Resource
	}
	return ""
}

func leToken(err error) uint64 {
	if le, ok := errors.AsType[*locks.LostError](err); ok {
		return le.Token
	}
	return 0
}

// decorate adds the fenced methods to a new leader context object.
func (fx *electFence) decorate(o js.Value, el *election, l *locks.Leadership) {
	if fx == nil || l.Token == 0 {
		return
	}
	pageGuard.Advance(l.Resource, l.Token)
	id := leaderRefs.add(&leaderRef{el: el, l: l})
	o.Set("database", fx.st.name)
	o.Set("apply", bound(ctxApply, id))
	o.Set("post", postMethod(opCtxPost, id, bound(ctxPost, id)))
	// The handle stays: an old context's apply still goes to the fence,
	// which decides (stale, or accepted if no newer leader wrote); post
	// refuses once the leadership is over.
}

// sequencer returns the sequencer of leadership l on channel name: one
// per leadership and channel, so sequences restart with every token.
func (fx *electFence) sequencer(l *locks.Leadership, name string) *channel.Sequencer {
	fx.mu.Lock()
	if fx.seqL != l {
		fx.seqL, fx.seqs = l, map[string]*channel.Sequencer{}
	}
	s := fx.seqs[name]
	if s == nil {
		s = channel.NewSequencer(l.Resource, l.OwnerID, l.Token)
		fx.seqs[name] = s
	}
	fx.mu.Unlock()
	return s
}

// channel returns the election's own channel (named by its lock name),
// used by ctx.post.
func (fx *electFence) channel(el *election) (*chanState, error) {
	fx.chOnce.Do(func() {
		cs, err := newChanState(el.e.LockName(), false, el)
		fx.mu.Lock()
		fx.ch, fx.chErr = cs, err
		fx.mu.Unlock()
	})
	fx.mu.Lock()
	cs, err := fx.ch, fx.chErr
	fx.mu.Unlock()
	return cs, err
}
