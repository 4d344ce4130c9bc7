package harness

import (
	"errors"
	"os"
	"path/filepath"
)

// CheckDist reports whether distDir holds a built runtime, with a clear
// message when it was not built.
func CheckDist(distDir string) error {
	for _, f := range []string{"tabfence.wasm", "wasm_exec.js", "tabfence.js"} {
		if _, err := os.Stat(filepath.Join(distDir, f)); err != nil {
			return errors.New("harness: " + filepath.Join(distDir, f) + " is missing: run `make build` first")
		}
	}
	return nil
}
