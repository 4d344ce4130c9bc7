package receiver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Record states.
const (
	stateInFlight = 1
	stateFinished = 2
)

// record is one row of tabfence_idempotency.
type record struct {
	fingerprint  string
	state        int64
	claim        string
	claimExpires int64 // unix ms
	status       int64
	header       string
	body         []byte
	expires      int64 // unix ms
}

func (r record) response() Response {
	h := http.Header{}
	if r.header != "" {
		_ = json.Unmarshal([]byte(r.header), &h)
	}
	return Response{Status: int(r.status), Header: h, Body: r.body}
}

const selectRecord = `SELECT fingerprint, state, claim, claim_expires, status, header, body, expires
FROM tabfence_idempotency WHERE scope = $1 AND idem_key = $2`

func scanRecord(row Row) (record, error) {
	var r record
	err := row.Scan(&r.fingerprint, &r.state, &r.claim, &r.claimExpires, &r.status, &r.header, &r.body, &r.expires)
	return r, err
}

func newClaimID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// claimOutcome is what the claim phase decided.
type claimOutcome int

const (
	claimed claimOutcome = iota + 1
	claimReplay
	claimInFlight
	claimReuse
	claimFenced // rejected by the read-only fence pre-check
)

// claim takes the in-flight claim on (scope, key), or reports why it cannot:
// a finished record to replay, a running duplicate, or a different payload.
// The read happens outside any write transaction so duplicates of a running
// request are answered at once even on SQLite, whose single writer is busy.
//
// When the key is new and the request is fenced, the same read also checks
// the token, so a stale leader's requests are rejected without any write.
// That is safe because issued and highest_accepted only ever grow: a token
// stale or unissued now stays so. The check in the write transaction
// remains the authoritative one.
func (rc *Receiver) claim(ctx context.Context, scope, key, fp, claimID, resource string, token uint64) (claimOutcome, record, error) {
	var fenceErr error
	read := func(now int64) (rec record, found bool, err error) {
		err = rc.store.View(ctx, func(q Tx) error {
			var err error
			rec, found, err = readRecord(ctx, q, scope, key)
			if err == nil && resource != "" && (!found || rec.expires <= now) {
				fenceErr, err = precheckFence(ctx, q, scope, resource, token)
			}
			if err == nil {
				err = fenceErr
			}
			return err
		})
		return rec, found, err
	}
	outcome, rec, err := rc.claimLoop(scope, key, fp, claimID, read, func(query string, args []any) (int64, error) {
		return rc.exec(ctx, query, args...)
	})
	if fenceErr != nil {
		return claimFenced, record{}, fenceErr
	}
	return outcome, rec, err
}

// readRecord reads the key's record; found is false when it has none.
func readRecord(ctx context.Context, q Tx, scope, key string) (rec record, found bool, err error) {
	rec, err = scanRecord(q.QueryRow(ctx, selectRecord, scope, key))
	if errors.Is(err, ErrNoRows) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("receiver: read record: %w", err)
	}
	return rec, true, nil
}

// claimLoop takes the claim on (scope, key) for fp: read gives the key's
// record as of now, take runs the statement claimStep chose, whose one
// affected row means claimed and none a lost race with another request for
// the key, after which it looks again. Handle's claim (reads outside any
// write transaction, each take its own) and a batch's claimIn (both in the
// batch's transaction) share it.
func (rc *Receiver) claimLoop(scope, key, fp, claimID string, read func(now int64) (record, bool, error),
	take func(query string, args []any) (int64, error)) (claimOutcome, record, error) {
	for attempt := 0; attempt < 5; attempt++ {
		now := rc.opts.Clock().UnixMilli()
		rec, found, err := read(now)
		if err != nil {
			return 0, rec, err
		}
		outcome, query, args := rc.claimStep(rec, found, scope, key, fp, claimID, now)
		if query == "" {
			return outcome, rec, nil
		}
		n, err := take(query, args)
		if err != nil {
			return 0, rec, fmt.Errorf("receiver: claim: %w", err)
		}
		if n == 1 {
			return claimed, rec, nil
		}
	}
	return claimInFlight, record{}, nil
}

