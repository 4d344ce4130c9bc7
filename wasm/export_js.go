//go:build js && wasm

package main

import (
	"errors"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/jsglue/loader"
)

// The runtime's wasm exports, all of them here in package main: what they
// are for and the rules every export keeps are in package jsglue/loader
// (an entry through a js.Func costs tens of µs; an export is a plain call).
// Each calls the exported Go function of the package it serves. Without
// the loader nothing calls them and every path is the js.Func one.

// exportScratch returns the address of the exports' scratch in the
// instance's memory (loader.XScratch).
//
//go:wasmexport tabfence_scratch
func exportScratch() int32 { return loader.ScratchAddr() }

// exportScratchLen returns its size.
//
//go:wasmexport tabfence_scratch_len
func exportScratchLen() int32 { return loader.XScratchLen }

// exportChannelRx receives a message for a channel (channel.ReceiveExported).
//
//go:wasmexport tabfence_channel_rx2
func exportChannelRx(id, n int32) int32 { return channel.ReceiveExported(id, n) }

// The post methods of the API (ctx.post, channel.post) through a wasm
// export (a post pays one entry into Go). The loader's poster hook
// (api.js) builds the method; without the loader it is the js.Func.

// apiLayout is the layout of api.js's hooks this package speaks (its
// layout export): a bump here and there together, when either changes what
// the other passes or expects.
const apiLayout = 1

// Which post tabfence_post runs.
const (
	opCtxPost  = 1 // ctx.post: id is a leaderRefs handle
	opChanPost = 2 // channel.post: id is a chans handle
)

var errLeaderReleased = errors.New("tabfence: leader context released")

// postMethod returns the post method for handle id: the loader's poster
// around slow (the js.Func), or slow itself.
func postMethod(op int32, id float64, slow js.Value) js.Value {
	poster := loader.Group(loader.GroupAPI, apiLayout).Func("poster")
	if poster.IsUndefined() {
		return slow
	}
	m := poster.Invoke(op, id, slow, fastFail().Value, loader.Scratch(), loader.Kick())
	jsReflect.Call("set", m, symAsync, true)
	return m
}

// exportPost runs post op for handle id with the kind the loader wrote into
// xscratch (n bytes) and the payload it holds (Channel.HeldPayload), exactly
// as the js.Func does. Its result, shifted left by one beside the kick
// bit (loader.Leave) in bit 0: 1 when the envelope went out through the
// loader's post hook, which keeps it, so the loader answers {id, token,
// seq} from its fields (no result JSON written, copied and parsed); else
// the length of the result JSON written into scratch; or -1 when it failed
// (the loader then calls fail, which returns the rejected promise).
//
//go:wasmexport tabfence_post
func exportPost(op, id, n int32) int32 {
	return exported(func() (int32, error) {
		e, viaLoader, err := fastPost(op, float64(id), loader.ScratchString(int(n)))
		switch {
		case err != nil:
			return 0, err
		case viaLoader:
			return 1, nil
		}
		var b [128]byte
		if w := loader.WriteScratch(postResult(b[:0], e)); w > 0 {
			return int32(w), nil
		}
		return 0, errInternal // cannot happen: an ID is 32 hex digits
	})
}

// exported runs the body of a wasm export (the rules are in package
// jsglue/loader): its verdict is the body's result, or -1 when it
// failed (the error waits for fastFail) or panicked, shifted left by one
// beside the kick bit (loader.Leave).
func exported(body func() (int32, error)) (v int32) {
	g := loader.Entered()
	defer func() {
		if r := recover(); r != nil {
			reportPanic(r)
			setFastErr(errInternal)
			v = -1<<1 | loader.Leave(g)
		}
	}()
	res, err := body()
	if err != nil {
		setFastErr(err)
		res = -1
	}
	return res<<1 | loader.Leave(g)
}

// fastPost is ctxPost's or chanPost's body for a string kind; viaLoader:
// the envelope went out through the loader's post hook.
func fastPost(op int32, id float64, kind string) (e channel.Envelope, viaLoader bool, err error) {
	switch op {
	case opCtxPost:
		const where = "ctx.post"
		r, ok := leaderRefs.lookup(id)
		if !ok {
			return channel.Envelope{}, false, errLeaderReleased
		}
		cs, err := r.el.fx.channel(r.el)
		if err != nil {
			return channel.Envelope{}, false, err
		}
		if kind, err = checkedString(where, "kind", kind); err != nil {
			return channel.Envelope{}, false, err
		}
		e, err = cs.send(where, r.el, r.l, kind, cs.c.HeldPayload())
		return e, err == nil && cs.c.PostsThroughLoader(), err
	case opChanPost:
		const where = "channel.post"
		cs, ok := chans.lookup(id)
		if !ok {
			return channel.Envelope{}, false, channel.ErrClosed
		}
		el, l, err := cs.leader()
		if err != nil {
			return channel.Envelope{}, false, err
		}
		if kind, err = checkedString(where, "kind", kind); err != nil {
			return channel.Envelope{}, false, err
		}
		e, err = cs.send(where, el, l, kind, cs.c.HeldPayload())
		return e, err == nil && cs.c.PostsThroughLoader(), err
	}
	return channel.Envelope{}, false, errInternal
}

var (
	fastErrMu   sync.Mutex
	fastErr     error
	fastFailCB  *jsglue.Callback
	fastFailOne sync.Once
)

func setFastErr(err error) {
	fastErrMu.Lock()
	fastErr = err
	fastErrMu.Unlock()
}

// fastFail returns the promise a failed tabfence_post resolves to: rejected
// with its error, as the js.Func's.
func fastFail() *jsglue.Callback {
	fastFailOne.Do(func() {
		fastFailCB = jsglue.NewCallback(func(js.Value, []js.Value) any {
			fastErrMu.Lock()
			err := fastErr
			fastErr = nil
			fastErrMu.Unlock()
			if err == nil {
				err = errInternal
			}
			return jsPromise.Call("reject", jsglue.ToJS(err))
		})
	})
	return fastFailCB
}

// exportIDBFence judges the records of a fenced apply the loader's idb hook
// gathered into xscratch (idb.JudgeFenceExported), beside the kick bit.
//
//go:wasmexport tabfence_idb_fence
func exportIDBFence(id, n int32) (v int32) {
	g := loader.Entered()
	defer loader.Recovered(g, &v)
	v = idb.JudgeFenceExported(id, n) << 1
	return v | loader.Leave(g)
}

// exportIDBAlloc judges the allocation record the loader's idb hook gathered
// into xscratch (idb.AllocExported), beside the kick bit.
//
//go:wasmexport tabfence_idb_alloc
func exportIDBAlloc(id, n int32) (v int32) {
	g := loader.Entered()
	defer loader.Recovered(g, &v)
	v = idb.AllocExported(id, n) << 1
	return v | loader.Leave(g)
}
