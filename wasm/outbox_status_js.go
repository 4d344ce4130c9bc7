//go:build js && wasm && !tabfence_core

package main

import (
	"syscall/js"

	"github.com/tabfence/tabfence/outbox"
)

// setFailureJS adds to a status object what the flush owner last learned
// about sending (outbox.SendFailure, shared by every tab): failing, failure
// (its kind, or null), failingSince and nextAttemptAt (ms, or null).
func setFailureJS(o js.Value, f outbox.SendFailure) {
	o.Set("failing", f.Failing())
	if f.Failing() {
		o.Set("failure", recurring.get(string(f.Kind)))
	} else {
		o.Set("failure", js.Null())
	}
	o.Set("failingSince", ms(f.Since))
	o.Set("nextAttemptAt", ms(f.NextAttemptAt))
}
