package pgstore_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/pgstore"
	"github.com/tabfence/tabfence/receiver/pgstore/pgtest"
	"github.com/tabfence/tabfence/wire"
)

// itemsServer is a receiver over a fresh schema with an items table whose
// qty is an INT4, for handlers whose argument pgx cannot encode.
func itemsServer(t *testing.T, h receiver.Handler) *httptest.Server {
	ctx := context.Background()
	st, err := pgstore.Open(ctx, pgtest.SchemaURL(t), 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	tx, err := st.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `CREATE TABLE items (name TEXT PRIMARY KEY, qty INT4 NOT NULL)`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	rc := receiver.New(st, receiver.Options{Scope: func(*http.Request) (string, error) { return "u", nil }})
	mux := http.NewServeMux()
	mux.Handle("POST /x", rc.Handle(h))
	mux.Handle("POST /x/batch", rc.HandleBatch(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// insertItem inserts the request's key with a qty pgx cannot encode into
// INT4 when the payload is "big", and maps the insert's error to a 422.
func insertItem(ctx context.Context, tx receiver.Tx, r *receiver.Request) (receiver.Response, error) {
	qty := int64(1)
	if string(r.Body) == `"big"` {
		qty = 3_000_000_000
	}
	if _, err := tx.Exec(ctx, `INSERT INTO items (name, qty) VALUES ($1, $2)`, r.Key, qty); err != nil {
		return receiver.Response{Status: 422, Body: []byte(`{"error":"qty out of range"}`)}, nil
	}
	return receiver.Response{Status: 201, Body: []byte(`{"ok":true}`)}, nil
}

func post(t *testing.T, url, key string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(wire.HeaderIdempotencyKey, key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// An argument pgx refuses to encode is the handler's error to answer: a
// single request's 422 is stored and replayed, not a 500 on every send
// (the connection and its transaction stay usable).
func TestEncodeErrorSingle(t *testing.T) {
	srv := itemsServer(t, insertItem)
	for i := 0; i < 2; i++ {
		status, body := post(t, srv.URL+"/x", "k1", []byte(`"big"`))
		require.Equal(t, 422, status, "attempt %d: body %s", i, body)
	}
}

// In a batch, the mutation whose argument cannot be encoded is its own 422;
// the others are applied, and a resend replays all three.
func TestEncodeErrorBatch(t *testing.T) {
	srv := itemsServer(t, insertItem)
	ms := []wire.BatchMutation{
		{Key: "a", Endpoint: "/x", Operation: "put", Entity: "e1", Payload: []byte(`1`)},
		{Key: "b", Endpoint: "/x", Operation: "put", Entity: "e2", Payload: []byte(`"big"`)},
		{Key: "c", Endpoint: "/x", Operation: "put", Entity: "e3", Payload: []byte(`1`)},
	}
	want := []wire.BatchOutcome{wire.BatchApplied, wire.BatchRejected, wire.BatchApplied}
	for i := 0; i < 2; i++ {
		status, body := post(t, srv.URL+"/x/batch", "", wire.AppendBatchRequest(nil, ms))
		require.Equal(t, 200, status, "send %d: body %s", i, body)
		rs, err := wire.ParseBatchResponse([]byte(body), []string{"a", "b", "c"})
		require.NoError(t, err)
		for j, r := range rs {
			o := want[j]
			if i > 0 {
				o = wire.BatchReplayed
			}
			require.Equal(t, o, r.Outcome, "send %d, %s: %+v", i, r.Key, r)
		}
		require.Equal(t, 422, rs[1].Status, "send %d: b's status", i)
	}
}
