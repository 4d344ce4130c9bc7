//go:build js && wasm && (tabfence_core || tabfence_noconnection)

package main

import (
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/require"
)

// A build without the connection has no tf.connection (the bench measures
// the connection's bytes against this build).
func TestNoConnectionInThisBuild(t *testing.T) {
	require.Equal(t, js.TypeUndefined, api.Get("connection").Type())
}
