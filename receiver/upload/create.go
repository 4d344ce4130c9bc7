package upload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/tus/tusd/v2/pkg/filestore"
	tusd "github.com/tus/tusd/v2/pkg/handler"
)

// Answers of our own checks, in tusd's format ("CODE: message", text/plain)
// so a tus client shows them like tusd's.
var (
	errUnauthenticated = tusd.NewError("ERR_UNAUTHENTICATED", "no authenticated user", http.StatusUnauthorized)
	errOverride        = tusd.NewError("ERR_METHOD_OVERRIDE", "X-HTTP-Method-Override is not supported", http.StatusBadRequest)
	errDeferLength     = tusd.NewError("ERR_DEFER_LENGTH", "Upload-Defer-Length is not supported: declare Upload-Length with the sha256", http.StatusBadRequest)
	errKeyReused       = tusd.NewError("ERR_KEY_REUSED", "this key created an upload of another length or sha256", http.StatusUnprocessableEntity)
	errHashMismatch    = tusd.NewError("ERR_CHECKSUM_MISMATCH", "the bytes' sha256 is not the declared one; the upload is failed", 460)
	errTerminateDone   = tusd.NewError("ERR_UPLOAD_COMPLETE", "a complete upload may be referenced and is not deleted over tus", http.StatusForbidden)
	errInternal        = tusd.NewError("ERR_INTERNAL", "internal server error", http.StatusInternalServerError)
	errBusy            = busy()
)

// busy answers a creation that gave up waiting for another of its key.
func busy() tusd.Error {
	e := tusd.NewError("ERR_CREATION_BUSY", "another creation of this key is still being answered; retry", http.StatusServiceUnavailable)
	e.HTTPResponse.Header["Retry-After"] = "1"
	return e
}

func errBadMeta(msg string) error {
	return tusd.NewError("ERR_INVALID_METADATA", msg, http.StatusBadRequest)
}

func writeError(w http.ResponseWriter, err error) {
	var te tusd.Error
	if !errors.As(err, &te) {
		te = errInternal
	}
	h := w.Header()
	for k, v := range te.HTTPResponse.Header {
		h.Set(k, v)
	}
	h.Set("Tus-Resumable", "1.0.0")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(te.HTTPResponse.Body)))
	w.WriteHeader(te.HTTPResponse.StatusCode)
	_, _ = io.WriteString(w, te.HTTPResponse.Body)
}

// creation carries the checked request from create to tusd's hook.
type creation struct {
	user string
	meta meta
	size int64
}

type creationKey struct{}

// create answers a creation: a repeated one for (user, key) with the first
// upload, any other through tusd. The key's lock is held until tusd has
// answered, so concurrent creations for one record make one upload.
func (s *Server) create(w http.ResponseWriter, r *http.Request, user string) {
	m, err := parseMeta(r.Header)
	if err != nil {
		writeError(w, err)
		return
	}
	if r.Header.Get("Upload-Defer-Length") != "" {
		writeError(w, errDeferLength)
		return
	}
	size, err := strconv.ParseInt(r.Header.Get("Upload-Length"), 10, 64)
	if err != nil || size < 0 {
		writeError(w, tusd.ErrInvalidUploadLength)
		return
	}
	if s.opts.MaxSize > 0 && size > s.opts.MaxSize {
		writeError(w, tusd.ErrMaxSizeExceeded)
		return
	}
	wait, cancel := context.WithTimeout(r.Context(), s.opts.CreateWait)
	unlock, err := s.keys.lock(wait, s.files.index(user, m.Key))
	cancel()
	if err != nil {
		writeError(w, errBusy) // unread if the client gave up
		return
	}
	defer unlock()
	found, offset, err := s.existing(r, user, m, size)
	if err != nil {
		writeError(w, err)
		return
	}
	if found != "" {
		// 200, not 201: nothing was created. The body of a
		// creation-with-upload is not read; the client continues from
		// Upload-Offset, as after a HEAD.
		h := w.Header()
		h.Set("Location", s.location(r, found))
		h.Set("Upload-Offset", strconv.FormatInt(offset, 10))
		h.Set("Upload-Length", strconv.FormatInt(size, 10))
		h.Set("Tus-Resumable", "1.0.0")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		return
	}
	ctx := contextWith(r, &creation{user: user, meta: m, size: size})
	s.tus.ServeHTTP(w, r.WithContext(ctx))
}

