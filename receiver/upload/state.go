package upload

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// status is an upload's lifecycle as this package sees it, apart from
// tusd's offset: only statusComplete may be referenced.
type status string

const (
	statusOpen     status = "open"     // bytes still arriving (or complete but not yet verified)
	statusComplete status = "complete" // all bytes, SHA-256 verified
	statusFailed   status = "failed"   // all bytes, SHA-256 differs: never referenced
)

// record is the owner file of one upload. It is written before tusd creates
// the upload, so an upload without one is refused to everyone (fail closed).
type record struct {
	ID       string `json:"id"`
	User     string `json:"user"`
	Key      string `json:"key"`
	SHA256   string `json:"sha256"`
	Filename string `json:"filename,omitempty"`
	Size     int64  `json:"size"`
	Status   status `json:"status"`
}

// files lays out the data directory: tusd's file store, one owner record
// per upload, and the (user, key) index.
type files struct{ dir string }

func (f files) store() string          { return filepath.Join(f.dir, "data") }
func (f files) owner(id string) string { return filepath.Join(f.dir, "owners", id+".json") }
func (f files) index(user, key string) string {
	h := sha256.Sum256([]byte(user + "\x00" + key))
	return filepath.Join(f.dir, "keys", hex.EncodeToString(h[:]))
}

func (f files) init() error {
	for _, d := range []string{f.store(), filepath.Join(f.dir, "owners"), filepath.Join(f.dir, "keys")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("upload: create %s: %w", d, err)
		}
	}
	return nil
}

// readRecord returns the owner record of id, ErrUploadNotFound if none.
func (f files) readRecord(id string) (record, error) {
	if !validID(id) {
		return record{}, ErrUploadNotFound
	}
	b, err := os.ReadFile(f.owner(id))
	if errors.Is(err, fs.ErrNotExist) {
		return record{}, ErrUploadNotFound
	}
	if err != nil {
		return record{}, fmt.Errorf("upload: read owner of %s: %w", id, err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil || r.ID != id {
		return record{}, fmt.Errorf("upload: owner of %s corrupt: %w", id, ErrCorrupt)
	}
	return r, nil
}

func (f files) writeRecord(r record) error {
	b, _ := json.Marshal(r)
	return writeAtomic(f.owner(r.ID), b)
}

// lookup returns the upload id indexed for (user, key), "" if none.
func (f files) lookup(user, key string) (string, error) {
	b, err := os.ReadFile(f.index(user, key))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("upload: read key index: %w", err)
	}
	if !validID(string(b)) {
		return "", fmt.Errorf("upload: key index corrupt: %w", ErrCorrupt)
	}
	return string(b), nil
}

func (f files) bind(user, key, id string) error {
	return writeAtomic(f.index(user, key), []byte(id))
}

// writeAtomic replaces path with data so that a crash leaves either the old
// or the new content, never a torn file: a torn owner record would lock its
// owner out, a torn index would start a second upload for one key.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("upload: write %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("upload: write %s: %w", path, werr)
	}
	// The rename is durable only once the directory is: without this a
	// crash may bring back the old entry after the caller went on.
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("upload: write %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// newID is 128 random bits in hex: unguessable, and a fixed alphabet that
// cannot name a path outside the store.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// keyLocks serialises the creations of one (user, key), so two concurrent
// creations for one record cannot both miss the index and start two uploads.
// A waiter gives up with its context: a creation-with-upload holds the lock
// while its body arrives, and its retry must not queue behind it unbounded.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	held chan struct{} // a token while held
	refs int
}

// lock takes the lock of name, or returns ctx's error once it is done.
func (k *keyLocks) lock(ctx context.Context, name string) (func(), error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[name]
	if l == nil {
		l = &keyLock{held: make(chan struct{}, 1)}
		k.locks[name] = l
	}
	l.refs++
	k.mu.Unlock()
	drop := func() {
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, name)
		}
		k.mu.Unlock()
	}
	select {
	case l.held <- struct{}{}:
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	}
	return func() {
		<-l.held
		drop()
	}, nil
}
