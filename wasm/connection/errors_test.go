//go:build !tabfence_core && !tabfence_noconnection

package connection

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/realtime/browser"
)

// The connection's errors carry the names the d.ts lists (ErrorNames,
// which TestDTSMatchesGo checks), a reject among them.
func TestConnectionErrorNames(t *testing.T) {
	rej := &browser.RejectError{ID: "m"}
	require.Equal(t, "MutationRejectedError", jsglue.NameOf(connErr(rej)))
	require.True(t, errors.Is(connErr(rej), browser.ErrRejected), "still errors.Is-able")
	require.Equal(t, "TypeError", jsglue.NameOf(connErr(browser.ErrConfig)))
	require.Equal(t, "InvalidStateError", jsglue.NameOf(connErr(browser.ErrClosed)))
	invalid := connErr(errors.Join(browser.ErrInvalid, errors.New("payload too large")))
	require.Equal(t, "TypeError", jsglue.NameOf(invalid), "a bad mutation is the caller's bug")
	require.ErrorIs(t, invalid, browser.ErrInvalid)
	named := &namedError{errors.New("x"), "QuotaExceededError"}
	require.Same(t, named, connErr(named), "an error that names itself keeps its name")
	notStored := connErr(errors.Join(browser.ErrNotStored, named))
	require.Equal(t, "MutationNotStoredError", jsglue.NameOf(notStored), "not stored wins over the IndexedDB error's name")
	require.ElementsMatch(t, []string{"MutationRejectedError", "MutationNotStoredError", "TypeError", "TypeError", "InvalidStateError", "DataError"}, ErrorNames())
}
