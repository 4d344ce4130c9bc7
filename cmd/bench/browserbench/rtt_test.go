//go:build e2e

package browserbench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TABFENCE_RTT_N=500 TABFENCE_RTT_ROUNDS=3 TABFENCE_RTT_DIAG=1 \
// go test -tags e2e -run TestChannelRTT -v ./cmd/bench/browserbench
// measures the channel round trip alone (make build first; TABFENCE_DIST
// overrides the dist directory).
func TestChannelRTT(t *testing.T) {
	dist := os.Getenv("TABFENCE_DIST")
	if dist == "" {
		dist = filepath.Join("..", "..", "..", "dist")
	}
	n, rounds := envInt("TABFENCE_RTT_N", 400), envInt("TABFENCE_RTT_ROUNDS", 3)
	if err := RunChannelRTT(context.Background(), os.Stdout, dist, n, rounds, os.Getenv("TABFENCE_RTT_DIAG") != ""); err != nil {
		t.Fatal(err)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
