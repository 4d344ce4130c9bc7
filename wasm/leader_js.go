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
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// Fenced leadership: the fenced part of an election (its database, its
// channel, its sequencers) and the methods a fenced leader context adds,
// apply and post.

// electFence is the fenced part of an election (nil when unfenced).
type electFence struct {
	st   *storage
	opts jsapi.StorageOptions

	mu       sync.Mutex
	goneWhy  string // a storage lost reason (storageLostReason): why the election was closed
	goneErr  error
	reported bool // onLost was delivered for goneWhy
	seqL     *locks.Leadership
	seqs     map[string]*channel.Sequencer // per channel name, for seqL
	ch       *chanState                    // the election's own channel, for ctx.post
	chOnce   sync.Once
	chErr    error
}

// leaderRef is what a leader context's methods are bound to.
type leaderRef struct {
	el *election
	l  *locks.Leadership
}

var (
	// leaderRefs are the page's fenced leader contexts (see objects).
	leaderRefs objects[*leaderRef]

	// fencedElections are the page's fenced elections: a stale verdict or
	// a newer token heard on any channel of the page ends their leadership.
	fencedMu        sync.Mutex
	fencedElections electionSet
)

func init() {
	leaderRefs.Define(errLeaderReleased, // export_js.go's

		jsapi.Method[*leaderRef]{Name: "apply", Call: jsapi.Async, Fn: (*leaderRef).apply},
		jsapi.Method[*leaderRef]{Name: "post", Call: jsapi.Promise, Fn: (*leaderRef).post, Wrap: func(id float64, m js.Value) js.Value {
			return postMethod(opCtxPost, id, m)
		}},
	)
}

func (r *leaderRef) apply(args []js.Value) (any, error) {
	o, err := readOp("ctx.apply", jsapi.At(args, 0), r.l.Token)
	if err != nil {
		return nil, err
	}
	ws, err := readWrites("ctx.apply", jsapi.At(args, 1))
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
}

func (r *leaderRef) post(args []js.Value) (any, error) {
	cs, err := r.el.fx.channel(r.el)
	if err != nil {
		return nil, err
	}
	return cs.post("ctx.post", r.el, r.l, jsapi.At(args, 0), jsapi.At(args, 1))
}

// fence is election.fence(): the fence of its resource in its database.
func (el *election) fence([]js.Value) (any, error) {
	if el.fx == nil {
		return nil, jsapi.TypeErr("election.fence", "this election is not fenced (fenced: false)")
	}
	return newFence(el.e.Resource(), el.fx.st), nil
}

// channel is election.channel(opts): its lock name's channel, posting for
// its leadership.
func (el *election) channel(args []js.Value) (any, error) {
	return openChannel("election.channel", el.e.LockName(), jsapi.At(args, 0), el)
}

func staleApply(resource string, o jsapi.OpOptions) error {
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
	for _, s := range fencedLeaderships(func(l *locks.Leadership) bool { return l.Resource == resource && l.Token <= token }) {
		s.l.StepDown(cause)
	}
}

// fencedLeadership is a current leadership of a fenced election of the page.
type fencedLeadership struct {
	el *election
	l  *locks.Leadership
}

// fencedLeaderships lists the page's fenced leaderships (token > 0) that
// match.
func fencedLeaderships(match func(*locks.Leadership) bool) []fencedLeadership {
	fencedMu.Lock()
	defer fencedMu.Unlock()
	var out []fencedLeadership
	for _, el := range fencedElections {
		if l := el.e.Leadership(); l != nil && l.Token != 0 && match(l) {
			out = append(out, fencedLeadership{el, l})
		}
	}
	return out
}

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
		jsapi.ReportError("tabfence: resource too long for a fencing token:", errors.New(r))
	}
	fencedMu.Lock()
	fencedElections.Add(el)
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
	fencedElections.Remove(el)
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
// the storage lost reason once, leader or not.
func (el *election) storageLost(kind idb.EventKind, err error) {
	fx := el.fx
	why := storageLostReason(kind)
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
			jsapi.CallLater(el.onLost, why, jsglue.ToJS(err))
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
	le, _ := errors.AsType[*locks.LostError](err)
	if le == nil {
		le = &locks.LostError{}
	}
	return why, &locks.LostError{Reason: locks.ReasonClosed, Resource: le.Resource, Token: le.Token, Err: gone}
}

// decorate adds the fenced methods to a new leader context object.
func (fx *electFence) decorate(o js.Value, el *election, l *locks.Leadership) {
	if fx == nil || l.Token == 0 {
		return
	}
	pageGuard.Advance(l.Resource, l.Token)
	o.Set("database", fx.st.name)
	// The handle stays: an old context's apply still goes to the fence,
	// which decides (stale, or accepted if no newer leader wrote); post
	// refuses once the leadership is over.
	leaderRefs.Install(o, leaderRefs.Add(&leaderRef{el: el, l: l}))
}

// sequencer returns the sequencer of leadership l on channel name: one
// per leadership and channel, so sequences restart with every token.
func (fx *electFence) sequencer(l *locks.Leadership, name string) *channel.Sequencer {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	if fx.seqL != l {
		fx.seqL, fx.seqs = l, map[string]*channel.Sequencer{}
	}
	s := fx.seqs[name]
	if s == nil {
		s = channel.NewSequencer(l.Resource, l.OwnerID, l.Token)
		fx.seqs[name] = s
	}
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
	defer fx.mu.Unlock()
	return fx.ch, fx.chErr
}

// electionSet is a set of elections. A page runs a handful, so a slice
// serves as well as a map, without linking the pointer-key map code into
// the download (docs/jsapi-notes.md).
type electionSet []*election

func (s *electionSet) Add(el *election) {
	for _, x := range *s {
		if x == el {
			return
		}
	}
	*s = append(*s, el)
}

func (s *electionSet) Remove(el *election) {
	for i, x := range *s {
		if x == el {
			last := len(*s) - 1
			(*s)[i], (*s)[last] = (*s)[last], nil
			*s = (*s)[:last]
			return
		}
	}
}
