package upload_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver/upload"
)

// A request without Tus-Resumable 1.0.0 is answered 412 before any of our
// own answers (200 of a known key, 400, 413); HEAD and GET need none.
func TestTusResumableIsCheckedFirst(t *testing.T) {
	ts := newTus(t, t.TempDir(), 1000)
	data := payload(100)
	c := ts.create(t, "alice", "rec-1", sum(data), len(data))
	require.Equal(t, 201, c.status, c.body)
	loc := pathOf(t, c.header.Get("Location"))
	none := map[string]string{"Tus-Resumable": ""}
	old := map[string]string{"Tus-Resumable": "0.2.2", "Upload-Length": "100",
		"Upload-Metadata": metadata("key", "rec-1", "sha256", sum(data))}
	cases := map[string]answer{
		"known key":     ts.do(t, "POST", "/files/", "alice", old, nil),
		"bad metadata":  ts.do(t, "POST", "/files/", "alice", map[string]string{"Tus-Resumable": "", "Upload-Length": "10"}, nil),
		"too large":     ts.do(t, "POST", "/files/", "alice", map[string]string{"Tus-Resumable": "", "Upload-Length": "1001"}, nil),
		"PATCH":         ts.do(t, "PATCH", loc, "alice", map[string]string{"Tus-Resumable": "", "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"}, data),
		"DELETE":        ts.do(t, "DELETE", loc, "alice", none, nil),
		"unauthorized":  ts.do(t, "POST", "/files/", "", none, nil),
		"override POST": ts.do(t, "POST", "/files/", "alice", map[string]string{"Tus-Resumable": "", "X-HTTP-Method-Override": "PATCH"}, nil),
	}
	for name, a := range cases {
		require.Equal(t, 412, a.status, name)
		require.Contains(t, a.body, "ERR_UNSUPPORTED_VERSION", name)
		require.Equal(t, "1.0.0", a.header.Get("Tus-Resumable"), name)
	}
	h := ts.do(t, "HEAD", loc, "alice", none, nil)
	require.Equal(t, 200, h.status)
	require.Equal(t, "0", h.header.Get("Upload-Offset"))
}

// OPTIONS advertises what a creation accepts: no deferred length, no
// concatenation.
func TestOptionsAdvertisesOnlyAcceptedExtensions(t *testing.T) {
	ts := newTus(t, t.TempDir(), 1000)
	o := ts.do(t, "OPTIONS", "/files/", "", nil, nil)
	require.Equal(t, 200, o.status, o.body)
	require.Equal(t, "creation,creation-with-upload,termination", o.header.Get("Tus-Extension"))
	require.Equal(t, "1000", o.header.Get("Tus-Max-Size"))
}

// A creation-with-upload holds its key while its body arrives; a second
// creation of the key waits CreateWait at most, then is told to retry.
func TestCreationWaitIsBounded(t *testing.T) {
	ts := newTusWith(t, upload.Options{Dir: t.TempDir(), CreateWait: 100 * time.Millisecond})
	data := payload(2 * chunk)
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", ts.http.URL+"/files/", pr)
	require.NoError(t, err)
	for k, v := range map[string]string{"Tus-Resumable": "1.0.0", "X-User": "alice",
		"Upload-Length": strconv.Itoa(len(data)), "Content-Type": "application/offset+octet-stream",
		"Upload-Metadata": metadata("key", "rec-1", "sha256", sum(data))} {
		req.Header.Set(k, v)
	}
	done := make(chan int, 1)
	go func() {
		resp, err := ts.http.Client().Do(req)
		if err != nil {
			done <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	_, err = pw.Write(data[:chunk])
	require.NoError(t, err)
	require.Eventually(t, func() bool { // its bytes are stored: it holds the key
		m, _ := filepath.Glob(filepath.Join(ts.dir, "data", "*"))
		for _, f := range m {
			if st, err := os.Stat(f); err == nil && st.Size() > 0 && filepath.Ext(f) == "" {
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond)

	busy := ts.create(t, "alice", "rec-1", sum(data), len(data))
	require.Equal(t, 503, busy.status, busy.body)
	require.Equal(t, "1", busy.header.Get("Retry-After"))
	require.Contains(t, busy.body, "ERR_CREATION_BUSY")

	require.NoError(t, pw.Close())
	require.Equal(t, 201, <-done)
	again := ts.create(t, "alice", "rec-1", sum(data), len(data))
	require.Equal(t, 200, again.status, again.body)
	require.Equal(t, strconv.Itoa(chunk), again.header.Get("Upload-Offset"))
}

// Behind a proxy, Location names the proxy's origin, in tusd's 201 and in
// our 200 of a repeated creation alike.
func TestLocationRespectsForwardedHeaders(t *testing.T) {
	data := payload(100)
	fwd := map[string]string{"X-Forwarded-Host": "app.example", "X-Forwarded-Proto": "https",
		"Upload-Length": strconv.Itoa(len(data)), "Upload-Metadata": metadata("key", "rec-1", "sha256", sum(data))}
	ts := newTusWith(t, upload.Options{Dir: t.TempDir(), RespectForwardedHeaders: true})
	c := ts.do(t, "POST", "/files/", "alice", fwd, nil)
	require.Equal(t, 201, c.status, c.body)
	require.Regexp(t, `^https://app\.example/files/[0-9a-f]{32}$`, c.header.Get("Location"))
	again := ts.do(t, "POST", "/files/", "alice", fwd, nil)
	require.Equal(t, 200, again.status, again.body)
	require.Equal(t, c.header.Get("Location"), again.header.Get("Location"))
	fwd["Forwarded"] = `for=1.2.3.4;host="other.example";proto=http`
	fwd["Upload-Metadata"] = metadata("key", "rec-2", "sha256", sum(data))
	c = ts.do(t, "POST", "/files/", "alice", fwd, nil)
	require.Regexp(t, `^http://other\.example/files/`, c.header.Get("Location"))
	require.Equal(t, c.header.Get("Location"), ts.do(t, "POST", "/files/", "alice", fwd, nil).header.Get("Location"))

	// Off (the default), the headers are ignored.
	plain := newTus(t, t.TempDir(), 0)
	c = plain.do(t, "POST", "/files/", "alice", fwd, nil)
	require.Equal(t, 201, c.status, c.body)
	require.NotContains(t, c.header.Get("Location"), "example")
	require.Equal(t, c.header.Get("Location"), plain.do(t, "POST", "/files/", "alice", fwd, nil).header.Get("Location"))
}
