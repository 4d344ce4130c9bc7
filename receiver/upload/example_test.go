package upload_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
	"github.com/tabfence/tabfence/receiver/upload"
	"github.com/tabfence/tabfence/wire"
)

// A Go server mounts the tus endpoint beside its receiver routes, behind the
// same Scope. The business mutation that references an upload (here: attach
// it to a note) calls Complete inside its receiver transaction, so it takes
// effect once per idempotency key and only for whole, verified bytes.
func Example() {
	dir, _ := os.MkdirTemp("", "upload-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	scope := func(r *http.Request) (string, error) {
		if u := r.Header.Get("X-User"); u != "" {
			return u, nil
		}
		return "", receiver.ErrUnauthenticated
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	up, err := upload.New(upload.Options{Dir: filepath.Join(dir, "uploads"), MaxSize: 100 << 20, Scope: scope, Logger: quiet})
	if err != nil {
		panic(err)
	}
	rc := receiver.New(store, receiver.Options{Scope: scope, Logger: quiet})

	mux := http.NewServeMux()
	mux.Handle("/files/", up.Handler())
	mux.Handle("POST /attachments", rc.Handle(func(ctx context.Context, tx receiver.Tx, r *receiver.Request) (receiver.Response, error) {
		info, err := up.Complete(ctx, r.Scope, string(r.Body))
		if errors.Is(err, upload.ErrUploadIncomplete) {
			return receiver.JSON(http.StatusConflict, map[string]string{"error": "upload incomplete"})
		}
		if err != nil {
			return receiver.JSON(http.StatusUnprocessableEntity, map[string]string{"error": err.Error()})
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS attachments (user_id TEXT, upload TEXT, size BIGINT)`); err != nil {
			return receiver.Response{}, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO attachments VALUES ($1, $2, $3)`, r.Scope, info.ID, info.Size); err != nil {
			return receiver.Response{}, err
		}
		return receiver.JSON(http.StatusCreated, map[string]any{"filename": info.Filename, "size": info.Size})
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	send := func(method, url string, h map[string]string, body []byte) *http.Response {
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		req.Header.Set("X-User", "alice")
		req.Header.Set("Tus-Resumable", "1.0.0")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Println(strings.TrimSpace(fmt.Sprintln(method, resp.StatusCode, string(bytes.TrimSpace(b)))))
		return resp
	}
	photo := bytes.Repeat([]byte("pixels"), 1000)
	h := sha256.Sum256(photo)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	created := send("POST", srv.URL+"/files/", map[string]string{
		"Upload-Length":   strconv.Itoa(len(photo)),
		"Upload-Metadata": "key " + b64("note-7-photo") + ",sha256 " + b64(hex.EncodeToString(h[:])) + ",filename " + b64("cat.jpg"),
	}, nil)
	loc := created.Header.Get("Location")
	id := loc[len(srv.URL+"/files/"):]
	attach := func(key string) {
		send("POST", srv.URL+"/attachments", map[string]string{wire.HeaderIdempotencyKey: key}, []byte(id))
	}
	attach("attach-1") // too early: the bytes are not there yet
	for off := 0; off < len(photo); off += 4000 {
		send("PATCH", loc, map[string]string{
			"Upload-Offset": strconv.Itoa(off),
			"Content-Type":  "application/offset+octet-stream",
		}, photo[off:min(off+4000, len(photo))])
	}
	attach("attach-2")
	attach("attach-2") // a retry: replayed, attached once
	// Output:
	// POST 201
	// POST 409 {"error":"upload incomplete"}
	// PATCH 204
	// PATCH 204
	// POST 201 {"filename":"cat.jpg","size":6000}
	// POST 201 {"filename":"cat.jpg","size":6000}
}
