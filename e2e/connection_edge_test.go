//go:build e2e

package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The connection's edges: a bad mutation.

// A mutation the wire cannot carry (a payload over half a message) is the
// caller's bug: mutate() rejects with a TypeError and nothing is pending.
func TestConnectionBadMutationTypeError(t *testing.T) {
	e := setupConn(t, false)
	tabs := e.connTabs(1, harness.ConnOptions{Scope: scope(t)})
	waitReady(t, tabs)
	got := eval[string](t, tabs[0], `RT.conn.mutate({ op: "issue.put", payload: "x".repeat(600000) }).then(() => "resolved", (e) => e.name)`)
	require.Equal(t, "TypeError", got)
	require.Equal(t, 0, connStatus(t, tabs[0]).Pending, "a refused mutation is not pending")
}
