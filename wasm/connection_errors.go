//go:build !tabfence_core && !tabfence_noconnection

package main

import (
	"errors"

	"github.com/tabfence/tabfence/realtime/browser"
)

// The names of tf.connection's errors. Pure Go: the d.ts's list of error
// names is checked against these natively (TestDTSMatchesGo).

// nameMutationRejected is mutate()'s rejection when the server refused the
// mutation (a *browser.RejectError); it carries the server's problem.
const nameMutationRejected = "MutationRejectedError"

// connectionErrorNames name the errors of the connection API, first match
// wins.
var connectionErrorNames = [...]errorName{
	{browser.ErrRejected, nameMutationRejected},
	{browser.ErrConfig, "TypeError"},
	{browser.ErrClosed, "InvalidStateError"},
	{browser.ErrChanges, "DataError"},
}

// connErr names an error of the connection API; an error that names
// itself already (an IndexedDB or lock error) keeps its name.
func connErr(err error) error {
	if err == nil {
		return nil
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
