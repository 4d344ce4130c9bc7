//go:build js && wasm

package browser

import (
	"context"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// leaderRun is this tab's term as leader: the client core's Leader, the
// Driver that runs it over the page's WebSocket (none while the browser is
// switched offline), and the channel stream announced under its token.
type leaderRun struct {
	c   *Conn
	l   *locks.Leadership
	seq *channel.Sequencer

	mu      sync.Mutex
	machine *realtime.Leader
	drv     *realtime.Driver
	drvCtx  context.Context // ends when drv is stopped
	drvStop context.CancelFunc
	drvDone chan struct{}
	state   realtime.State
	offline bool
	lastErr string

	srvToken    uint64 // the server's fencing token for this term (FencePath)
	srvResource string // this browser's resource at the server (ServerResource)
}

// runLeader is OnLeader: it restores the pending store, starts the driver
// (unless offline) and runs until the leadership ends.
func (c *Conn) runLeader(l *locks.Leadership) {
	c.mu.Lock()
	c.term++
	term := c.term
	c.leading = true
	c.mu.Unlock()
	defer func() {
		// This tab may already lead again (a quick re-win while this term
		// stopped its driver): only this term's state is cleared.
		c.mu.Lock()
		if c.term == term {
			c.leading, c.lead, c.early = false, nil, nil
		}
		c.mu.Unlock()
		c.notify.kick()
	}()
	ld, err := c.load(l.Ctx)
	if err != nil {
		l.StepDown(err)
		return
	}
	pending := realtime.NewPending()
	for _, pm := range ld.pending {
		pending.Add(pm.Mutation.wire(), pm.MadeAt)
		c.addPending(pm.Mutation.wire(), pm.MadeAt)
	}
	lc := c.cfg.Leader
	lc.User = c.cfg.User
	lr := &leaderRun{c: c, l: l, seq: channel.NewSequencer(l.Resource, l.OwnerID, l.Token),
		machine: realtime.NewLeader(lc, ld.version, pending), offline: ld.offline}
	c.mu.Lock()
	c.fol.Loaded(ld.version) // the stored version is the rule: a reset may have lowered it
	c.lead, c.offline = lr, ld.offline
	early := c.early
	c.early = nil
	c.mu.Unlock()
	if !ld.offline {
		lr.startDriver()
	}
	for _, m := range early {
		lr.mutate(m)
	}
	lr.takeOwn()
	lr.announceStatus()
	<-l.Ctx.Done()
	lr.stopDriver()
}

func (lr *leaderRun) startDriver() {
	lr.stopDriverWait() // a driver still stopping owns the machine until it returns
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.drv != nil || lr.drvDone != nil || lr.l.Ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(lr.l.Ctx)
	var d *realtime.Driver
	d = realtime.NewBatchDriver(lr.machine, lr.dial, nil, func(acts []realtime.Action) {
		if lr.appBatch(acts) {
			d.AppFailed(lr.c.heldVersion()) // the machine redials from the stored version
		}
	})
	done := make(chan struct{})
	lr.drv, lr.drvCtx, lr.drvStop, lr.drvDone = d, ctx, cancel, done
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
}

// stopDriver stops the driver (its socket closes) and waits for it.
// drvDone stays set until the driver returned: until then it owns the
// machine.
func (lr *leaderRun) stopDriver() {
	lr.mu.Lock()
	stop, done := lr.drvStop, lr.drvDone
	lr.drv, lr.drvStop = nil, nil
	lr.mu.Unlock()
	if stop != nil {
		stop()
	}
	if done != nil {
		<-done
		lr.mu.Lock()
		if lr.drvDone == done {
			lr.drvDone = nil
		}
		lr.mu.Unlock()
	}
}

func (lr *leaderRun) driver() *realtime.Driver {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.drv
}

// setOffline honors the browser-wide switch: off the socket, or dial now.
func (lr *leaderRun) setOffline(offline bool) {
	lr.mu.Lock()
	changed := lr.offline != offline
	lr.offline = offline
	lr.mu.Unlock()
	if !changed {
		return
	}
	if offline {
		lr.stopDriver()
	} else {
		lr.startDriver()
	}
	lr.announceStatus()
}

// mutate hands a mutation (already in the pending store) to the leader.
func (lr *leaderRun) mutate(m rt.Mutation) {
	lr.mu.Lock()
	d, dctx := lr.drv, lr.drvCtx
	lr.mu.Unlock()
	// Mutate returns nil when that driver stopped first (then the machine
	// gets m below; a second Add of one id is harmless).
	if d != nil && d.Mutate(dctx, m) != nil {
		return
	}
	if lr.l.Ctx.Err() != nil {
		// This term ended (its driver may not have returned yet): the next
		// leader resends m, from the pending store or from its maker.
		return
	}
	// No driver (offline, or it just stopped): the machine is idle; it
	// sends the mutation with the next ready. startDriver takes lr.mu too,
	// so no driver starts while the machine is fed here.
	lr.stopDriverWait()
	lr.mu.Lock()
	if lr.drv != nil || lr.drvDone != nil {
		lr.mu.Unlock()
		lr.mutate(m) // one started meanwhile: hand it over
		return
	}
	lr.machine.Mutate(lr.c.now(), m)
	lr.mu.Unlock()
}

// stopDriverWait waits until no driver runs the machine, if one is stopping.
func (lr *leaderRun) stopDriverWait() {
	lr.mu.Lock()
	done, running := lr.drvDone, lr.drv != nil
	lr.mu.Unlock()
	if done != nil && !running {
		<-done // the driver returns promptly once stopped
		lr.mu.Lock()
		if lr.drvDone == done {
			lr.drvDone = nil
		}
		lr.mu.Unlock()
	}
}

// asked answers a tab's status request: the status, and an unauthorized
// leader tries again (only when asked).
func (lr *leaderRun) asked() {
	lr.announceStatus()
	if d := lr.driver(); d != nil {
		d.Retry(lr.l.Ctx)
	}
}

func (lr *leaderRun) view() leaderView {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return leaderView{state: stateOf(lr.state, lr.offline), token: lr.l.Token, id: lr.l.OwnerID, lastErr: lr.lastErr}
}

func (lr *leaderRun) announceStatus() {
	v := lr.view()
	p := js.Global().Get("Object").New()
	p.Set("state", string(v.state))
	p.Set("lastError", v.lastErr)
	lr.c.mu.Lock()
	p.Set("pending", lr.c.pend.Len()) // a follower that lists another count rereads the store
	lr.c.mu.Unlock()
	_, _ = lr.c.ch.Send(lr.seq, "rt.status", p)
	lr.c.notify.kick()
}

// dial opens the page's WebSocket at the URL the app gives now.
// With a FencePath, the leader's server token (asked once per term) is
// stamped on its mutations.
func (lr *leaderRun) dial(ctx context.Context) (realtime.Socket, error) {
	s, err := lr.dialFenced(ctx)
	lr.mu.Lock()
	if err != nil {
		lr.lastErr = errorWords(err)
	}
	lr.mu.Unlock()
	return s, err
}

func (lr *leaderRun) dialFenced(ctx context.Context) (realtime.Socket, error) {
	cfg := lr.c.cfg
	lr.mu.Lock()
	tok, res := lr.srvToken, lr.srvResource
	lr.mu.Unlock()
	if cfg.FencePath != "" && tok == 0 {
		id, err := lr.c.browserID(ctx)
		if err != nil {
			return nil, join(ErrFence, err)
		}
		if res, err = ServerResource(cfg.Scope, cfg.Protocol, id); err != nil {
			return nil, join(ErrFence, err)
		}
		t, err := serverToken(ctx, cfg.FencePath, res)
		if err != nil {
			return nil, err
		}
		lr.mu.Lock()
		if lr.srvToken == 0 {
			lr.srvToken, lr.srvResource = t, res
		}
		tok, res = lr.srvToken, lr.srvResource
		lr.mu.Unlock()
	}
	s, err := dialSocket(ctx, cfg.URL)
	if err != nil || cfg.FencePath == "" {
		return s, err
	}
	return fencedSocket{Socket: s, resource: res, token: tok}, nil
}

// app performs a reset or a state change, on the driver's goroutine
// (appBatch writes deltas and outcomes); it reports whether a reset failed.
func (lr *leaderRun) app(a realtime.Action) (failed bool) {
	switch v := a.(type) {
	case realtime.ResetReplica:
		return lr.failed(lr.reset(lr.l.Ctx, v.Version))
	case realtime.StateChanged:
		lr.mu.Lock()
		lr.state = v.State
		if v.State == realtime.Ready {
			lr.lastErr = ""
		}
		lr.mu.Unlock()
		lr.announceStatus()
	}
	return false
}

func (lr *leaderRun) replicaStores() []string {
	return append(append([]string{}, lr.c.cfg.Stores...), StoreMeta)
}

// reset replaces the replica with the server's snapshot (or empties it
// when there is no Snapshot URL), fenced, then announces a reload.
func (lr *leaderRun) reset(ctx context.Context, version uint64) error {
	c := lr.c
	var changes []change
	if c.cfg.Snapshot != "" {
		// The rows are the snapshot's; the version is the server's ready,
		// which the deltas that follow continue.
		ch, err := fetchSnapshot(ctx, c.cfg.Snapshot, c.cfg.Stores)
		if err != nil {
			return err
		}
		changes = ch
	}
	p := js.Global().Get("Object").New()
	p.Set("version", float64(version))
	_, err := c.ch.Announce(ctx, lr.seq, func(ctx context.Context) error {
		return lr.fenced(ctx, "r"+opVersion(version)+"-"+channel.NewID()[:8], 0, lr.replicaStores(), func(tx *idb.WriteTx) error {
			for _, s := range c.cfg.Stores {
				if err := tx.Clear(s); err != nil {
					return err
				}
			}
			if err := writeChanges(tx, changes); err != nil {
				return err
			}
			return putVersion(tx, version)
		})
	}, "rt.reload", p)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.fol.Loaded(version)
	c.mu.Unlock()
	c.reloads.call(version)
	c.notify.kick()
	return nil
}
