//go:build js && wasm

package main

import (
	"strconv"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/locks"
)

// warmUp runs one election, alone, on a lock no other tab uses, right after
// the runtime is ready.
//
// Why: V8 compiles WebAssembly functions lazily, on their first call, and
// a failover always lands on a tab that never led; running the grant →
// leadership → onLeader → close path once at start moves that compilation
// out of the failover, into idle time after load (docs/jsapi-notes.md).
func warmUp() {
	// Function.prototype is a callable that does nothing: the page-callback
	// path (bind, queueMicrotask) is warmed too, with no visible effect.
	noop := js.Global().Get("Function").Get("prototype")
	el := &election{onLeader: noop, onFollower: noop, onLost: noop}
	scope := "warmup-" + strconv.FormatFloat(js.Global().Get("performance").Call("now").Float(), 'f', -1, 64) +
		"-" + strconv.FormatFloat(js.Global().Get("Math").Call("random").Float(), 'f', -1, 64)
	e, err := locks.NewElection(locks.Config{
		Scope:    scope,
		Protocol: 1,
		OnLeader: func(l *locks.Leadership) {
			el.leader(l)
			_ = el.e.Close()
		},
		OnFollower: el.follower,
		OnLost:     el.lost,
	})
	if err != nil {
		return
	}
	el.e = e
	if e.Start() != nil {
		return
	}
	select {
	case <-e.Done():
	case <-time.After(10 * time.Second): // never expected; do not linger
		_ = e.Close()
	}
}
