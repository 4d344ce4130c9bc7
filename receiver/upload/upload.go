package upload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tus/tusd/v2/pkg/filestore"
	tusd "github.com/tus/tusd/v2/pkg/handler"
	"github.com/tus/tusd/v2/pkg/memorylocker"
	expslog "golang.org/x/exp/slog"
)

// Errors of Complete, for a business handler to map to its own answer.
var (
	// ErrUploadNotFound: no such upload, or it belongs to another user (the
	// two are not told apart, so an id reveals nothing).
	ErrUploadNotFound = errors.New("upload: not found")
	// ErrUploadIncomplete: the upload exists but not all its bytes have
	// arrived; the client resumes it and retries the mutation.
	ErrUploadIncomplete = errors.New("upload: incomplete")
	// ErrUploadHashMismatch: all bytes arrived and their SHA-256 is not the
	// declared one. The upload is failed for good and never referenced.
	ErrUploadHashMismatch = errors.New("upload: sha256 mismatch")
	// ErrCorrupt: a file of the data directory cannot be read back.
	ErrCorrupt = errors.New("upload: data directory corrupt")
)

// DefaultNetworkTimeout bounds each read of a chunk's body: a client that
// sends nothing for that long is cut off and keeps what was stored.
const DefaultNetworkTimeout = 60 * time.Second

// DefaultCreateWait is Options.CreateWait's default: longer than a creation
// takes, shorter than a client's patience.
const DefaultCreateWait = 10 * time.Second

// Options configure a Server.
type Options struct {
	// Dir holds the uploads (tusd's file store) and their owner records;
	// created if missing. Required. One process per Dir: see docs/uploads.md.
	Dir string
	// BasePath is the URL path the handler is mounted at (default "/files/");
	// upload URLs are BasePath + id.
	BasePath string
	// MaxSize is the largest Upload-Length accepted (0: no limit); a larger
	// one is answered 413 before anything is stored.
	MaxSize int64
	// Scope names the authenticated user, as receiver.Options.Scope does
	// (return receiver.ErrUnauthenticated): any error is answered 401. An
	// upload belongs to the scope that created it. Required.
	Scope func(*http.Request) (string, error)
	// NetworkTimeout bounds each read of a request body (default 60s).
	NetworkTimeout time.Duration
	// CreateWait bounds how long a creation waits for another creation of
	// the same (user, key) still being answered (default 10s); then it is
	// answered 503 with Retry-After.
	CreateWait time.Duration
	// RespectForwardedHeaders builds upload URLs (Location) from
	// X-Forwarded-Host/-Proto and Forwarded, behind a proxy that sets them
	// (tusd's option of that name). Off, they are the request's Host.
	RespectForwardedHeaders bool
	// Logger receives this package's errors (default slog.Default()).
	// tusd's own per-request logs are discarded: they would log every chunk.
	Logger *slog.Logger
}

// Info describes a complete, verified upload.
type Info struct {
	ID       string
	Size     int64
	SHA256   string // lowercase hex
	Key      string // the idempotency key it was created with
	Filename string
}

// Server is a tus endpoint whose uploads are bound to their users and keys.
type Server struct {
	opts  Options
	files files
	store filestore.FileStore
	tus   *tusd.Handler
	lock  tusd.Locker
	keys  keyLocks
}

// New builds a Server over opts.Dir.
func New(o Options) (*Server, error) {
	if o.Dir == "" || o.Scope == nil {
		return nil, errors.New("upload: Options.Dir and Options.Scope are required")
	}
	if o.BasePath == "" {
		o.BasePath = "/files/"
	}
	if !strings.HasPrefix(o.BasePath, "/") {
		return nil, fmt.Errorf("upload: BasePath %q must be a path starting with /", o.BasePath)
	}
	if !strings.HasSuffix(o.BasePath, "/") {
		o.BasePath += "/"
	}
	if o.NetworkTimeout <= 0 {
		o.NetworkTimeout = DefaultNetworkTimeout
	}
	if o.CreateWait <= 0 {
		o.CreateWait = DefaultCreateWait
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{opts: o, files: files{dir: o.Dir}}
	if err := s.files.init(); err != nil {
		return nil, err
	}
	s.store = filestore.New(s.files.store())
	// Only the extensions create accepts, so OPTIONS advertises no
	// creation-defer-length or concatenation (a final upload could name
	// another user's partial ones).
	composer := tusd.NewStoreComposer()
	composer.UseCore(s.store)
	composer.UseTerminater(s.store)
	s.lock = memorylocker.New()
	composer.UseLocker(s.lock)
	h, err := tusd.NewHandler(tusd.Config{
		StoreComposer:        composer,
		BasePath:             o.BasePath,
		MaxSize:              o.MaxSize,
		DisableConcatenation: true,
		// The outbox never reads an upload back, and a slow GET of a large
		// file would be cut by the server's write deadline.
		DisableDownload:            true,
		Cors:                       &tusd.CorsConfig{Disable: true},
		Logger:                     expslog.New(expslog.NewTextHandler(io.Discard, nil)),
		NetworkTimeout:             o.NetworkTimeout,
		RespectForwardedHeaders:    o.RespectForwardedHeaders,
		PreUploadCreateCallback:    s.preCreate,
		PreFinishResponseCallback:  s.preFinish,
		PreUploadTerminateCallback: s.preTerminate,
	})
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	s.tus = h
	return s, nil
}

// Handler serves the tus protocol; mount it at Options.BasePath (it strips
// the prefix itself).
func (s *Server) Handler() http.Handler {
	return http.StripPrefix(strings.TrimSuffix(s.opts.BasePath, "/"), http.HandlerFunc(s.serve))
}

// serve authenticates every request and lets tusd see only the caller's own
// uploads. OPTIONS (protocol discovery, no credentials in a preflight)
// reveals the server's limits only.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodOptions:
		s.tus.ServeHTTP(w, r)
		return
	case http.MethodGet, http.MethodHead:
	default:
		// As tusd, before anything of ours answers: a client of another
		// protocol version must not read our 200 or 400 as its own.
		if r.Header.Get("Tus-Resumable") != "1.0.0" {
			writeError(w, tusd.ErrUnsupportedVersion)
			return
		}
	}
	if r.Header.Get("X-HTTP-Method-Override") != "" {
		// tusd would turn a POST into a PATCH after the checks below.
		writeError(w, errOverride)
		return
	}
	user, err := s.opts.Scope(r)
	if err != nil {
		writeError(w, errUnauthenticated)
		return
	}
	id := strings.Trim(r.URL.Path, "/")
	if id == "" {
		if r.Method == http.MethodPost {
			s.create(w, r, user)
			return
		}
		s.tus.ServeHTTP(w, r) // 405
		return
	}
	rec, err := s.files.readRecord(id)
	switch {
	case errors.Is(err, ErrUploadNotFound) || (err == nil && rec.User != user):
		writeError(w, tusd.ErrNotFound)
	case err != nil:
		s.opts.Logger.Error("upload: owner record", "id", id, "err", err)
		writeError(w, errInternal)
	case rec.Status == statusFailed && (r.Method == http.MethodHead || r.Method == http.MethodPatch):
		// tusd would show all bytes stored, as if finished.
		writeError(w, errHashMismatch)
	default:
		s.tus.ServeHTTP(w, r)
	}
}

