package upload_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver/upload"
)

const chunk = 64 << 10

// A whole exchange: creation, a chunk, a restart (a new Server on the same
// Dir), HEAD for the offset, the remaining chunks, and Complete.
func TestResumeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	data := payload(3*chunk + 123)
	ts := newTus(t, dir, 0)
	c := ts.create(t, "alice", "rec-1", sum(data), len(data))
	require.Equal(t, 201, c.status, c.body)
	loc := pathOf(t, c.header.Get("Location"))
	p := ts.patch(t, loc, "alice", 0, data[:chunk])
	require.Equal(t, 204, p.status, p.body)
	require.Equal(t, strconv.Itoa(chunk), p.header.Get("Upload-Offset"))
	_, err := ts.Complete(context.Background(), "alice", idOf(t, loc))
	require.ErrorIs(t, err, upload.ErrUploadIncomplete)
	ts.http.Close()

	ts = newTus(t, dir, 0)
	h := ts.do(t, "HEAD", loc, "alice", nil, nil)
	require.Equal(t, 200, h.status)
	off, err := strconv.Atoi(h.header.Get("Upload-Offset"))
	require.NoError(t, err)
	require.Equal(t, chunk, off)
	require.Equal(t, strconv.Itoa(len(data)), h.header.Get("Upload-Length"))
	for off < len(data) {
		end := min(off+chunk, len(data))
		p := ts.patch(t, loc, "alice", off, data[off:end])
		require.Equal(t, 204, p.status, p.body)
		require.Equal(t, strconv.Itoa(end), p.header.Get("Upload-Offset"))
		off = end
	}
	info, err := ts.Complete(context.Background(), "alice", idOf(t, loc))
	require.NoError(t, err)
	require.Equal(t, upload.Info{ID: idOf(t, loc), Size: int64(len(data)), SHA256: sum(data),
		Key: "rec-1", Filename: "photo.jpg"}, info)
	require.Equal(t, string(data), ts.stored(t, loc))
	// Downloads are off: the outbox never reads an upload back.
	require.Equal(t, 405, ts.do(t, "GET", loc, "alice", nil, nil).status)
	// Verified bytes may be referenced, so they are not deleted over tus.
	require.Equal(t, 403, ts.do(t, "DELETE", loc, "alice", nil, nil).status)
}

func TestHashMismatchFailsTheUpload(t *testing.T) {
	ts := newTus(t, t.TempDir(), 0)
	data := payload(chunk)
	wrong := sum([]byte("something else"))
	c := ts.create(t, "alice", "rec-1", wrong, len(data))
	require.Equal(t, 201, c.status, c.body)
	loc := pathOf(t, c.header.Get("Location"))
	p := ts.patch(t, loc, "alice", 0, data)
	require.Equal(t, 460, p.status)
	require.Contains(t, p.body, "ERR_CHECKSUM_MISMATCH")
	_, err := ts.Complete(context.Background(), "alice", idOf(t, loc))
	require.ErrorIs(t, err, upload.ErrUploadHashMismatch)
	// A failed upload answers as failed, not as finished.
	require.Equal(t, 460, ts.do(t, "HEAD", loc, "alice", nil, nil).status)
	p = ts.patch(t, loc, "alice", len(data), nil)
	require.Equal(t, 460, p.status)
	require.Contains(t, p.body, "ERR_CHECKSUM_MISMATCH")
	// A new creation for the key, with the sha256 corrected, replaces the
	// failed upload; the failed one stays failed.
	again := ts.create(t, "alice", "rec-1", sum(data), len(data))
	require.Equal(t, 201, again.status, again.body)
	loc2 := pathOf(t, again.header.Get("Location"))
	require.NotEqual(t, loc, loc2)
	require.Equal(t, 204, ts.patch(t, loc2, "alice", 0, data).status)
	_, err = ts.Complete(context.Background(), "alice", idOf(t, loc2))
	require.NoError(t, err)
	_, err = ts.Complete(context.Background(), "alice", idOf(t, loc))
	require.ErrorIs(t, err, upload.ErrUploadHashMismatch)
}

