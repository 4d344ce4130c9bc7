package conformance

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/wire"
)

// breq is one test batch.
type breq struct {
	user, resource, token string
	muts                  []wire.BatchMutation
}

// mut is one mutation of a test batch; body is the handler's command. Its
// endpoint is the single route's, so it is the mutation a single request
// with its key and body is.
func mut(key, entity, body string) wire.BatchMutation {
	return wire.BatchMutation{Key: key, Endpoint: "/things", OperationID: "op-" + key, Operation: "put", Entity: entity, Payload: []byte(body)}
}

func keysOf(ms []wire.BatchMutation) []string {
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.Key
	}
	return keys
}

// batch sends q to the server and, when it answers 200, parses one result
// per mutation.
func (e *env) batch(q breq) (reply, []wire.BatchResult) {
	e.t.Helper()
	r, rs, err := e.tryBatch(e.srv.URL, q)
	require.NoError(e.t, err, "POST /things/batch")
	return r, rs
}

// wantBatch sends q and requires the 200 results document.
func (e *env) wantBatch(q breq) []wire.BatchResult {
	e.t.Helper()
	r, rs := e.batch(q)
	require.Equal(e.t, 200, r.status, "batch status %d, body %s", r.status, r.body)
	return rs
}

func (e *env) tryBatch(base string, q breq) (reply, []wire.BatchResult, error) {
	hr, err := http.NewRequest(http.MethodPost, base+"/things/batch", bytes.NewReader(wire.AppendBatchRequest(nil, q.muts)))
	if err != nil {
		return reply{}, nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if q.user != "" {
		hr.Header.Set(testUserHeader, q.user)
	}
	if q.resource != "" {
		hr.Header.Set(wire.HeaderResource, q.resource)
	}
	if q.token != "" {
		hr.Header.Set(wire.HeaderFencingToken, q.token)
	}
	resp, err := e.client.Do(hr)
	if err != nil {
		return reply{}, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, body: b}
	if err != nil || r.status != 200 {
		return r, nil, err
	}
	rs, err := wire.ParseBatchResponse(b, keysOf(q.muts))
	return r, rs, err
}

// effectsOf counts the committed handler runs of one key.
func (e *env) effectsOf(key string) int {
	e.t.Helper()
	var n int64
	err := e.store.View(context.Background(), func(q receiver.Tx) error {
		return q.QueryRow(context.Background(), `SELECT COUNT(*) FROM conf_effects WHERE idem_key = $1`, key).Scan(&n)
	})
	require.NoError(e.t, err, "count effects of %s", key)
	return int(n)
}

// finished counts the keys that have a finished (replayable) record.
func (e *env) finished() int {
	e.t.Helper()
	var n int64
	err := e.store.View(context.Background(), func(q receiver.Tx) error {
		return q.QueryRow(context.Background(), `SELECT COUNT(*) FROM tabfence_idempotency WHERE state = 2`).Scan(&n)
	})
	require.NoError(e.t, err, "count finished records")
	return int(n)
}

// wantOutcome checks one result's key, outcome and status.
func wantOutcome(t *testing.T, r wire.BatchResult, key string, o wire.BatchOutcome, status int) {
	t.Helper()
	require.Equal(t, key, r.Key, "result key")
	require.Equal(t, o, r.Outcome, "%s: outcome %q (status %d, body %s, problem %q), want %q", key, r.Outcome, r.Status, r.Body, r.Problem, o)
	require.Equal(t, status, r.Status, "%s: status %d (outcome %q, body %s), want %d", key, r.Status, r.Outcome, r.Body, status)
}

// errCrashed is the test handler's error once its process is dead.
var errCrashed = errors.New("conformance: process crashed")

// crashStore is the store as a process sees it that dies when env.crashed
// is set: from then on no statement, commit or new transaction of this
// process reaches the database (a transaction in progress is rolled back, as
// the database does when the connection of a dead process drops).
type crashStore struct {
	receiver.Store
	e *env
}

func (s *crashStore) Begin(ctx context.Context) (receiver.WriteTx, error) {
	if s.e.crashed.Load() {
		return nil, errCrashed
	}
	tx, err := s.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &crashTx{WriteTx: tx, e: s.e}, nil
}

func (s *crashStore) View(ctx context.Context, fn func(q receiver.Tx) error) error {
	if s.e.crashed.Load() {
		return errCrashed
	}
	return s.Store.View(ctx, fn)
}

type crashTx struct {
	receiver.WriteTx
	e *env
}

func (t *crashTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if t.e.crashed.Load() {
		return 0, errCrashed
	}
	return t.WriteTx.Exec(ctx, query, args...)
}

func (t *crashTx) QueryRow(ctx context.Context, query string, args ...any) receiver.Row {
	if t.e.crashed.Load() {
		return crashedRow{}
	}
	return t.WriteTx.QueryRow(ctx, query, args...)
}

func (t *crashTx) Query(ctx context.Context, query string, args ...any) (receiver.Rows, error) {
	if t.e.crashed.Load() {
		return nil, errCrashed
	}
	return t.WriteTx.Query(ctx, query, args...)
}

func (t *crashTx) Commit() error {
	if t.e.crashed.Load() {
		_ = t.WriteTx.Rollback()
		return errCrashed
	}
	return t.WriteTx.Commit()
}

type crashedRow struct{}

func (crashedRow) Scan(...any) error { return errCrashed }

// beginSignal sends on begun (when it has room) each time a write
// transaction begins, so a test can wait for a request to get that far.
type beginSignal struct {
	receiver.Store
	begun chan struct{}
}

func (s *beginSignal) Begin(ctx context.Context) (receiver.WriteTx, error) {
	select {
	case s.begun <- struct{}{}:
	default:
	}
	return s.Store.Begin(ctx)
}

// attemptsOf counts the handler's runs for alice's key, committed or not.
func (e *env) attemptsOf(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.attempts["alice\x00"+key]
}
