package wire

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Seeds live in testdata/fuzz/<FuzzName>/ as well as here.

func FuzzParseIdempotencyKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"`, `""`, " \"a\" ", `a\b`, "\x00", strings.Repeat("k", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		k, err := ParseIdempotencyKey(v)
		if err != nil {
			if !errors.Is(err, ErrKeyMissing) && !errors.Is(err, ErrKeyMalformed) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		require.True(t, ValidKey(k), "accepted invalid key %q from %q", k, v)
		// Both encodings of an accepted key parse to the same key.
		k2, err := ParseIdempotencyKey(FormatIdempotencyKey(k))
		require.NoError(t, err, "sf-string form of %q parses to %q", k, k2)
		require.Equal(t, k, k2, "sf-string form of %q parses to %q", k, k2)
		k3, err := ParseIdempotencyKey(k)
		require.NoError(t, err, "bare form of %q parses to %q", k, k3)
		require.Equal(t, k, k3, "bare form of %q parses to %q", k, k3)
	})
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "9007199254740991", "9007199254740992", "0", "01", "-1", " 7 ", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := ParseToken(v)
		if err != nil {
			require.ErrorIs(t, err, ErrTokenMalformed, "ParseToken(%q)", v)
			require.Equal(t, uint64(0), n, "ParseToken(%q)", v)
			return
		}
		require.GreaterOrEqual(t, n, uint64(1), "token %d out of range", n)
		require.LessOrEqual(t, n, uint64(MaxToken), "token %d out of range", n)
		require.Equal(t, strings.TrimSpace(v), FormatToken(n), "%q is not canonical for %d", v, n)
		m, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		require.NoError(t, err, "disagrees with strconv: %d vs %d", n, m)
		require.Equal(t, n, m, "disagrees with strconv: %d vs %d", n, m)
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "99999999999999999999", "Fri, 02 Jan 2026 03:05:05 GMT",
		"Friday, 02-Jan-26 03:05:05 GMT", "Fri Jan  2 03:05:05 2026", "-1", "soon"} {
		f.Add(s, int64(1767323045))
	}
	f.Fuzz(func(t *testing.T, v string, nowUnix int64) {
		d, ok := ParseRetryAfter(v, time.Unix(nowUnix, 0))
		require.GreaterOrEqual(t, d, time.Duration(0), "ParseRetryAfter(%q) = %v out of range", v, d)
		require.LessOrEqual(t, d, MaxRetryAfter, "ParseRetryAfter(%q) = %v out of range", v, d)
		if !ok && d != 0 {
			t.Fatalf("not ok but %v", d)
		}
	})
}

func FuzzValidResource(f *testing.F) {
	for _, s := range []string{"doc:1", "a/b@c", "", "a b", strings.Repeat("r", 201), "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, r string) {
		if !ValidResource(r) {
			return
		}
		require.NotEqual(t, 0, len(r), "accepted %q", r)
		require.LessOrEqual(t, len(r), MaxResourceLen, "accepted %q", r)
		require.False(t, strings.ContainsAny(r, " \t\r\n\"'\\%?#,;"), "accepted %q", r)
		for _, c := range []byte(r) {
			require.GreaterOrEqual(t, c, byte(0x21), "accepted non-printable byte in %q", r)
			require.LessOrEqual(t, c, byte(0x7e), "accepted non-printable byte in %q", r)
		}
	})
}
