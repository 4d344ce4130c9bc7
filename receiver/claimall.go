package receiver

import (
	"context"
	"fmt"
	"sort"
	"strconv"
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
	var q strings.Builder
	q.WriteString(`INSERT INTO tabfence_idempotency
		(scope, idem_key, fingerprint, state, claim, claim_expires, status, header, body, created, expires) VALUES `)
	args := make([]any, 0, 6+2*len(ms))
	args = append(args, scope, now+rc.opts.ClaimTTL.Milliseconds(), []byte{}, now, now+rc.opts.Retention.Milliseconds(), claimID)
	for n, i := range order {
		if n > 0 {
			q.WriteByte(',')
		}
		p := len(args)
		fmt.Fprintf(&q, "($1, $%d, $%d, 1, $6, $2, 0, '', $3, $4, $5)", p+1, p+2)
		args = append(args, ms[i].Key, fps[i])
	}
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
// alike. A status or header shared by several answers is one parameter.
func (rc *Receiver) finishAll(ctx context.Context, tx Tx, scope, claimID string, ks []kept) error {
	if len(ks) == 0 {
		return nil
	}
	now := rc.opts.Clock().UnixMilli()
	var q strings.Builder
	q.WriteString(`INSERT INTO tabfence_idempotency
		(scope, idem_key, fingerprint, state, claim, claim_expires, status, header, body, created, expires) VALUES `)
	a := sqlArgs{args: make([]any, 0, 8+3*len(ks))}
	a.args = append(a.args, scope, now, now+rc.opts.Retention.Milliseconds(), claimID)
	for n, k := range ks {
		if n > 0 {
			q.WriteByte(',')
		}
		key, fp, status, header := a.add(k.key), a.add(k.fp), a.ref(k.status), a.ref(k.header)
		fmt.Fprintf(&q, "($1, %s, %s, 2, $4, $2, %s, %s, %s, $2, $3)", key, fp, status, header, a.add(k.body))
	}
	q.WriteString(` ON CONFLICT (scope, idem_key) DO UPDATE SET state = 2, status = excluded.status,
		header = excluded.header, body = excluded.body
		WHERE tabfence_idempotency.claim = excluded.claim AND tabfence_idempotency.state = 1 RETURNING idem_key`)
	rows, err := tx.Query(ctx, q.String(), a.args...)
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

// sqlArgs collects a statement's arguments. Binding costs per parameter
// (in SQLite's driver, per parameter and statement length), so a value
// many rows share is passed once.
type sqlArgs struct {
	args []any
	seen map[any]string
}

// add appends v and returns its placeholder.
func (a *sqlArgs) add(v any) string {
	a.args = append(a.args, v)
	return "$" + strconv.Itoa(len(a.args))
}

// ref is add for a string or integer that may repeat: the placeholder of
// an equal value passed before, else a new one.
func (a *sqlArgs) ref(v any) string {
	if p, ok := a.seen[v]; ok {
		return p
	}
	if a.seen == nil {
		a.seen = map[any]string{}
	}
	p := a.add(v)
	a.seen[v] = p
	return p
}
