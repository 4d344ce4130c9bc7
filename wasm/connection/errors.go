//go:build !tabfence_core && !tabfence_noconnection

package connection

import (
	"errors"

	"github.com/tabfence/tabfence/realtime/browser"
)

// The names of tf.connection's errors. Pure Go: the d.ts's list of error
// names is checked against these natively (TestDTSMatchesGo, through
// ErrorNames).

// namedError gives an error the JavaScript name pages branch on.
type namedError struct {
	err  error
	name string
}

func (e *namedError) Error() string  { return e.err.Error() }
func (e *namedError) Unwrap() error  { return e.err }
func (e *namedError) JSName() string { return e.name }

type errorName struct {
	target error
	name   string
}

// nameMutationRejected is mutate()'s rejection when the server refused the
// mutation (a *browser.RejectError); it carries the server's problem.
const nameMutationRejected = "MutationRejectedError"

// nameMutationNotStored is mutate()'s rejection when the pending store's
// write failed: nothing was stored. It wins over the IndexedDB error it
// wraps, whose name would not say so.
const nameMutationNotStored = "MutationNotStoredError"

// connectionErrorNames name the errors of the connection API, first match
// wins.
var connectionErrorNames = [...]errorName{
	{browser.ErrRejected, nameMutationRejected},
	{browser.ErrNotStored, nameMutationNotStored},
	{browser.ErrConfig, "TypeError"},
	{browser.ErrInvalid, "TypeError"}, // a mutation the wire cannot carry (payload too large)
	{browser.ErrClosed, "InvalidStateError"},
	{browser.ErrChanges, "DataError"},
}

// ErrorNames are the names connErr gives.
func ErrorNames() []string {
	out := make([]string, len(connectionErrorNames))
	for i, m := range connectionErrorNames {
		out[i] = m.name
	}
	return out
}

// connErr names an error of the connection API; an error that names
// itself already (an IndexedDB or lock error) keeps its name.
func connErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, browser.ErrNotStored) {
		return &namedError{err, nameMutationNotStored}
	}
	if _, ok := errors.AsType[interface {
		error
		JSName() string
	}](err); ok {
		return err
	}
	for _, m := range connectionErrorNames {
		if errors.Is(err, m.target) {
			return &namedError{err, m.name}
		}
	}
	return err
}
