package digest

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSHA256MatchesCrypto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// Every length around the padding boundaries, then random sizes.
	for n := 0; n < 300; n++ {
		check(t, randomBytes(r, n))
	}
	for i := 0; i < 200; i++ {
		check(t, randomBytes(r, r.IntN(1<<16)))
	}
}

func TestSHA256KnownAnswer(t *testing.T) {
	got := SHA256([]byte("abc"))
	want := "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	require.Equal(t, want, hexs(got[:]), "sha256(abc)")
}

func FuzzSHA256(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("abc"))
	f.Add(make([]byte, 55))
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, p []byte) { check(t, p) })
}

func check(t *testing.T, p []byte) {
	t.Helper()
	got, want := SHA256(p), sha256.Sum256(p)
	require.Equal(t, want, got, "len %d: digest differs from crypto/sha256", len(p))
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func hexs(b []byte) string {
	const d = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, d[c>>4], d[c&15])
	}
	return string(out)
}
