package randid

import (
	"encoding/hex"
	"testing"
)

func TestHexMatchesEncodingHex(t *testing.T) {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	if got, want := Hex(b), hex.EncodeToString(b); got != want {
		t.Fatalf("Hex differs from encoding/hex")
	}
	if Hex(nil) != "" {
		t.Fatal("Hex(nil) must be empty")
	}
}

func TestNewIsUniqueAndWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 10000; i++ {
		id := New()
		if len(id) != 32 {
			t.Fatalf("len %d", len(id))
		}
		if _, err := hex.DecodeString(id); err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatal("duplicate id")
		}
		seen[id] = true
	}
}
