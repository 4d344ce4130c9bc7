package receiver

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/tabfence/tabfence/wire"
)

// claimAll takes, in one statement, the claims of the keys among ms (whose
// fingerprints are fps) that have no record yet, all under claimID, in key
// order: two batches sharing keys lock them in the same order (no deadlock
// on PostgreSQL), and a batch of new keys costs one statement instead of
// one per key. It returns the keys it claimed; the others go through
// claimIn.
func (rc *Receiver) claimAll(ctx context.Context, tx Tx, scope, claimID string, ms []wire.BatchMutation, fps []string) (map[string]bool, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return ms[order[a]].Key < ms[order[b]].Key })
	now := rc.opts.Clock().UnixMilli()
	args := make([]any, 0, 6+2*len(ms))
	args = append(args, scope, now+rc.opts.ClaimTTL.Milliseconds(), []byte{}, now, now+rc.opts.Retention.Milliseconds(), claimID)
	for _, i := range order {
		args = append(args, ms[i].Key, fps[i])
	}
	var q strings.Builder
	insertRows(&q, len(ms), 6, 2, func(q *strings.Builder, p int) {
		fmt.Fprintf(q, "($1, $%d, $%d, 1, $6, $2, 0, '', $3, $4, $5)", p, p+1)
	})
	q.WriteString(` ON CONFLICT (scope, idem_key) DO NOTHING RETURNING idem_key`)
	rows, err := tx.Query(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("receiver: claim batch: %w", err)
	}
	defer rows.Close()
	claimed := make(map[string]bool, len(ms))
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("receiver: claim batch: %w", err)
		}
		claimed[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("receiver: claim batch: %w", err)
	}
	return claimed, nil
}

// kept is a batch mutation's answer waiting for its chunk's finishAll.
type kept struct {
	key, fp string
	status  int64
	header  string
	body    []byte
}

// finishAll stores the kept answers of a chunk with their keys in one
// statement, as finish stores one: each key's record must still hold the
// chunk's claimID (it does: the chunk's transaction took it and holds it),
// or nothing of the chunk commits. The insert half never applies to a
// claimed key; it is there because INSERT is the statement both stores type
// alike. Its text depends on the number of answers only, so statement
// caches keep one entry per chunk size.
func (rc *Receiver) finishAll(ctx context.Context, tx Tx, scope, claimID string, ks []kept) error {
	if len(ks) == 0 {
		return nil
	}
	now := rc.opts.Clock().UnixMilli()
	args := make([]any, 0, 4+5*len(ks))
	args = append(args, scope, now, now+rc.opts.Retention.Milliseconds(), claimID)
	for _, k := range ks {
		args = append(args, k.key, k.fp, k.status, k.header, k.body)
	}
	var q strings.Builder
	insertRows(&q, len(ks), 4, 5, func(q *strings.Builder, p int) {
		fmt.Fprintf(q, "($1, $%d, $%d, 2, $4, $2, $%d, $%d, $%d, $2, $3)", p, p+1, p+2, p+3, p+4)
	})
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

// insertIdem begins every statement that inserts records: a claim
// (claimStep, claimAll) or a stored answer (finishAll).
const insertIdem = `INSERT INTO tabfence_idempotency
		(scope, idem_key, fingerprint, state, claim, claim_expires, status, header, body, created, expires) VALUES `

// insertRows writes insertIdem and n rows to q: after shared arguments
// common to all rows, each row has per arguments of its own, and row writes
// one row whose first own placeholder is $p. The text depends on n only.
func insertRows(q *strings.Builder, n, shared, per int, row func(q *strings.Builder, p int)) {
	q.WriteString(insertIdem)
	for i := 0; i < n; i++ {
		if i > 0 {
			q.WriteByte(',')
		}
		row(q, shared+1+i*per)
	}
}
