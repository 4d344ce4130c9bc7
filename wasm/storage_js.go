//go:build js && wasm

package main

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/internal/deadline"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// The runtime's IndexedDB databases, one connection per database name per
// page, shared by every fenced election, fence and channel of the page.
//
// A database is named by the `database` option (default "tabfence"). Its
// app stores are declared by the `stores` option of elect() and fence();
// declarations accumulate until the database is first opened, and the
// schema version is the `version` option (default 1). Opening is lazy (first
// token, apply or cas) except that a fenced election opens it one task after
// elect() returns, so that every tab of the origin hears when another tab
// deletes or upgrades the database, even a follower.
//
// When another tab deletes the database (sign-out) or opens it at a newer
// version (a new build), the connection closes itself at once, so the other
// tab is never blocked, and every fenced election bound to it is closed:
// a leader releases its lock, and onLost reports "deleted" or "upgraded".
// The dead entry leaves the registry, so the next elect() or fence() in the
// page (typically after a reload) opens a fresh database.

// storage is one database of the page.
type storage struct {
	name    string
	version uint64

	mu       sync.Mutex
	stores   []string // declared app stores
	db       *idb.DB
	opening  chan struct{} // closed when the current open attempt ends
	started  bool          // an open began: stores are fixed
	gone     error         // set once the connection closed for good
	watchers electionSet
}

// storages are the page's databases: the API promises one connection per
// database name per page.
var (
	storagesMu sync.Mutex
	storages   = map[string]*storage{}
)

// storageFor returns the page's live entry for database name, creating it,
// after checking that version matches and that the stores can still be
// declared (before the first open) or already exist.
func storageFor(where, name string, version uint64, stores []string) (*storage, error) {
	storagesMu.Lock()
	defer storagesMu.Unlock()
	s := storages[name]
	if s == nil {
		s = &storage{name: name, version: version}
		storages[name] = s
	}
	if s.version != version {
		return nil, jsapi.TypeErr(where, "database "+name+" is already open in this page at version "+strconv.Itoa(int(s.version))+", not "+strconv.Itoa(int(version)))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range stores {
		if slices.Contains(s.stores, st) {
			continue
		}
		if s.started {
			return nil, jsapi.TypeErr(where, "store "+st+" was not declared before database "+name+
				" was opened: declare every store (option stores) on the first elect() or fence() of the page, and bump version when adding one")
		}
		s.stores = append(s.stores, st)
	}
	return s, nil
}

// open returns the connection, opening it on first use. Concurrent callers
// share one attempt; a failed attempt is retried by the next call.
func (s *storage) open(ctx context.Context) (*idb.DB, error) {
	retried := false
	for {
		s.mu.Lock()
		if s.gone != nil {
			err := s.gone
			s.mu.Unlock()
			return nil, err
		}
		if s.db != nil {
			db := s.db
			s.mu.Unlock()
			return db, nil
		}
		if ch := s.opening; ch != nil {
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		s.opening = ch
		s.started = true
		stores := append([]string(nil), s.stores...)
		s.mu.Unlock()

		schema := idb.Schema{Steps: []idb.Step{{Version: s.version, Upgrade: func(tx *idb.UpgradeTx) error {
			for _, st := range stores {
				if !tx.HasStore(st) {
					if err := tx.CreateStore(st, idb.StoreOptions{}); err != nil {
						return err
					}
				}
			}
			return nil
		}}}}
		db, err := idb.Open(ctx, s.name, idb.WithSchema(schema), idb.WithEvents(s.event))
		s.mu.Lock()
		s.opening = nil
		if err == nil {
			if s.gone != nil { // cannot happen before listen, but be safe
				_ = db.Close()
				err = s.gone
			} else {
				s.db = db
			}
		}
		s.mu.Unlock()
		close(ch)
		if err != nil {
			if errors.Is(err, idb.ErrDeleted) && !retried { // deleted while opening: try once more
				retried = true
				continue
			}
			return nil, err
		}
		return db, nil
	}
}

// event hears what happens to the connection (on its own goroutine).
func (s *storage) event(e idb.Event) {
	if e.Kind == idb.Blocked {
		return
	}
	var err error
	switch e.Kind {
	case idb.Deleted:
		err = idb.ErrDeleted
	case idb.Upgraded:
		err = idb.ErrUpgraded
	default:
		err = idb.ErrClosed
	}
	s.kill(err)
	s.mu.Lock()
	ws := append([]*election(nil), s.watchers...)
	s.mu.Unlock()
	for _, el := range ws {
		el.storageLost(e.Kind, storageErr(s.name, err))
	}
}

// kill marks the entry dead and removes it from the registry, so the next
// caller opens a fresh database.
func (s *storage) kill(err error) {
	storagesMu.Lock()
	if storages[s.name] == s {
		delete(storages, s.name)
	}
	storagesMu.Unlock()
	s.mu.Lock()
	if s.gone == nil {
		s.gone = err
	}
	s.db = nil
	s.mu.Unlock()
}

// err returns the StorageError of a dead entry, nil while alive.
func (s *storage) err() error {
	s.mu.Lock()
	gone := s.gone
	s.mu.Unlock()
	if gone == nil {
		return nil
	}
	return storageErr(s.name, gone)
}

func (s *storage) watch(el *election) {
	s.mu.Lock()
	s.watchers.Add(el)
	s.mu.Unlock()
}

func (s *storage) unwatch(el *election) {
	s.mu.Lock()
	s.watchers.Remove(el)
	s.mu.Unlock()
}

// warm opens the database one task later (see the file comment).
func (s *storage) warm() {
	time.AfterFunc(0, func() {
		ctx, cancel := deadline.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := s.open(ctx); err != nil && s.err() == nil {
			jsapi.ReportError("tabfence: opening database "+s.name+" failed:", err)
		}
	})
}

// AllocateToken makes a storage a locks.Fencer.
func (s *storage) AllocateToken(ctx context.Context, resource, ownerID string) (uint64, error) {
	db, err := s.open(ctx)
	if err != nil {
		return 0, s.wrap(err)
	}
	t, err := db.AllocateToken(ctx, resource, ownerID)
	return t, s.wrap(err)
}

// wrap turns the errors of a closed connection into StorageErrors.
func (s *storage) wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, idb.ErrDeleted) || errors.Is(err, idb.ErrUpgraded) || errors.Is(err, idb.ErrClosed) {
		return storageErr(s.name, err)
	}
	return err
}
