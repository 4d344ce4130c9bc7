//go:build !(js && wasm)

package channel

import (
	"os"
	"strings"
	"testing"
)

func TestLoaderFastPathInSync(t *testing.T) {
	b, err := os.ReadFile("../jsglue/loader/tabfence.js")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "const FAST = "+loaderFastPath+"\n") {
		t.Fatal("loaderFastPath differs from FAST in jsglue/loader/tabfence.js: copy it again")
	}
}