// Complete is what a business handler calls, in its receiver transaction,
// before it references uploadID: the upload must be user's, whole, and
// match its declared SHA-256. An upload whose last chunk was stored just
// before a crash (so its finish hook never ran) is verified here, under
// tusd's lock of the upload so no PATCH or DELETE runs meanwhile.
func (s *Server) Complete(ctx context.Context, user, uploadID string) (Info, error) {
	rec, err := s.files.readRecord(uploadID)
	if err != nil {
		return Info{}, err
	}
	if rec.User != user {
		return Info{}, ErrUploadNotFound
	}
	if rec.Status == statusOpen {
		if rec, err = s.verifyLocked(ctx, rec); err != nil {
			return Info{}, err
		}
	}
	switch rec.Status {
	case statusFailed:
		return Info{}, ErrUploadHashMismatch
	case statusComplete:
		if err := s.checkSize(ctx, rec); err != nil {
			return Info{}, err
		}
	default:
		return Info{}, ErrUploadIncomplete
	}
	return Info{ID: rec.ID, Size: rec.Size, SHA256: rec.SHA256, Key: rec.Key, Filename: rec.Filename}, nil
}

// verifyLocked verifies an open upload whose bytes have all arrived. An
// unfinished one is answered without the lock, which would interrupt the
// PATCH sending its bytes.
func (s *Server) verifyLocked(ctx context.Context, rec record) (record, error) {
	if _, err := s.whole(ctx, rec.ID); err != nil {
		return rec, err
	}
	lock, err := s.lock.NewLock(rec.ID)
	if err != nil {
		return rec, fmt.Errorf("upload: lock %s: %w", rec.ID, err)
	}
	if err := lock.Lock(ctx, func() {}); err != nil {
		return rec, fmt.Errorf("upload: lock %s: %w", rec.ID, err)
	}
	defer func() { _ = lock.Unlock() }()
	// Re-read both: a DELETE, or the finish hook, may have run meanwhile.
	if rec, err = s.files.readRecord(rec.ID); err != nil || rec.Status != statusOpen {
		return rec, err
	}
	path, err := s.whole(ctx, rec.ID)
	if err != nil {
		return rec, err
	}
	return s.verify(rec, path)
}

// whole returns the data file of upload id once all its bytes are stored.
func (s *Server) whole(ctx context.Context, id string) (string, error) {
	up, err := s.store.GetUpload(ctx, id)
	if errors.Is(err, tusd.ErrNotFound) {
		return "", ErrUploadNotFound
	}
	if err != nil {
		return "", fmt.Errorf("upload: %s: %w", id, err)
	}
	fi, err := up.GetInfo(ctx)
	if err != nil {
		return "", fmt.Errorf("upload: %s: %w", id, err)
	}
	if fi.SizeIsDeferred || fi.Offset < fi.Size {
		return "", ErrUploadIncomplete
	}
	return fi.Storage[filestore.StorageKeyPath], nil
}

// checkSize tells a verified upload whose bytes were lost since (a disk
// that did not keep them, a hand that truncated them) from an intact one.
func (s *Server) checkSize(ctx context.Context, rec record) error {
	up, err := s.store.GetUpload(ctx, rec.ID)
	if err != nil {
		return fmt.Errorf("upload: verified %s has no data: %w", rec.ID, ErrCorrupt)
	}
	fi, err := up.GetInfo(ctx)
	if err != nil {
		return fmt.Errorf("upload: %s: %w", rec.ID, err)
	}
	st, err := os.Stat(fi.Storage[filestore.StorageKeyPath])
	if err != nil || st.Size() != rec.Size {
		return fmt.Errorf("upload: verified %s lost bytes: %w", rec.ID, ErrCorrupt)
	}
	return nil
}

func contextWith(r *http.Request, c *creation) context.Context {
	return context.WithValue(r.Context(), creationKey{}, c)
}