func TestSecondCreationFindsTheFirst(t *testing.T) {
	ts := newTus(t, t.TempDir(), 0)
	data := payload(2 * chunk)
	c := ts.create(t, "alice", "rec-1", sum(data), len(data))
	require.Equal(t, 201, c.status, c.body)
	loc := pathOf(t, c.header.Get("Location"))
	require.Equal(t, 204, ts.patch(t, loc, "alice", 0, data[:chunk]).status)

	again := ts.create(t, "alice", "rec-1", sum(data), len(data))
	require.Equal(t, 200, again.status, again.body)
	require.Equal(t, loc, pathOf(t, again.header.Get("Location")))
	require.Equal(t, strconv.Itoa(chunk), again.header.Get("Upload-Offset"))

	// The same key with other bytes is a client bug, not a retry.
	reused := ts.create(t, "alice", "rec-1", sum(data[1:]), len(data)-1)
	require.Equal(t, 422, reused.status)
	require.Contains(t, reused.body, "ERR_KEY_REUSED")
	// Keys are per user: bob's "rec-1" is another upload.
	bob := ts.create(t, "bob", "rec-1", sum(data), len(data))
	require.Equal(t, 201, bob.status, bob.body)
	require.NotEqual(t, loc, pathOf(t, bob.header.Get("Location")))
}

func TestConcurrentCreationsMakeOneUpload(t *testing.T) {
	ts := newTus(t, t.TempDir(), 0)
	data := payload(100)
	const n = 8
	locs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := ts.create(t, "alice", "rec-1", sum(data), len(data))
			locs[i] = c.header.Get("Location")
		})
	}
	wg.Wait()
	for _, l := range locs {
		require.Equal(t, locs[0], l)
	}
	require.NotEmpty(t, locs[0])
}

func TestAnotherUsersUploadIsNotFound(t *testing.T) {
	ts := newTus(t, t.TempDir(), 0)
	data := payload(chunk)
	c := ts.create(t, "alice", "rec-1", sum(data), len(data))
	require.Equal(t, 201, c.status, c.body)
	loc := pathOf(t, c.header.Get("Location"))
	unknown := "/files/0123456789abcdef0123456789abcdef"
	// Encoded, a traversal passes the mux (which redirects a plain
	// "/files/../x") and reaches the handler as an id.
	for _, path := range []string{loc, unknown, "/files/%2e%2e%2fowners%2f" + idOf(t, loc) + ".json",
		"/files/..%2fdata%2f" + idOf(t, loc), "/files/" + idOf(t, loc) + ".info"} {
		require.Equal(t, 404, ts.do(t, "HEAD", path, "bob", nil, nil).status, path)
		for _, a := range []answer{ts.patch(t, path, "bob", 0, data), ts.do(t, "GET", path, "bob", nil, nil),
			ts.do(t, "DELETE", path, "bob", nil, nil)} {
			require.Equal(t, 404, a.status, path)
			require.Contains(t, a.body, "ERR_UPLOAD_NOT_FOUND", path)
		}
	}
	_, err := ts.Complete(context.Background(), "bob", idOf(t, loc))
	require.ErrorIs(t, err, upload.ErrUploadNotFound)
	_, err = ts.Complete(context.Background(), "alice", "../x")
	require.ErrorIs(t, err, upload.ErrUploadNotFound)
	// Nothing of bob's requests reached alice's upload.
	h := ts.do(t, "HEAD", loc, "alice", nil, nil)
	require.Equal(t, 200, h.status)
	require.Equal(t, "0", h.header.Get("Upload-Offset"))
}

