package upload_test

import (
	"context"
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

// startPatch sends a PATCH whose body is fed through the returned writer;
// its answer (or transport error) arrives on the channel.
func (ts *tusServer) startPatch(t *testing.T, path, user string, offset int) (*io.PipeWriter, <-chan int) {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest("PATCH", ts.http.URL+path, pr)
	require.NoError(t, err)
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("X-User", user)
	req.Header.Set("Upload-Offset", strconv.Itoa(offset))
	req.Header.Set("Content-Type", "application/offset+octet-stream")
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
	return pw, done
}

// A new owner's HEAD interrupts the old owner's hung PATCH (tusd's
// memorylocker asks the holder to release): the old PATCH is answered, the
// bytes it stored are kept, and the upload resumes from them intact.
func TestNewOwnerInterruptsAHungPatch(t *testing.T) {
	dir := t.TempDir()
	ts := newTus(t, dir, 0)
	data := payload(4 * chunk)
	c := ts.create(t, "alice", "rec-1", sum(data), len(data))
	loc := pathOf(t, c.header.Get("Location"))
	pw, done := ts.startPatch(t, loc, "alice", 0)
	_, err := pw.Write(data[:chunk])
	require.NoError(t, err)
	// The old PATCH holds the lock once its bytes reach the file.
	require.Eventually(t, func() bool {
		st, err := os.Stat(filepath.Join(dir, "data", idOf(t, loc)))
		return err == nil && st.Size() > 0
	}, 10*time.Second, 5*time.Millisecond)

	h := ts.do(t, "HEAD", loc, "alice", nil, nil) // the old PATCH never finishes its body
	require.Equal(t, 200, h.status)
	status := <-done
	require.NotEqual(t, 204, status, "the hung PATCH was stopped, not completed")
	_ = pw.Close()
	off, err := strconv.Atoi(h.header.Get("Upload-Offset"))
	require.NoError(t, err)
	require.LessOrEqual(t, off, chunk)
	p := ts.patch(t, loc, "alice", off, data[off:])
	require.Equal(t, 204, p.status, p.body)
	_, err = ts.Complete(context.Background(), "alice", idOf(t, loc))
	require.NoError(t, err)
	require.Equal(t, string(data), ts.stored(t, loc))
}

// A client that stops sending is cut off after NetworkTimeout, and keeps
// what it sent.
func TestSlowClientIsCutOff(t *testing.T) {
	ts := newTusWith(t, upload.Options{Dir: t.TempDir(), NetworkTimeout: 300 * time.Millisecond})
	data := payload(2 * chunk)
	c := ts.create(t, "alice", "rec-1", sum(data), len(data))
	loc := pathOf(t, c.header.Get("Location"))
	pw, done := ts.startPatch(t, loc, "alice", 0)
	defer pw.Close()
	_, err := pw.Write(data[:100])
	require.NoError(t, err)
	select {
	case status := <-done:
		require.NotEqual(t, 204, status)
	case <-time.After(20 * time.Second):
		t.Fatal("a stalled PATCH was not cut off")
	}
	h := ts.do(t, "HEAD", loc, "alice", nil, nil)
	require.Equal(t, "100", h.header.Get("Upload-Offset"))
}

// The last byte stored just before a crash, so the finish hook never ran:
// Complete verifies the bytes itself.
func TestCompleteVerifiesAfterACrashBeforeFinish(t *testing.T) {
	data := payload(chunk)
	ts, loc := crashBeforeFinish(t, data, data[len(data)-1])
	info, err := ts.Complete(context.Background(), "alice", idOf(t, loc))
	require.NoError(t, err)
	require.Equal(t, sum(data), info.SHA256)
}
