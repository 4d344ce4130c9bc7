package wire

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The hand-written HTTP-date parser must accept exactly what time.Parse
// accepted with the three RFC 9110 layouts it replaced, and yield the same
// instant. These tests hold it to that on the native toolchain.

var timeParseLayouts = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",  // IMF-fixdate
	"Monday, 02-Jan-06 15:04:05 GMT", // obsolete RFC 850
	"Mon Jan _2 15:04:05 2006",       // ANSI C asctime
}

// parseHTTPDateStd is the previous implementation: the reference.
func parseHTTPDateStd(v string) (time.Time, bool) {
	for _, layout := range timeParseLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// parseRetryAfterStd is the previous ParseRetryAfter (strconv and
// time.Parse).
func parseRetryAfterStd(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if isDigits(v) {
				return MaxRetryAfter, true
			}
			return 0, false
		}
		if n > uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, ok := parseHTTPDateStd(v)
	if !ok {
		return 0, false
	}
	d := t.Sub(now)
	return min(max(d, 0), MaxRetryAfter), true
}

// parseTokenStd is the previous ParseToken (strconv).
func parseTokenStd(v string) (uint64, error) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 16 || v[0] == '0' || !isDigits(v) {
		return 0, ErrTokenMalformed
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > MaxToken {
		return 0, ErrTokenMalformed
	}
	return n, nil
}

var delayCases = []string{
	"0", "00", "000000000000000000000000000001", "86400", "086400", "86401", "9999999999999999999",
	"18446744073709551615", "18446744073709551616", "99999999999999999999999", "1_0", "1e3", "12abc",
	"1.5", "1 2", "+1", "5 ", " 5", "\t7\n", "0x10", "9007199254740991", "9007199254740992",
	"1234567890123456", "12345678901234567", "0001", "\u00a01",
}

func TestParseTokenMatchesStrconv(t *testing.T) {
	for _, v := range delayCases {
		got, gerr := ParseToken(v)
		want, werr := parseTokenStd(v)
		if got != want || gerr != werr {
			t.Errorf("ParseToken(%q) = %d, %v; before: %d, %v", v, got, gerr, want, werr)
		}
	}
}

func checkHTTPDate(t *testing.T, v string) {
	t.Helper()
	want, wok := parseHTTPDateStd(v)
	got, gok := parseHTTPDate(v)
	if gok != wok || !got.Equal(want) || got.Location() != want.Location() {
		t.Fatalf("parseHTTPDate(%q) = %v, %v; time.Parse gives %v, %v", v, got, gok, want, wok)
	}
}

var httpDateCases = []string{
	// The three forms, and each in the others' shape.
	"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
	"Sun Nov 6 08:49:37 1994", "Sun Nov 06 08:49:37 1994", "Sun Nov 16 08:49:37 1994",
	"Sun, 06-Nov-94 08:49:37 GMT", "Sunday, 06 Nov 1994 08:49:37 GMT", "Sun Nov  6 08:49:37 1994 GMT",
	// Case, weekday not checked against the date, unknown names.
	"sUN, 06 nOV 1994 08:49:37 GMT", "Mon, 06 Nov 1994 08:49:37 GMT", "Xyz, 06 Nov 1994 08:49:37 GMT",
	"Sun, 06 Nvo 1994 08:49:37 GMT", "SUNDAY, 06-NOV-94 08:49:37 GMT", "Sunda, 06-Nov-94 08:49:37 GMT",
	"Sun, 06 Nov 1994 08:49:37 gmt", "Sun, 06 Nov 1994 08:49:37 UTC", "S\xf5n, 06 Nov 1994 08:49:37 GMT",
	"Sun, 06 Nov 1994 08:49:37 GMTX", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 ",
	"Wednesday, 06-Nov-94 08:49:37 GMT", "Wednes, 06-Nov-94 08:49:37 GMT", "Sat, 31 Dec 9999 23:59:59 GMT",
	// Spaces: a layout space matches a run.
	"Sun,   06   Nov   1994   08:49:37   GMT", "Sun,06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37GMT",
	"Sun Nov    6    8:49:37    1994", "Sun  Nov 6 08:49:37 1994", "Sun,\t06 Nov 1994 08:49:37 GMT",
	// Digits: one-digit hour, fixed minutes/seconds/day.
	"Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:9:37 GMT",
	"Sun, 06 Nov 1994 08:49:7 GMT", "Sun, 06 Nov 94 08:49:37 GMT", "Sun, 06 Nov 19945 08:49:37 GMT",
	"Sun, 06 Nov 199a 08:49:37 GMT", "Sun, 06 Nov +994 08:49:37 GMT", "Sun, 06 Nov 0000 08:49:37 GMT",
	"Sun, 006 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 008:49:37 GMT", "Sun Nov 123 08:49:37 1994",
	// Ranges.
	"Sun, 06 Nov 1994 23:59:59 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
	"Sun, 06 Nov 1994 08:49:60 GMT", "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 31 Nov 1994 08:49:37 GMT",
	"Sun, 30 Nov 1994 08:49:37 GMT", "Sun, 31 Dec 1994 08:49:37 GMT", "Sun, 32 Dec 1994 08:49:37 GMT",
	"Sun, 29 Feb 2000 08:49:37 GMT", "Sun, 29 Feb 1900 08:49:37 GMT", "Sun, 29 Feb 2024 08:49:37 GMT",
	"Sun, 29 Feb 2023 08:49:37 GMT", "Sun, 28 Feb 2023 08:49:37 GMT", "Sun, 29 Feb 0000 08:49:37 GMT",
	"Sunday, 29-Feb-00 08:49:37 GMT", "Sunday, 29-Feb--4 08:49:37 GMT", "Sunday, 29-Feb--4 08:49:37 GMT",
	// RFC 850 two-character years, signs included.
	"Sunday, 06-Nov-68 08:49:37 GMT", "Sunday, 06-Nov-69 08:49:37 GMT", "Sunday, 06-Nov-00 08:49:37 GMT",
	"Sunday, 06-Nov-+5 08:49:37 GMT", "Sunday, 06-Nov--5 08:49:37 GMT", "Sunday, 06-Nov--0 08:49:37 GMT",
	"Sunday, 06-Nov-+a 08:49:37 GMT", "Sunday, 06-Nov-5 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT",
	"Sunday, 06-Nov-- 08:49:37 GMT", "Sunday, 06-Nov-++ 08:49:37 GMT", "Sunday, 06-Nov- 5 08:49:37 GMT",
	// Fractional seconds the layouts do not name.
	"Sun, 06 Nov 1994 08:49:37.5 GMT", "Sun, 06 Nov 1994 08:49:37,25 GMT", "Sun, 06 Nov 1994 08:49:37. GMT",
	"Sun, 06 Nov 1994 08:49:37.123456789 GMT", "Sun, 06 Nov 1994 08:49:37.1234567891234 GMT",
	"Sun, 06 Nov 1994 08:49:37.0000000009 GMT", "Sun Nov  6 08:49:37.999 1994", "Sun Nov  6 08:49:37.5x 1994",
	"Sun, 06 Nov 1994 08:49:37.5.5 GMT", "Sun, 06 Nov 1994 08:49:37..5 GMT", "Sunday, 06-Nov-94 08:49:37,9 GMT",
	// Calendar edges (days are counted by hand, not by time.Date).
	"Sat, 01 Jan 0000 00:00:00 GMT", "Sat, 29 Feb 0000 23:59:59 GMT", "Sat, 01 Mar 0000 00:00:00 GMT",
	"Sat, 31 Dec 0000 12:00:00 GMT", "Thu, 01 Jan 1970 00:00:00 GMT", "Wed, 31 Dec 1969 23:59:59 GMT",
	"Sat, 01 Mar 1600 00:00:00 GMT", "Sat, 29 Feb 1600 00:00:00 GMT", "Sat, 01 Jan 0001 00:00:00 GMT",
	"Sunday, 29-Feb-68 08:49:37 GMT", "Sunday, 01-Mar--9 08:49:37 GMT", "Sunday, 28-Feb-69 08:49:37 GMT",
	// Truncations.
	"", "S", "Sun", "Sun,", "Sun, ", "Sun, 0", "Sun, 06 No", "Sun Nov", "Sun Nov ", "Sun Nov  6 08:49:37",
	"Sun Nov  6 08:49:37 199", "Sunday", "Sunday,", "Sunday, 06-Nov-9", "Sunday, 06-Nov-94 08:49:37 GM",
}

