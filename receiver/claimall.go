package receiver

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/tabfence/tabfence/wire"
)

// claimAll takes, in one statement, the claims of the keys among ms that
// have no record yet, in key order: two batches sharing keys lock them in
// the same order (no deadlock on PostgreSQL), and a batch of new keys
// costs one statement instead of one per key. It returns the claim id of
// each key it claimed; the others go through claimIn.
func (rc *Receiver) claimAll(ctx context.Context, tx Tx, scope string, ms []wire.BatchMutation) (map[string]string, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return ms[order[a]].Key < ms[order[b]].Key })
	now := rc.opts.Clock().UnixMilli()
	claimExp, expires := now+rc.opts.ClaimTTL.Milliseconds(), now+rc.opts.Retention.Milliseconds()
	ids := make(map[string]string, len(ms))
	var q strings.Builder
	q.WriteString(`INSERT INTO tabfence_idempotency
		(scope, idem_key, fingerprint, state, claim, claim_expires, status, header, body, created, expires) VALUES `)
	args := make([]any, 0, 5+3*len(ms))
	args = append(args, scope, claimExp, []byte{}, now, expires)
	for n, i := range order {
		m := ms[i]
		ids[m.Key] = newClaimID()
		if n > 0 {
			q.WriteByte(',')
		}
		p := len(args)
		fmt.Fprintf(&q, "($1, $%d, $%d, 1, $%d, $2, 0, '', $3, $4, $5)", p+1, p+2, p+3)
		args = append(args, m.Key, mutationFingerprint(scope, m), ids[m.Key])
	}
	q.WriteString(` ON CONFLICT (scope, idem_key) DO NOTHING RETURNING idem_key`)
	rows, err := tx.Query(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("receiver: claim batch: %w", err)
	}
	defer rows.Close()
	claimed := make(map[string]string, len(ms))
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("receiver: claim batch: %w", err)
		}
		claimed[k] = ids[k]
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("receiver: claim batch: %w", err)
	}
	return claimed, nil
}

// kept is a batch mutation's answer waiting for its chunk's finishAll.
type kept struct {
	key, fp, claimID string
	status           int64
	header           string
	body             []byte
}

// finishAll stores the kept answers of a chunk with their keys in one
// statement, as finish stores one: each key's record must still hold this
// batch's claim (it does: the chunk's transaction took it and holds it), or
// nothing of the chunk commits. The insert half never applies to a claimed
// key; it is there because INSERT is the statement both stores type alike.
func (rc *Receiver) finishAll(ctx context.Context, tx Tx, scope string, ks []kept) error {
	if len(ks) == 0 {
		return nil
	}
	now := rc.opts.Clock().UnixMilli()
	var q strings.Builder
	q.WriteString(`INSERT INTO tabfence_idempotency
		(scope, idem_key, fingerprint, state, claim, claim_expires, status, header, body, created, expires) VALUES `)
	args := make([]any, 0, 3+6*len(ks))
	args = append(args, scope, now, now+rc.opts.Retention.Milliseconds())
	for n, k := range ks {
		if n > 0 {
			q.WriteByte(',')
		}
		p := len(args)
		fmt.Fprintf(&q, "($1, $%d, $%d, 2, $%d, $2, $%d, $%d, $%d, $2, $3)", p+1, p+2, p+3, p+4, p+5, p+6)
		args = append(args, k.key, k.fp, k.claimID, k.status, k.header, k.body)
	}
	q.WriteString(` ON CONFLICT (scope, idem_key) DO UPDATE SET state = 2, status = excluded.status,
		header = excluded.header, body = excluded.body
		WHERE tabfence_idempotency.claim = excluded.claim AND tabfence_idempotency.state = 1 RETURNING idem_key`)
	rows, err := tx.Query(ctx, q.String(), args...)
	if err != nil {
		return fmt.Errorf("receiver: store answers: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("receiver: store answers: %w", err)
	}
	if n != len(ks) {
		return errClaimLost
	}
	return nil
}
