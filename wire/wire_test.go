package wire

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseIdempotencyKey(t *testing.T) {
	for _, c := range []struct {
		in, want string
		err      error
	}{
		{"abc", "abc", nil},
		{`"abc"`, "abc", nil},
		{"  abc\t", "abc", nil},
		{` "8c0c6c2e-52aa-4f46" `, "8c0c6c2e-52aa-4f46", nil},
		{"", "", ErrKeyMissing},
		{"   ", "", ErrKeyMissing},
		{`"`, "", ErrKeyMalformed},
		{`""`, "", ErrKeyMalformed},
		{`"abc`, "", ErrKeyMalformed},
		{`abc"`, "", ErrKeyMalformed},
		{`"a"b"`, "", ErrKeyMalformed},
		{`a\b`, "", ErrKeyMalformed},
		{"a b", "", ErrKeyMalformed},
		{"a\x00b", "", ErrKeyMalformed},
		{"é", "", ErrKeyMalformed},
		{strings.Repeat("k", MaxKeyLen), strings.Repeat("k", MaxKeyLen), nil},
		{`"` + strings.Repeat("k", MaxKeyLen) + `"`, strings.Repeat("k", MaxKeyLen), nil},
		{strings.Repeat("k", MaxKeyLen+1), "", ErrKeyMalformed},
	} {
		got, err := ParseIdempotencyKey(c.in)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("ParseIdempotencyKey(%q) = %q, %v; want %q, %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestFormatIdempotencyKeyRoundTrip(t *testing.T) {
	k := "5fdc6c3f-52aa-4f46-b971-6d53e4c48f68"
	got, err := ParseIdempotencyKey(FormatIdempotencyKey(k))
	require.Equal(t, k, got, "round trip")
	require.NoError(t, err, "round trip")
}

func TestValidResource(t *testing.T) {
	for _, r := range []string{"a", "doc:1", "offline-queue/user@example.com", "A_b.c", strings.Repeat("r", MaxResourceLen)} {
		assert.True(t, ValidResource(r), "ValidResource(%q) = false", r)
	}
	for _, r := range []string{"", "a b", "a\nb", `a"b`, "é", "a%20", strings.Repeat("r", MaxResourceLen+1)} {
		assert.False(t, ValidResource(r), "ValidResource(%q) = true", r)
	}
}

func TestParseToken(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"1", 1, true}, {" 42 ", 42, true}, {"9007199254740991", MaxToken, true},
		{"9007199254740992", 0, false}, {"0", 0, false}, {"01", 0, false}, {"-1", 0, false},
		{"+1", 0, false}, {"1.0", 0, false}, {"1e3", 0, false}, {"", 0, false}, {"0x10", 0, false},
		{"18446744073709551616", 0, false}, {"99999999999999999", 0, false},
	} {
		got, err := ParseToken(c.in)
		if got != c.want || (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrTokenMalformed)) {
			t.Errorf("ParseToken(%q) = %d, %v", c.in, got, err)
		}
	}
	got, _ := ParseToken(FormatToken(MaxToken))
	require.Equal(t, uint64(MaxToken), got, "FormatToken round trip")
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{" 5 ", 5 * time.Second, true},
		{"86401", MaxRetryAfter, true},
		{"99999999999999999999999", MaxRetryAfter, true},
		{"Fri, 02 Jan 2026 03:05:05 GMT", time.Minute, true},
		{"Friday, 02-Jan-26 03:05:05 GMT", time.Minute, true},
		{"Fri Jan  2 03:05:05 2026", time.Minute, true},
		{"Thu, 01 Jan 2026 00:00:00 GMT", 0, true},
		{"Fri, 01 Jan 2100 00:00:00 GMT", MaxRetryAfter, true},
		{"", 0, false}, {"-1", 0, false}, {"1.5", 0, false}, {"12abc", 0, false}, {"soon", 0, false},
		{"Fri, 02 Jan 2026 03:05:05 PST", 0, false},
	} {
		got, ok := ParseRetryAfter(c.in, now)
		assert.Equal(t, c.want, got, "ParseRetryAfter(%q)", c.in)
		assert.Equal(t, c.ok, ok, "ParseRetryAfter(%q)", c.in)
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		status  int
		highest bool
		want    Outcome
	}{
		{0, false, OutcomeRetry}, {200, false, OutcomeAck}, {201, false, OutcomeAck}, {401, false, OutcomeAuth},
		{409, true, OutcomeStale}, {409, false, OutcomeConflict}, {408, false, OutcomeRetry}, {425, false, OutcomeRetry},
		{429, false, OutcomeRetry}, {500, false, OutcomeRetry}, {503, false, OutcomeRetry}, {400, false, OutcomeTerminal},
		{413, false, OutcomeTerminal}, {422, false, OutcomeTerminal}, {404, false, OutcomeTerminal},
	} {
		assert.Equal(t, c.want, Classify(c.status, c.highest), "Classify(%d, %v)", c.status, c.highest)
	}
	require.Equal(t, "unknown", Outcome(0).String(), "Outcome.String")
	require.Equal(t, "stale", OutcomeStale.String(), "Outcome.String")
}
