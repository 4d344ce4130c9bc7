package wire

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBatchRequestRoundTrip(t *testing.T) {
	ms := []BatchMutation{
		{Key: "k1", Endpoint: "/n", OperationID: "op-1", Operation: "put", Entity: "note:1", Payload: []byte(`{"id":"1","text":"a \"b\" é"}`)},
		{Key: "k2", Endpoint: "/n", Operation: "del", Entity: "note:1"},                            // no payload
		{Key: "k3", Endpoint: "/n", Entity: "x", Payload: []byte("plain text\n\x01")},              // not JSON: travels as a string
		{Key: "k4", Endpoint: "/n", Entity: "x", Payload: []byte(`"a JSON string"`)},               // a JSON string: travels as its text
		{Key: "k5", Endpoint: "/n", Entity: "x", Payload: []byte(` {"padded": true} `)},            // white space is kept too
		{Key: "k6", Endpoint: "/n", Entity: "x", Payload: []byte(`[1,-2.5e3,true,false,null,{}]`)}, // embedded as is
	}
	doc := AppendBatchRequest(nil, ms)
	require.True(t, json.Valid(doc), "%s", doc)
	require.Contains(t, string(doc), `"payload":{"id":"1"`, "a JSON payload is embedded as is")
	got, err := ParseBatchRequest(doc, 10)
	require.NoError(t, err)
	require.Len(t, got, len(ms))
	for i := range ms {
		require.Equal(t, ms[i].Key, got[i].Key)
		require.Equal(t, ms[i].Endpoint, got[i].Endpoint)
		require.Equal(t, ms[i].OperationID, got[i].OperationID)
		require.Equal(t, ms[i].Operation, got[i].Operation)
		require.Equal(t, ms[i].Entity, got[i].Entity)
		require.Equal(t, string(ms[i].Payload), string(got[i].Payload), "payload %d", i)
	}
}

func TestBatchResponseRoundTrip(t *testing.T) {
	rs := []BatchResult{
		{Key: "a", Outcome: BatchApplied, Status: 201, Body: []byte(`{"ok":true}`)},
		{Key: "b", Outcome: BatchReplayed, Status: 200, Body: []byte("made")},
		{Key: "c", Outcome: BatchRejected, Status: 422, Body: []byte(`{"type":"x"}`), Problem: ProblemKeyReuse},
		{Key: "d", Outcome: BatchNotAttempted},
		{Key: "e", Outcome: BatchRetry, Status: 409, Problem: ProblemInFlight, RetryAfter: 3 * time.Second},
	}
	doc := AppendBatchResponse(nil, rs)
	require.True(t, json.Valid(doc), "%s", doc)
	got, err := ParseBatchResponse(doc, []string{"a", "b", "c", "d", "e"})
	require.NoError(t, err)
	for i := range rs {
		require.Equal(t, rs[i].Key, got[i].Key)
		require.Equal(t, rs[i].Outcome, got[i].Outcome)
		require.Equal(t, rs[i].Status, got[i].Status)
		require.Equal(t, string(rs[i].Body), string(got[i].Body))
		require.Equal(t, rs[i].Problem, got[i].Problem)
		require.Equal(t, rs[i].RetryAfter, got[i].RetryAfter)
	}
	// A fraction of a second is rounded up: never back before the server asked.
	doc = AppendBatchResponse(nil, []BatchResult{{Key: "a", Outcome: BatchRetry, Status: 503, RetryAfter: 1500 * time.Millisecond}})
	got, err = ParseBatchResponse(doc, []string{"a"})
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, got[0].RetryAfter)

	for _, keys := range [][]string{{"a", "b", "c", "d"}, {"a", "b", "c", "d", "e", "f"}, {"b", "a", "c", "d", "e"}} {
		_, err := ParseBatchResponse(AppendBatchResponse(nil, rs), keys)
		require.ErrorIs(t, err, ErrBatchMalformed, "a result per sent key, in order: %v", keys)
	}
}

