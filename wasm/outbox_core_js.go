//go:build js && wasm && tabfence_core

package main

import (
	"errors"
	"syscall/js"
)

// tabfence-core.wasm is the runtime without the outbox: election, fencing
// and the channel, for apps that need no offline queue. The outbox's
// flusher and IndexedDB store are a large part of the download
// (docs/jsapi-notes.md); an app that never queues a mutation should not pay
// for them.
// tf.outbox and tf.backgroundSync exist in the core build only to say so
// clearly.

var errNoOutbox = errors.New("tabfence.outbox: this is tabfence-core.wasm, built without the outbox; load tabfence.wasm to use it")

type notSupported struct{ error }

func (notSupported) JSName() string { return "NotSupportedError" }

func openOutbox([]js.Value) (any, error) { return nil, notSupported{errNoOutbox} }

func openSyncOutbox([]js.Value) (any, error) { return nil, notSupported{errNoOutbox} }