// existing finds the upload a previous creation made for (user, key): ""
// when there is none to resume (never created, deleted, or failed its
// hash, which a new upload then replaces).
func (s *Server) existing(r *http.Request, user string, m meta, size int64) (string, int64, error) {
	id, err := s.files.lookup(user, m.Key)
	if err != nil || id == "" {
		return "", 0, err
	}
	rec, err := s.files.readRecord(id)
	if errors.Is(err, ErrUploadNotFound) {
		return "", 0, nil // crashed between the two writes of preCreate
	}
	if err != nil {
		return "", 0, err
	}
	if rec.User != user {
		return "", 0, fmt.Errorf("upload: key index of %s names another user's upload: %w", id, ErrCorrupt)
	}
	// A failed or deleted upload is replaced, whatever it declared: the
	// client corrects its sha256 or size under the same key.
	if rec.Status == statusFailed {
		return "", 0, nil
	}
	up, err := s.store.GetUpload(r.Context(), id)
	if errors.Is(err, tusd.ErrNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	if rec.SHA256 != m.SHA256 || rec.Size != size {
		return "", 0, errKeyReused
	}
	fi, err := up.GetInfo(r.Context())
	if err != nil {
		return "", 0, err
	}
	return id, fi.Offset, nil
}

// location is the URL tusd gives upload id, so a repeated creation names
// the first upload exactly as its creation did.
func (s *Server) location(r *http.Request, id string) string {
	host, proto := hostAndProto(r, s.opts.RespectForwardedHeaders)
	return proto + "://" + host + s.opts.BasePath + id
}

var (
	reForwardedHost  = regexp.MustCompile(`host="?([^;"]+)`)
	reForwardedProto = regexp.MustCompile(`proto=(https?)`)
)

// hostAndProto reads the request's origin as tusd's getHostAndProtocol
// does (unexported there): X-Forwarded-Host/-Proto, then Forwarded, when
// allowed.
func hostAndProto(r *http.Request, forwarded bool) (host, proto string) {
	host, proto = r.Host, "http"
	if r.TLS != nil {
		proto = "https"
	}
	if !forwarded {
		return host, proto
	}
	if h := r.Header.Get("X-Forwarded-Host"); h != "" {
		host = h
	}
	if h := r.Header.Get("X-Forwarded-Proto"); h == "http" || h == "https" {
		proto = h
	}
	if h := r.Header.Get("Forwarded"); h != "" {
		if m := reForwardedHost.FindStringSubmatch(h); len(m) == 2 {
			host = m[1]
		}
		if m := reForwardedProto.FindStringSubmatch(h); len(m) == 2 {
			proto = m[1]
		}
	}
	switch proto {
	case "http":
		host = strings.TrimSuffix(host, ":80")
	case "https":
		host = strings.TrimSuffix(host, ":443")
	}
	return host, proto
}

// preCreate binds the new upload to its user and key before tusd creates
// it: the owner record first (an upload without one is nobody's), then the
// index. The stored metadata is the validated one, never the client's.
func (s *Server) preCreate(ev tusd.HookEvent) (tusd.HTTPResponse, tusd.FileInfoChanges, error) {
	c, ok := ev.Context.Value(creationKey{}).(*creation)
	if !ok {
		return tusd.HTTPResponse{}, tusd.FileInfoChanges{}, errInternal
	}
	rec := record{ID: newID(), User: c.user, Key: c.meta.Key, SHA256: c.meta.SHA256,
		Filename: c.meta.Filename, Size: c.size, Status: statusOpen}
	if err := s.files.writeRecord(rec); err != nil {
		s.opts.Logger.Error("upload: create", "err", err)
		return tusd.HTTPResponse{}, tusd.FileInfoChanges{}, errInternal
	}
	if err := s.files.bind(c.user, c.meta.Key, rec.ID); err != nil {
		s.opts.Logger.Error("upload: create", "err", err)
		return tusd.HTTPResponse{}, tusd.FileInfoChanges{}, errInternal
	}
	md := tusd.MetaData{"key": rec.Key, "sha256": rec.SHA256}
	if rec.Filename != "" {
		md["filename"] = rec.Filename
	}
	return tusd.HTTPResponse{}, tusd.FileInfoChanges{ID: rec.ID, MetaData: md}, nil
}

// preFinish verifies the bytes once the last one is stored, so the client
// that sent it learns of a mismatch in the answer to that chunk.
func (s *Server) preFinish(ev tusd.HookEvent) (tusd.HTTPResponse, error) {
	rec, err := s.files.readRecord(ev.Upload.ID)
	if err == nil {
		rec, err = s.verify(rec, ev.Upload.Storage[filestore.StorageKeyPath])
	}
	if err != nil {
		s.opts.Logger.Error("upload: verify", "id", ev.Upload.ID, "err", err)
		return tusd.HTTPResponse{}, errInternal
	}
	if rec.Status == statusFailed {
		return tusd.HTTPResponse{}, errHashMismatch
	}
	return tusd.HTTPResponse{}, nil
}

// preTerminate lets the owner abandon an unfinished upload but never delete
// verified bytes a business record may reference.
func (s *Server) preTerminate(ev tusd.HookEvent) (tusd.HTTPResponse, error) {
	rec, err := s.files.readRecord(ev.Upload.ID)
	if err != nil {
		return tusd.HTTPResponse{}, errInternal
	}
	if rec.Status == statusComplete {
		return tusd.HTTPResponse{}, errTerminateDone
	}
	return tusd.HTTPResponse{}, nil
}

// verify hashes the stored bytes of rec (once: a decided status is kept)
// and records the verdict. The file is re-read rather than hashed chunk by
// chunk, because a chunk interrupted mid-way is kept in part and only the
// file says which bytes are really there.
func (s *Server) verify(rec record, path string) (record, error) {
	if rec.Status != statusOpen {
		return rec, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return rec, fmt.Errorf("upload: open %s: %w", rec.ID, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return rec, fmt.Errorf("upload: read %s: %w", rec.ID, err)
	}
	rec.Status = statusFailed
	if n == rec.Size && hex.EncodeToString(h.Sum(nil)) == rec.SHA256 {
		rec.Status = statusComplete
		// The record must not outlive the bytes it vouches for: tusd
		// writes them without fsync.
		if err := f.Sync(); err != nil {
			return rec, fmt.Errorf("upload: sync %s: %w", rec.ID, err)
		}
	}
	return rec, s.files.writeRecord(rec)
}
