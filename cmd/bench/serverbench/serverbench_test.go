package serverbench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestRun runs the full bench only when asked (it takes up to a minute).
func TestRun(t *testing.T) {
	if os.Getenv("TABFENCE_SERVERBENCH") == "" {
		t.Skip("set TABFENCE_SERVERBENCH=1 to run the server bench")
	}
	var out bytes.Buffer
	if err := Run(context.Background(), &out, os.Getenv("TABFENCE_PG_URL")); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if !strings.Contains(out.String(), "stale token") {
		t.Fatal("table incomplete")
	}
}
