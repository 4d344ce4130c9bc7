package loader

import (
	"strings"
	"testing"
)

func TestFastPathIsTheLoadersObject(t *testing.T) {
	f := FastPath()
	if !strings.HasPrefix(f, "(() => {") || !strings.HasSuffix(f, "})()") {
		t.Fatalf("FAST not found in tabfence.js: %.80q", f)
	}
	for _, m := range []string{"attach(", "rx(", "poster(", "post(", "deliver(", "enqueuer(", "appends("} {
		if !strings.Contains(f, m) {
			t.Errorf("FAST lacks %s", m)
		}
	}
}
