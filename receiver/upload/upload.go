package upload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{opts: o, files: files{dir: o.Dir}}
	if err := s.files.init(); err != nil {
		return nil, err
	}
	s.store = filestore.New(s.files.store())
	composer := tusd.NewStoreComposer()
	s.store.UseIn(composer)
	memorylocker.New().UseIn(composer)
	h, err := tusd.NewHandler(tusd.Config{
		StoreComposer:              composer,
		BasePath:                   o.BasePath,
		MaxSize:                    o.MaxSize,
		DisableConcatenation:       true, // a final upload could name another user's partial ones
		Cors:                       &tusd.CorsConfig{Disable: true},
		Logger:                     expslog.New(expslog.NewTextHandler(io.Discard, nil)),
		NetworkTimeout:             o.NetworkTimeout,
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
	if r.Method == http.MethodOptions {
		s.tus.ServeHTTP(w, r)
		return
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
	default:
		s.tus.ServeHTTP(w, r)
	}
}

// Complete is what a business handler calls, in its receiver transaction,
// before it references uploadID: the upload must be user's, whole, and
// match its declared SHA-256. An upload whose last chunk was stored just
// before a crash (so its finish hook never ran) is verified here.
func (s *Server) Complete(ctx context.Context, user, uploadID string) (Info, error) {
	rec, err := s.files.readRecord(uploadID)
	if err != nil {
		return Info{}, err
	}
	if rec.User != user {
		return Info{}, ErrUploadNotFound
	}
	if rec.Status == statusOpen {
		up, err := s.store.GetUpload(ctx, uploadID)
		if errors.Is(err, tusd.ErrNotFound) {
			return Info{}, ErrUploadNotFound
		}
		if err != nil {
			return Info{}, fmt.Errorf("upload: %s: %w", uploadID, err)
		}
		fi, err := up.GetInfo(ctx)
		if err != nil {
			return Info{}, fmt.Errorf("upload: %s: %w", uploadID, err)
		}
		if fi.SizeIsDeferred || fi.Offset < fi.Size {
			return Info{}, ErrUploadIncomplete
		}
		if rec, err = s.verify(rec, fi.Storage[filestore.StorageKeyPath]); err != nil {
			return Info{}, err
		}
	}
	if rec.Status == statusFailed {
		return Info{}, ErrUploadHashMismatch
	}
	return Info{ID: rec.ID, Size: rec.Size, SHA256: rec.SHA256, Key: rec.Key, Filename: rec.Filename}, nil
}

func contextWith(r *http.Request, c *creation) context.Context {
	return context.WithValue(r.Context(), creationKey{}, c)
}
