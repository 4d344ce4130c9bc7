package server_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/wire"
)

// POST /api/notes/batch runs the notes handler once per mutation: a new
// note, an invalid one (422, and its entity's next mutation not attempted),
// another entity's; resent, the batch is replayed and counts no effect.
func TestDemoNotesBatch(t *testing.T) {
	hs, _ := newServer(t, filepath.Join(t.TempDir(), "demo.db"))
	ms := []wire.BatchMutation{
		{Endpoint: "/api/notes", Key: "b1", Operation: "put", Entity: "note:a", Payload: []byte(`{"id":"a","text":"one"}`)},
		{Endpoint: "/api/notes", Key: "b2", Operation: "put", Entity: "note:b", Payload: []byte(`{"text":"no id"}`)},
		{Endpoint: "/api/notes", Key: "b3", Operation: "put", Entity: "note:b", Payload: []byte(`{"id":"b","text":"two"}`)},
		{Endpoint: "/api/notes", Key: "b4", Operation: "put", Entity: "note:c", Payload: []byte(`{"id":"c","text":"three"}`)},
	}
	keys := []string{"b1", "b2", "b3", "b4"}
	for _, want := range []wire.BatchOutcome{wire.BatchApplied, wire.BatchReplayed} {
		resp, b := call(t, "POST", hs.URL+"/api/notes/batch", "ann", "", string(wire.AppendBatchRequest(nil, ms)))
		require.Equal(t, 200, resp.StatusCode, "%s", b)
		rs, err := wire.ParseBatchResponse(b, keys)
		require.NoError(t, err, "%s", b)
		require.Equal(t, want, rs[0].Outcome)
		require.Equal(t, 201, rs[0].Status)
		require.JSONEq(t, `{"id":"a","text":"one","effects":1,"user":"ann"}`, string(rs[0].Body))
		require.Equal(t, 422, rs[1].Status)
		require.Equal(t, wire.BatchNotAttempted, rs[2].Outcome)
		require.Equal(t, want, rs[3].Outcome)
		require.Equal(t, int64(2), effects(t, hs.URL))
	}
	resp, _ := call(t, "POST", hs.URL+"/api/notes/batch", "", "", string(wire.AppendBatchRequest(nil, ms)))
	require.Equal(t, 401, resp.StatusCode)
}