func TestParseBatchRequestRefuses(t *testing.T) {
	deep := `{"mutations":[{"key":"k","endpoint":"/n","payload":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}]}`
	for _, doc := range []string{
		``, `null`, `[]`, `{}`, `{"mutations":{}}`, `{"mutations":[]} x`, `{"mutations":[],"mutations":[]}`,
		`{"mutations":[{}]}`,            // no key
		`{"mutations":[{"key":""}]}`,    // invalid key
		`{"mutations":[{"key":"a b"}]}`, // invalid key
		`{"mutations":[{"key":"k","endpoint":"/n"},{"key":"k","endpoint":"/n"}]}`, // a key twice
		`{"mutations":[{"key":"k"}]}`,                                    // no endpoint
		`{"mutations":[{"key":"k","endpoint":""}]}`,                      // empty endpoint
		`{"mutations":[{"key":"k","endpoint":"n"}]}`,                     // not a path
		`{"mutations":[{"key":"k","endpoint":"//evil/n"}]}`,              // another host
		`{"mutations":[{"key":"k","endpoint":"/a b"}]}`,                  // a space
		`{"mutations":[{"key":"k","endpoint":"/a#f"}]}`,                  // a fragment
		`{"mutations":[{"key":"k","endpoint":1}]}`,                       // not a string
		`{"mutations":[{"key":"k","endpoint":"/n","key":"j"}]}`,          // a member twice
		`{"mutations":[{"key":"k","endpoint":"/n","op":1}]}`,             // op not a string
		`{"mutations":[{"key":"k","endpoint":"/n","payload":tru}]}`,      // not a value
		`{"mutations":[{"key":"k","endpoint":"/n","payload":01}]}`,       // leading zero
		`{"mutations":[{"key":"k","endpoint":"/n","payload":"\ud800"}]}`, // lone surrogate
		`{"mutations":[{"key":"k","endpoint":"/n","payload":"\q"}]}`,     // unknown escape
		"{\"mutations\":[{\"key\":\"k\",\"endpoint\":\"/n\",\"op\":\"\xff\"}]}",
		"{\"mutations\":[{\"key\":\"k\",\"endpoint\":\"/n\",\"op\":\"a\nb\"}]}",
		`{"mutations":[{"key":"k"}`,
		deep,
	} {
		_, err := ParseBatchRequest([]byte(doc), 10)
		require.ErrorIs(t, err, ErrBatchMalformed, "%q", doc)
	}
	ok := `{"later":{"a":[1,2,{"b":null}]},"mutations":[{"key":"k","endpoint":"/n","payload":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `,"more":1}]}`
	ms, err := ParseBatchRequest([]byte(ok), 10)
	require.NoError(t, err, "unknown members are skipped; %d levels are fine", maxDepth)
	require.Len(t, ms, 1)

	three := AppendBatchRequest(nil, []BatchMutation{{Key: "a", Endpoint: "/n"}, {Key: "b", Endpoint: "/n"}, {Key: "c", Endpoint: "/n"}})
	_, err = ParseBatchRequest(three, 2)
	require.ErrorIs(t, err, ErrBatchTooLarge)
	ms, err = ParseBatchRequest(three, 3)
	require.NoError(t, err)
	require.Len(t, ms, 3)
}

// BatchSafe is exactly when a payload survives the batch document byte for
// byte: bytes that are not UTF-8 (a binary body) do not, in a string.
func TestBatchSafe(t *testing.T) {
	cases := map[string]bool{
		"":                     true,
		"plain text\n\x01":     true,
		`"a JSON string"`:      true,
		` {"padded": true} `:   true,
		`[1,-2.5e3,null]`:      true,
		"é€😀":                  true,
		"not UTF-8: \xff\xfe":  false,
		"\xc3":                 false, // a cut rune
		"\xed\xa0\x80":         false, // a surrogate half
		"\"\xff\"":             false,
		" [\"\xff\"] ":         false,
		"\x00\x01\x02\x80\x81": false,
	}
	for p, safe := range cases {
		require.Equal(t, safe, BatchSafe([]byte(p)), "%q", p)
		doc := AppendBatchRequest(nil, []BatchMutation{{Key: "k", Endpoint: "/n", Payload: []byte(p)}})
		got, err := ParseBatchRequest(doc, 1)
		require.NoError(t, err)
		require.Equal(t, safe, string(got[0].Payload) == p, "BatchSafe(%q) must say whether it round-trips", p)
	}
}

// FuzzBatchSafe: BatchSafe says true only of payloads that round-trip.
func FuzzBatchSafe(f *testing.F) {
	for _, p := range []string{"x", "\xff", `{"a":"\xff"}`, `"q"`, " 1 "} {
		f.Add([]byte(p))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		doc := AppendBatchRequest(nil, []BatchMutation{{Key: "k", Endpoint: "/n", Payload: p}})
		got, err := ParseBatchRequest(doc, 1)
		require.NoError(t, err)
		require.Equal(t, BatchSafe(p), string(got[0].Payload) == string(p), "%q", p)
	})
}

// A result's retryAfter beyond MaxRetryAfter, however many digits, is
// MaxRetryAfter (as a Retry-After header is read), not a malformed
// document that would turn batching off; a status no HTTP answer has is
// still refused.
func TestParseBatchResponseClampsRetryAfter(t *testing.T) {
	max := strconv.FormatInt(int64(MaxRetryAfter/time.Second), 10)
	for _, ra := range []string{max + "1", "99999999999999999999999999", max} {
		doc := `{"results":[{"key":"a","outcome":"retry","status":503,"retryAfter":` + ra + `}]}`
		rs, err := ParseBatchResponse([]byte(doc), []string{"a"})
		require.NoError(t, err, ra)
		require.Equal(t, MaxRetryAfter, rs[0].RetryAfter, ra)
	}
	for _, bad := range []string{`"retryAfter":-1`, `"retryAfter":01`, `"status":1000`} {
		doc := `{"results":[{"key":"a","outcome":"retry","status":503,` + bad + `}]}`
		if bad == `"status":1000` {
			doc = `{"results":[{"key":"a","outcome":"retry",` + bad + `}]}`
		}
		_, err := ParseBatchResponse([]byte(doc), []string{"a"})
		require.ErrorIs(t, err, ErrBatchMalformed, bad)
	}
}

// Any whole number of seconds, however long, parses, at most MaxRetryAfter.
func FuzzBatchResultRetryAfter(f *testing.F) {
	f.Add(uint64(3), uint8(0))
	f.Add(uint64(1<<63), uint8(30))
	f.Fuzz(func(t *testing.T, n uint64, extra uint8) {
		digits := strconv.FormatUint(n, 10)
		if n != 0 {
			digits += strings.Repeat("9", int(extra%40))
		}
		doc := `{"results":[{"key":"a","outcome":"retry","status":503,"retryAfter":` + digits + `}]}`
		rs, err := ParseBatchResponse([]byte(doc), []string{"a"})
		require.NoError(t, err)
		require.LessOrEqual(t, rs[0].RetryAfter, MaxRetryAfter)
		if n >= uint64(MaxRetryAfter/time.Second) || len(digits) > 19 {
			require.Equal(t, MaxRetryAfter, rs[0].RetryAfter)
		}
	})
}