func TestRefusals(t *testing.T) {
	ts := newTus(t, t.TempDir(), 1000)
	ok := sum(nil)
	over := ts.create(t, "alice", "big", ok, 1001)
	require.Equal(t, 413, over.status, over.body)
	require.Equal(t, 201, ts.create(t, "alice", "fits", ok, 1000).status)

	require.Equal(t, 401, ts.create(t, "", "k", ok, 10).status)
	c := ts.create(t, "alice", "k", ok, 10)
	require.Equal(t, 401, ts.do(t, "HEAD", pathOf(t, c.header.Get("Location")), "", nil, nil).status)

	bad := map[string]map[string]string{
		"no metadata":     {"Upload-Length": "10"},
		"bad base64":      {"Upload-Length": "10", "Upload-Metadata": "key !!!,sha256 " + ok},
		"no key":          {"Upload-Length": "10", "Upload-Metadata": metadata("sha256", ok)},
		"no sha256":       {"Upload-Length": "10", "Upload-Metadata": metadata("key", "k")},
		"short sha256":    {"Upload-Length": "10", "Upload-Metadata": metadata("key", "k", "sha256", ok[:60])},
		"key twice":       {"Upload-Length": "10", "Upload-Metadata": metadata("key", "k", "key", "j", "sha256", ok)},
		"key with space":  {"Upload-Length": "10", "Upload-Metadata": metadata("key", "a b", "sha256", ok)},
		"control in name": {"Upload-Length": "10", "Upload-Metadata": metadata("key", "k", "sha256", ok, "filename", "a\nb")},
		"huge":            {"Upload-Length": "10", "Upload-Metadata": metadata("key", "k", "sha256", ok, "pad", string(make([]byte, 5000)))},
		"deferred length": {"Upload-Defer-Length": "1", "Upload-Metadata": metadata("key", "k", "sha256", ok)},
		"method override": {"X-HTTP-Method-Override": "PATCH", "Upload-Length": "10", "Upload-Metadata": metadata("key", "k", "sha256", ok)},
	}
	for name, h := range bad {
		a := ts.do(t, "POST", "/files/", "alice", h, nil)
		require.Equal(t, 400, a.status, name)
		require.Contains(t, a.body, "ERR_", name)
	}
}

// A chunk re-sent at an offset already passed is refused whole, so a
// duplicate (a retry after a lost answer) can never overwrite stored bytes.
func TestStaleOffsetConflicts(t *testing.T) {
	ts := newTus(t, t.TempDir(), 0)
	data := payload(2 * chunk)
	c := ts.create(t, "alice", "rec-1", sum(data), len(data))
	loc := pathOf(t, c.header.Get("Location"))
	require.Equal(t, 204, ts.patch(t, loc, "alice", 0, data[:chunk]).status)
	stale := ts.patch(t, loc, "alice", 0, payload(chunk + 5)[5:])
	require.Equal(t, 409, stale.status, stale.body)
	ahead := ts.patch(t, loc, "alice", chunk+1, data[chunk+1:])
	require.Equal(t, 409, ahead.status, ahead.body)
	require.Equal(t, strconv.Itoa(chunk), ts.do(t, "HEAD", loc, "alice", nil, nil).header.Get("Upload-Offset"))
	require.Equal(t, 204, ts.patch(t, loc, "alice", chunk, data[chunk:]).status)
	_, err := ts.Complete(context.Background(), "alice", idOf(t, loc))
	require.NoError(t, err)
	require.Equal(t, string(data), ts.stored(t, loc))
}

func TestOwnerMayAbandonAnUnfinishedUpload(t *testing.T) {
	ts := newTus(t, t.TempDir(), 0)
	data := payload(chunk)
	c := ts.create(t, "alice", "rec-1", sum(data), len(data))
	loc := pathOf(t, c.header.Get("Location"))
	require.Equal(t, 204, ts.do(t, "DELETE", loc, "alice", nil, nil).status)
	_, err := ts.Complete(context.Background(), "alice", idOf(t, loc))
	require.ErrorIs(t, err, upload.ErrUploadNotFound)
	// The key is free again, for other bytes too.
	other := data[:100]
	again := ts.create(t, "alice", "rec-1", sum(other), len(other))
	require.Equal(t, 201, again.status, again.body)
}
