package randid

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHexMatchesEncodingHex(t *testing.T) {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	got, want := Hex(b), hex.EncodeToString(b)
	require.Equal(t, want, got, "Hex differs from encoding/hex")
	require.Equal(t, "", Hex(nil), "Hex(nil) must be empty")
}

func TestNewIsUniqueAndWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 10000; i++ {
		id := New()
		require.Len(t, id, 32, "len")
		_, err := hex.DecodeString(id)
		require.NoError(t, err)
		require.False(t, seen[id], "duplicate id")
		seen[id] = true
	}
}
