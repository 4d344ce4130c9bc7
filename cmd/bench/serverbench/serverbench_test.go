package serverbench

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRun runs the full bench only when asked (it takes up to a minute).
func TestRun(t *testing.T) {
	if os.Getenv("TABFENCE_SERVERBENCH") == "" {
		t.Skip("set TABFENCE_SERVERBENCH=1 to run the server bench")
	}
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), &out, os.Getenv("TABFENCE_PG_URL")))
	t.Log("\n" + out.String())
	require.Contains(t, out.String(), "stale token", "table incomplete")
	require.Contains(t, out.String(), "batched POSTs", "batch table missing")
}

// TestAlone runs only the receiver-alone scenarios, when asked.
func TestAlone(t *testing.T) {
	if os.Getenv("TABFENCE_SERVERBENCH_ALONE") == "" {
		t.Skip("set TABFENCE_SERVERBENCH_ALONE=1 to run the receiver-alone bench")
	}
	var out bytes.Buffer
	require.NoError(t, RunAlone(context.Background(), &out, os.Getenv("TABFENCE_PG_URL")))
	t.Log("\n" + out.String())
}
