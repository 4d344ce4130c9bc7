//go:build e2e

package browserbench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// go test -tags e2e -run TestFenceFigures -v ./cmd/bench/browserbench
// prints issue 3's figures alone (make build first).
func TestFenceFigures(t *testing.T) {
	dist := filepath.Join("..", "..", "..", "dist")
	if err := RunFence(context.Background(), os.Stdout, dist); err != nil {
		t.Fatal(err)
	}
}
