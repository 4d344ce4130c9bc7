//go:build js && wasm && !tabfence_core

package main

import (
	"syscall/js"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/browser"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// The outbox's status, events and records as JavaScript objects.

// setFailureJS adds to a status object what the flush owner last learned
// about sending (outbox.SendFailure, shared by every tab): failing, failure
// (its kind, or null), failingSince and nextAttemptAt (ms, or null).
func setFailureJS(o js.Value, f outbox.SendFailure) {
	o.Set("failing", f.Failing())
	if f.Failing() {
		o.Set("failure", jsapi.Recurring.Get(string(f.Kind)))
	} else {
		o.Set("failure", js.Null())
	}
	o.Set("failingSince", jsapi.Ms(f.Since))
	o.Set("nextAttemptAt", jsapi.Ms(f.NextAttemptAt))
}

func errorInfoJS(e *queue.ErrorInfo) any {
	if e == nil {
		return js.Null()
	}
	o := jsapi.NewObject()
	o.Set("code", e.Code)
	o.Set("message", e.Message)
	o.Set("status", e.Status)
	o.Set("at", jsapi.Ms(e.At))
	return o
}

func statusJS(st browser.RuntimeStatus) js.Value {
	o := jsapi.NewObject()
	o.Set("pending", st.Pending)
	o.Set("sending", st.Sending)
	o.Set("failed", st.Failed)
	o.Set("deadLetter", st.DeadLetter)
	o.Set("conflict", st.Conflict)
	o.Set("terminal", st.Terminal)
	o.Set("acked", st.Acked)
	o.Set("unsupported", st.Unsupported)
	o.Set("oldestPendingAgeMs", float64(st.OldestPendingAge)/1e6)
	o.Set("lastFlushAt", jsapi.Ms(st.LastFlushAt))
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
	o := jsapi.NewObject()
	// Kinds, owners, reasons and error codes recur from event to event:
	// their JavaScript strings come from the cache (see recurring).
	o.Set("kind", jsapi.Recurring.Get(string(e.Kind)))
	o.Set("at", jsapi.Ms(e.At))
	if e.RecordID != "" {
		o.Set("recordId", e.RecordID)
	}
	if e.OperationKeyHash != "" {
		o.Set("operationKeyHash", e.OperationKeyHash)
	}
	if e.Owner != "" {
		o.Set("ownerId", jsapi.Recurring.Get(e.Owner))
	}
	if e.Reason != "" {
		o.Set("reason", jsapi.Recurring.Get(e.Reason))
	}
	if e.ErrorCode != "" {
		o.Set("errorCode", jsapi.Recurring.Get(e.ErrorCode))
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

func recordJS(r *queue.Record) js.Value {
	o := jsapi.NewObject()
	o.Set("id", r.ID)
	o.Set("status", string(r.Status))
	o.Set("operationType", r.OperationType)
	o.Set("operationKey", r.OperationKey)
	o.Set("entityType", r.EntityType)
	o.Set("entityId", r.EntityID)
	o.Set("attempts", r.Attempts)
	o.Set("maxAttempts", r.MaxAttempts)
	o.Set("createdAt", jsapi.Ms(r.CreatedAt))
	o.Set("updatedAt", jsapi.Ms(r.UpdatedAt))
	o.Set("user", r.UserID)
	o.Set("schemaVersion", r.PayloadSchemaVersion)
	o.Set("lastError", errorInfoJS(r.LastError))
	return o
}
