package realtime

import (
	"context"
	"sync"

	"github.com/tabfence/tabfence/receiver"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// Subscribe implements Feed. The backlog is read from the change rows;
// live deltas follow, each once: a delta the backlog already held is not
// sent again. A client behind the oldest row kept, or ahead of the head,
// is told to reset.
func (f *StoreFeed) Subscribe(ctx context.Context, scope string, from uint64, buffer int) (*Subscription, error) {
	if buffer < 1 {
		buffer = 1
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var head uint64
	var backlog []rt.Delta
	reset := false
	err := f.store.View(ctx, func(q receiver.Tx) error {
		var err error
		if head, err = f.Head(ctx, q, scope); err != nil {
			return err
		}
		if from > head || head-from > uint64(f.opts.Keep) {
			reset = true
			return nil
		}
		backlog, err = readChanges(ctx, q, scope, from, head, f.opts.Keep)
		// The rows before the head are committed, so only the reaper can
		// have taken one: then the client is too far behind.
		reset = err == nil && !contiguous(backlog, from, head)
		return err
	})
	if err != nil {
		return nil, err
	}
	if reset {
		backlog = nil
	}
	l := f.scopes[scope]
	if l == nil {
		l = &local{subs: map[*storeSub]struct{}{}}
		f.scopes[scope] = l
	}
	if len(l.subs) == 0 || l.version > head {
		l.version = head
	}
	s := &storeSub{ch: make(chan rt.Delta, buffer), lost: make(chan struct{}), after: head}
	l.subs[s] = struct{}{}
	out := &Subscription{Backlog: backlog, Version: head, Reset: reset, C: s.ch, Lost: s.lost}
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

// contiguous reports whether ds are exactly the versions from+1..to.
func contiguous(ds []rt.Delta, from, to uint64) bool {
	if uint64(len(ds)) != to-from {
		return false
	}
	for i, d := range ds {
		if d.Version != from+1+uint64(i) {
			return false
		}
	}
	return true
}

// readChanges reads at most limit of scope's deltas in (from, to], in order.
func readChanges(ctx context.Context, q receiver.Tx, scope string, from, to uint64, limit int) ([]rt.Delta, error) {
	rows, err := q.Query(ctx, `SELECT version, changes FROM tabfence_changes
		WHERE scope = $1 AND version > $2 AND version <= $3 ORDER BY version LIMIT $4`,
		scope, int64(from), int64(to), int64(limit))
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

// CatchUpAll runs CatchUp for every scope with subscribers here.
func (f *StoreFeed) CatchUpAll(ctx context.Context) {
	f.mu.Lock()
	scopes := make([]string, 0, len(f.scopes))
	for s, l := range f.scopes {
		if len(l.subs) == 0 {
			delete(f.scopes, s) // the next subscriber starts from the head again
			continue
		}
		scopes = append(scopes, s)
	}
	f.mu.Unlock()
	for _, s := range scopes {
		f.CatchUp(ctx, s)
	}
}

// CatchUp reads scope's rows past the last version fanned out here and
// hands them to its subscribers, dropping one whose buffer is full. Rows
// reaped before they were fanned out drop every subscriber (Lost): they
// reconnect and are told to reset.
func (f *StoreFeed) CatchUp(ctx context.Context, scope string) {
	for f.catchUpOnce(ctx, scope) {
	}
}

// catchUpOnce fans out up to Keep rows; true when there may be more.
func (f *StoreFeed) catchUpOnce(ctx context.Context, scope string) bool {
	f.mu.Lock()
	l := f.scopes[scope]
	if l == nil || len(l.subs) == 0 {
		f.mu.Unlock()
		return false
	}
	from := l.version
	f.mu.Unlock()
	var ds []rt.Delta
	err := f.store.View(ctx, func(q receiver.Tx) error {
		var err error
		ds, err = readChanges(ctx, q, scope, from, 1<<53-1, f.opts.Keep)
		return err
	})
	if err != nil {
		f.log.Error("read changes", "err", err)
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range ds {
		switch {
		case d.Version <= l.version:
			continue // fanned out already (a concurrent catch-up)
		case d.Version != l.version+1:
			for s := range l.subs {
				delete(l.subs, s)
				close(s.lost)
			}
			l.version = ds[len(ds)-1].Version
			return false
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
	return len(ds) == f.opts.Keep && len(l.subs) > 0
}
