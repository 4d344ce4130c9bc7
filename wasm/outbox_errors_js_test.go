//go:build js && wasm && !tabfence_core

package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
)

// The page runtime's error names are among outboxErrorNames', which
// TestDTSMatchesGo checks against the d.ts natively (the runtime's errors
// build in the browser only), and obErr gives each its name.
func TestRuntimeErrorNamesAreListed(t *testing.T) {
	var listed []string
	for _, m := range outboxErrorNames {
		listed = append(listed, m.name)
	}
	for _, m := range runtimeErrorNames {
		require.Contains(t, listed, m.name, "runtimeErrorNames has %q, which the d.ts check does not see", m.name)
		require.Equal(t, m.name, jsglue.NameOf(obErr(m.target)))
	}
	require.Equal(t, "NetworkError", jsglue.NameOf(obErr(outbox.ErrOffline)))
	require.Equal(t, "StaleOwnerError", jsglue.NameOf(obErr(outbox.ErrStepDown)))
}