// claimStep decides, from the key's record as read at now (found or not),
// what claiming the key does: the statement that takes the claim (query
// non-empty: its one affected row means claimed, none a lost race), or an
// outcome that writes nothing. Handle's claim and a batch's share it.
func (rc *Receiver) claimStep(rec record, found bool, scope, key, fp, claimID string, now int64) (claimOutcome, string, []any) {
	claimExp := now + rc.opts.ClaimTTL.Milliseconds()
	expires := now + rc.opts.Retention.Milliseconds()
	switch {
	case !found:
		return claimed, insertIdem + `($1, $2, $3, 1, $4, $5, 0, '', $6, $7, $8) ON CONFLICT (scope, idem_key) DO NOTHING`,
			[]any{scope, key, fp, claimID, claimExp, []byte{}, now, expires}
	case rec.expires <= now:
		// Past retention: the record is as good as reaped, the key runs anew.
		return claimed, `UPDATE tabfence_idempotency SET fingerprint = $3, state = 1, claim = $4, claim_expires = $5,
			status = 0, header = '', body = $6, created = $7, expires = $8
			WHERE scope = $1 AND idem_key = $2 AND claim = $9 AND expires <= $7`,
			[]any{scope, key, fp, claimID, claimExp, []byte{}, now, expires, rec.claim}
	case rec.fingerprint != fp:
		return claimReuse, "", nil
	case rec.state == stateFinished:
		return claimReplay, "", nil
	case rec.claimExpires > now:
		return claimInFlight, "", nil
	}
	// In flight but its claim expired: the process that held it died.
	return claimed, `UPDATE tabfence_idempotency SET claim = $3, claim_expires = $4
		WHERE scope = $1 AND idem_key = $2 AND claim = $5 AND state = 1`,
		[]any{scope, key, claimID, claimExp, rec.claim}
}

// claimIn is claim inside the write transaction tx, for a batch's key
// that claimAll could not insert (it has a record): the claim commits with
// the mutation's answer or not at all. On PostgreSQL a key another
// transaction is inserting right now waits for that one to end, then is
// read again, so it is never run twice.
func (rc *Receiver) claimIn(ctx context.Context, tx Tx, scope, key, fp, claimID string) (claimOutcome, record, error) {
	read := func(int64) (record, bool, error) { return readRecord(ctx, tx, scope, key) }
	return rc.claimLoop(scope, key, fp, claimID, read, func(query string, args []any) (int64, error) {
		return tx.Exec(ctx, query, args...)
	})
}

// exec runs one statement in its own write transaction.
func (rc *Receiver) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tx, err := rc.store.Begin(ctx)
	if err != nil {
		return 0, err
	}
	n, err := tx.Exec(ctx, query, args...)
	if err != nil {
		_ = tx.Rollback()
		return 0, err
	}
	return n, tx.Commit()
}

// deleteClaim drops the in-flight claim $3 on key ($1, $2).
const deleteClaim = `DELETE FROM tabfence_idempotency WHERE scope = $1 AND idem_key = $2 AND claim = $3 AND state = 1`

// release drops an in-flight claim so a retry runs again. It uses a fresh
// context: the release must happen even when the request's own was cancelled.
func (rc *Receiver) release(scope, key, claimID string) {
	ctx, cancel := context.WithTimeout(context.Background(), rc.opts.Timeout)
	defer cancel()
	_, err := rc.exec(ctx, deleteClaim, scope, key, claimID)
	if err != nil {
		rc.log.Error("release idempotency claim", "err", err, "scope_hash", shortHash(scope))
	}
}

// finish stores the answer with the key inside the business transaction.
func (rc *Receiver) finish(ctx context.Context, tx Tx, scope, key, claimID string, resp Response) error {
	n, err := tx.Exec(ctx, `UPDATE tabfence_idempotency SET state = 2, status = $4, header = $5, body = $6
		WHERE scope = $1 AND idem_key = $2 AND claim = $3 AND state = 1`,
		scope, key, claimID, int64(resp.Status), rc.storedHeader(resp), storedBody(resp))
	if err != nil {
		return err
	}
	if n != 1 {
		return errClaimLost
	}
	return nil
}

var errClaimLost = errors.New("receiver: in-flight claim lost")

// storedHeader is the part of resp's header a replay gives back, as the
// record stores it.
func (rc *Receiver) storedHeader(resp Response) string {
	h := http.Header{}
	for _, name := range rc.replay {
		if v := resp.Header.Values(name); len(v) > 0 {
			h[http.CanonicalHeaderKey(name)] = v
		}
	}
	if len(h) == 0 {
		return "{}"
	}
	hj, _ := json.Marshal(h)
	return string(hj)
}

// storedBody is resp's body as the record stores it (never NULL).
func storedBody(resp Response) []byte {
	if resp.Body == nil {
		return []byte{}
	}
	return resp.Body
}
