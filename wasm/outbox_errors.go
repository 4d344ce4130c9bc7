//go:build !tabfence_core

package main

import (
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// namedError gives an outbox error the JavaScript name pages branch on.
type namedError struct {
	err  error
	name string
}

func (e *namedError) Error() string  { return e.err.Error() }
func (e *namedError) Unwrap() error  { return e.err }
func (e *namedError) JSName() string { return e.name }

// errorName names the errors matching target.
type errorName struct {
	target error
	name   string
}

// outboxErrorNames name the errors of the outbox API, first match wins,
// then runtimeErrorNames (the page runtime's errors, which build in the
// browser only); the d.ts's TabfenceErrorName lists every name
// (TestDTSMatchesGo).
var outboxErrorNames = [...]errorName{
	{outbox.ErrNoSession, "NoSessionError"},
	{queue.ErrUnknownOperation, "UnknownOperationError"},
	{queue.ErrInvalidRecord, "TypeError"},
	{queue.ErrInvalidTransition, "InvalidStateError"},
	{outbox.ErrNotFound, "NotFoundError"},
	{outbox.ErrPaused, "PausedError"},
	{queue.ErrStaleOwner, "StaleOwnerError"},
	{outbox.ErrStepDown, "StaleOwnerError"},
	{outbox.ErrAuthRequired, "AuthRequiredError"},
	{outbox.ErrSessionChanged, "SessionChangedError"},
	{outbox.ErrSessionMismatch, "SessionMismatchError"},
	{outbox.ErrOffline, "NetworkError"},
	{outbox.ErrStoreClosed, "InvalidStateError"},
	{queue.ErrSchemaUnsupported, "NotSupportedError"},
}

// nameAbort is the name of an IndexedDB abort without a cause of its own.
const nameAbort = "AbortError"
