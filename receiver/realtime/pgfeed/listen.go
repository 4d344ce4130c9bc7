package pgfeed

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// Subscribe implements realtime.Feed. The backlog is read from the change
// rows; live deltas come from this instance's listener, each once: a delta
// the backlog already held is not sent again.
func (f *Feed) Subscribe(ctx context.Context, scope string, from uint64, buffer int) (*realtime.Subscription, error) {
	if buffer < 1 {
		buffer = 1
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var head int64
	var backlog []rt.Delta
	err := f.store.View(ctx, func(q receiver.Tx) error {
		err := q.QueryRow(ctx, `SELECT version FROM tabfence_change_heads WHERE scope = $1`, scope).Scan(&head)
		if err != nil && !errors.Is(err, receiver.ErrNoRows) {
			return err
		}
		if from > uint64(head) || uint64(head)-from > uint64(f.opts.Keep) {
			return nil
		}
		backlog, err = readChanges(ctx, q, scope, from, uint64(head))
		return err
	})
	if err != nil {
		return nil, err
	}
	l := f.scopes[scope]
	if l == nil {
		l = &local{subs: map[*sub]struct{}{}}
		f.scopes[scope] = l
	}
	if len(l.subs) == 0 || l.version > uint64(head) {
		l.version = uint64(head)
	}
	s := &sub{ch: make(chan rt.Delta, buffer), lost: make(chan struct{}), after: uint64(head)}
	l.subs[s] = struct{}{}
	out := &realtime.Subscription{Backlog: backlog, Version: uint64(head), C: s.ch, Lost: s.lost,
		Reset: from > uint64(head) || uint64(head)-from > uint64(f.opts.Keep)}
	var once sync.Once
	out.Cancel = func() {
		once.Do(func() {
			f.mu.Lock()
			delete(l.subs, s)
			f.mu.Unlock()
		})
	}
	return out, nil
}

// readChanges reads scope's deltas in (from, to], in order.
func readChanges(ctx context.Context, q receiver.Tx, scope string, from, to uint64) ([]rt.Delta, error) {
	rows, err := q.Query(ctx, `SELECT version, changes FROM tabfence_changes
		WHERE scope = $1 AND version > $2 AND version <= $3 ORDER BY version`, scope, int64(from), int64(to))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []rt.Delta
	for rows.Next() {
		var v int64
		var b []byte
		if err := rows.Scan(&v, &b); err != nil {
			return nil, err
		}
		out = append(out, rt.Delta{Version: uint64(v), Prev: uint64(v) - 1, Changes: b})
	}
	return out, rows.Err()
}

// listen keeps a LISTEN connection open until ctx ends; ready gets the
// first connection's outcome.
func (f *Feed) listen(ctx context.Context, ready chan<- error) {
	defer close(f.done)
	first := true
	for {
		err := f.listenOnce(ctx, func() {
			if first {
				first = false
				ready <- nil
			}
		})
		if first {
			ready <- err
			return
		}
		if ctx.Err() != nil {
			return
		}
		f.log.Error("listener lost; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(reconnectWait):
		}
	}
}

func (f *Feed) listenOnce(ctx context.Context, onReady func()) error {
	c, err := pgx.ConnectConfig(ctx, f.cfg)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.Background()) }()
	if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{f.opts.Channel}.Sanitize()); err != nil {
		return err
	}
	onReady()
	f.catchUpAll(ctx) // what was committed while no listener was open
	for {
		n, err := c.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		f.catchUp(ctx, n.Payload)
	}
}

func (f *Feed) catchUpAll(ctx context.Context) {
	f.mu.Lock()
	scopes := make([]string, 0, len(f.scopes))
	for s := range f.scopes {
		scopes = append(scopes, s)
	}
	f.mu.Unlock()
	for _, s := range scopes {
		f.catchUp(ctx, s)
	}
}

// catchUp reads scope's rows past the last version fanned out here and
// hands them to its subscribers, dropping one whose buffer is full.
func (f *Feed) catchUp(ctx context.Context, scope string) {
	f.mu.Lock()
	l := f.scopes[scope]
	if l == nil || len(l.subs) == 0 {
		f.mu.Unlock()
		return
	}
	from := l.version
	f.mu.Unlock()
	var ds []rt.Delta
	err := f.store.View(ctx, func(q receiver.Tx) error {
		var err error
		ds, err = readChanges(ctx, q, scope, from, 1<<53-1)
		return err
	})
	if err != nil {
		f.log.Error("read changes", "err", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range ds {
		if d.Version != l.version+1 {
			continue // fanned out already (a concurrent catch-up)
		}
		l.version = d.Version
		for s := range l.subs {
			if d.Version <= s.after {
				continue
			}
			select {
			case s.ch <- d:
			default:
				delete(l.subs, s)
				close(s.lost)
			}
		}
	}
}