func TestParseHTTPDateMatchesTimeParse(t *testing.T) {
	for _, v := range httpDateCases {
		checkHTTPDate(t, v)
	}
	// Every day of a leap and a common year, in all three forms, at times
	// spread over the day.
	for _, y := range []int{0, 1, 399, 400, 1600, 1969, 1970, 1999, 2000, 2024, 2100, 9999} {
		for d := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() == y; d = d.Add(25*time.Hour + 61*time.Second) {
			for _, layout := range timeParseLayouts {
				checkHTTPDate(t, d.Format(layout))
			}
		}
	}
}

func TestParseRetryAfterDatesMatchTimeParse(t *testing.T) {
	nows := []time.Time{
		time.Date(1994, 11, 6, 8, 49, 36, 500, time.UTC),
		time.Date(1994, 11, 5, 8, 49, 37, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)),
		time.Now(), // with a monotonic reading
		time.Unix(-1<<62, 0), time.Unix(1<<62, 0),
	}
	for _, now := range nows {
		for _, v := range append(httpDateCases, delayCases...) {
			want, wok := parseRetryAfterStd(v, now)
			got, gok := ParseRetryAfter(v, now)
			require.Equal(t, want, got, "ParseRetryAfter(%q, %v)", v, now)
			require.Equal(t, wok, gok, "ParseRetryAfter(%q, %v)", v, now)
		}
	}
}

// FuzzParseHTTPDate compares the hand parser with time.Parse on arbitrary
// input; the seeds are date-shaped so mutations stay near the grammar.
func FuzzParseHTTPDate(f *testing.F) {
	for _, v := range httpDateCases {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		checkHTTPDate(t, v)
	})
}

// FuzzParseRetryAfterMatchesStd holds the whole of ParseRetryAfter (both
// forms) and ParseToken to their strconv/time.Parse versions.
func FuzzParseRetryAfterMatchesStd(f *testing.F) {
	for _, v := range append(httpDateCases, delayCases...) {
		f.Add(v, int64(784111777))
	}
	f.Fuzz(func(t *testing.T, v string, nowUnix int64) {
		now := time.Unix(nowUnix, 0)
		want, wok := parseRetryAfterStd(v, now)
		got, gok := ParseRetryAfter(v, now)
		require.Equal(t, want, got, "ParseRetryAfter(%q, %v)", v, now)
		require.Equal(t, wok, gok, "ParseRetryAfter(%q, %v)", v, now)
		tg, eg := ParseToken(v)
		tw, ew := parseTokenStd(v)
		if tg != tw || eg != ew {
			t.Fatalf("ParseToken(%q) = %d, %v; before: %d, %v", v, tg, eg, tw, ew)
		}
	})
}
