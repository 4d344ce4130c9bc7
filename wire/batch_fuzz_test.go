package wire

import (
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// Any document ParseBatchRequest accepts is written back by
// AppendBatchRequest into one it parses to the same mutations.
func FuzzParseBatchRequest(f *testing.F) {
	for _, s := range []string{`{"mutations":[]}`, `{"mutations":[{"key":"k","endpoint":"/n","id":"i","op":"o","entity":"e","payload":{"a":[1,"\u00e9"]}}]}`,
		`{"mutations":[{"key":"k","endpoint":"/n","payload":"te\"xt"},{"key":"j","endpoint":"/n","payload":-0.5e+3}]}`, `{"x":[{}],"mutations":[{"key":"k","endpoint":"/n"}]}`} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, doc []byte, maxN int) {
		ms, err := ParseBatchRequest(doc, maxN)
		if err != nil {
			if !errors.Is(err, ErrBatchMalformed) && !errors.Is(err, ErrBatchTooLarge) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		require.LessOrEqual(t, len(ms), max(maxN, 0))
		again, err := ParseBatchRequest(AppendBatchRequest(nil, ms), len(ms))
		require.NoError(t, err)
		require.Equal(t, len(ms), len(again))
		for i := range ms {
			require.True(t, ValidKey(ms[i].Key))
			require.Equal(t, ms[i].Key, again[i].Key)
			require.Equal(t, ms[i].OperationID, again[i].OperationID)
			require.Equal(t, ms[i].Operation, again[i].Operation)
			require.Equal(t, ms[i].Entity, again[i].Entity)
			require.Equal(t, string(ms[i].Payload), string(again[i].Payload))
		}
	})
}

// Any mutation round-trips: its strings and payload come back as they were
// (when they are UTF-8; invalid bytes become U+FFFD).
func FuzzBatchRoundTrip(f *testing.F) {
	f.Add("k", "id", "put", "note:1", []byte(`{"a":1}`), 201, []byte("made"), int64(3))
	f.Add("k", "", "", "", []byte(" \"x\" "), 0, []byte{}, int64(0))
	f.Fuzz(func(t *testing.T, key, id, op, entity string, payload []byte, status int, body []byte, retry int64) {
		if !ValidKey(key) || !utf8.ValidString(id) || !utf8.ValidString(op) || !utf8.ValidString(entity) || !utf8.Valid(payload) || !utf8.Valid(body) ||
			status < 0 || status > maxStatus {
			return
		}
		ms, err := ParseBatchRequest(AppendBatchRequest(nil, []BatchMutation{{key, "/n", id, op, entity, payload}}), 1)
		require.NoError(t, err)
		require.Equal(t, BatchMutation{key, "/n", id, op, entity, nonEmpty(payload)}, nonEmptyPayload(ms[0]))
		r := BatchResult{Key: key, Outcome: BatchRetry, Status: status, Body: body, Problem: op, RetryAfter: time.Duration(retry)}
		rs, err := ParseBatchResponse(AppendBatchResponse(nil, []BatchResult{r}), []string{key})
		require.NoError(t, err)
		require.Equal(t, string(body), string(rs[0].Body))
		require.Equal(t, status, rs[0].Status)
		require.Equal(t, op, rs[0].Problem)
		want := time.Duration(0)
		if retry > 0 { // whole seconds, rounded up, at most MaxRetryAfter
			want = (min(time.Duration(retry), MaxRetryAfter) + time.Second - 1) / time.Second * time.Second
		}
		require.Equal(t, want, rs[0].RetryAfter)
	})
}

func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func nonEmptyPayload(m BatchMutation) BatchMutation { m.Payload = nonEmpty(m.Payload); return m }
