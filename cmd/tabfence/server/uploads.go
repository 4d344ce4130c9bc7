package server

import (
	"net/http"
	"path/filepath"

	"github.com/tabfence/tabfence/receiver/upload"
)

// DefaultMaxUpload is the largest upload accepted when Uploads.MaxSize is
// zero: a long phone video, far above what a demo needs, well below a disk.
const DefaultMaxUpload = 256 << 20

// UploadsPath is where the tus endpoint is mounted.
const UploadsPath = "/files/"

// UploadConfig configures the resumable uploads at /files/ (receiver/upload).
type UploadConfig struct {
	// Dir holds the uploads. Default: "uploads" beside a SQLite database.
	// With PostgreSQL there is no default and /files/ is not mounted unless
	// Dir is set: the file store and its locks are one process's, so
	// several instances cannot share them.
	Dir string
	// MaxSize is the largest Upload-Length accepted (default
	// DefaultMaxUpload); larger: 413.
	MaxSize int64
	// RespectForwardedHeaders builds upload URLs from X-Forwarded-Host/
	// -Proto and Forwarded: only behind a proxy that sets them, as a client
	// could otherwise name any origin in its own Location.
	RespectForwardedHeaders bool
}

// newUploads builds the tus endpoint behind the demo's scope, or nil when
// uploads are off (PostgreSQL without an upload directory).
func newUploads(cfg Config) (*upload.Server, error) {
	dir := cfg.Uploads.Dir
	if dir == "" {
		if isPostgres(cfg.DB) {
			return nil, nil
		}
		dir = filepath.Join(filepath.Dir(filepath.Clean(cfg.DB)), "uploads")
	}
	max := cfg.Uploads.MaxSize
	if max <= 0 {
		max = DefaultMaxUpload
	}
	return upload.New(upload.Options{Dir: dir, BasePath: UploadsPath, MaxSize: max,
		RespectForwardedHeaders: cfg.Uploads.RespectForwardedHeaders, Scope: demoScope, Logger: cfg.Logger})
}

// Uploads returns the tus endpoint mounted at /files/ (nil when uploads are
// off): a business handler calls its Complete before it references an
// upload.
func (s *Server) Uploads() *upload.Server { return s.up }

func (s *Server) mountUploads(mux *http.ServeMux) {
	if s.up == nil {
		return
	}
	// One pattern per method: a method-less "/files/" would conflict with
	// the demo's "GET /". GET stays mounted though downloads are off, so
	// it is tus's answer (405, or 404 for another's id), not a demo page.
	h := s.up.Handler()
	for _, m := range []string{"POST", "HEAD", "PATCH", "GET", "DELETE", "OPTIONS"} {
		mux.Handle(m+" "+UploadsPath, h)
	}
}
