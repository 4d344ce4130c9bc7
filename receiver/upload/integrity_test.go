package upload_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver/upload"
)

// crashBeforeFinish stores all but the last byte of data over tus, then
// appends last as if the process died after writing it and before its
// finish hook ran; it returns the upload's path on a restarted Server.
func crashBeforeFinish(t *testing.T, data []byte, last byte) (*tusServer, string) {
	t.Helper()
	dir := t.TempDir()
	ts := newTus(t, dir, 0)
	c := ts.create(t, "alice", "rec-1", sum(data), len(data))
	require.Equal(t, 201, c.status, c.body)
	loc := pathOf(t, c.header.Get("Location"))
	n := len(data) - 1
	require.Equal(t, 204, ts.patch(t, loc, "alice", 0, data[:n]).status)
	f, err := os.OpenFile(filepath.Join(dir, "data", idOf(t, loc)), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{last})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	ts.http.Close()
	return newTus(t, dir, 0), loc
}

// The same crash with a wrong last byte: Complete finds the mismatch, and
// the upload then answers as failed rather than as finished.
func TestCompleteFailsWrongBytesAfterACrash(t *testing.T) {
	data := payload(chunk)
	ts, loc := crashBeforeFinish(t, data, data[len(data)-1]^0xff)
	_, err := ts.Complete(context.Background(), "alice", idOf(t, loc))
	require.ErrorIs(t, err, upload.ErrUploadHashMismatch)
	_, err = ts.Complete(context.Background(), "alice", idOf(t, loc))
	require.ErrorIs(t, err, upload.ErrUploadHashMismatch)
	require.Equal(t, 460, ts.do(t, "HEAD", loc, "alice", nil, nil).status)
}

// A verified upload whose file lost bytes since (a disk that did not keep
// them) is not handed out as complete.
func TestCompleteRefusesAShortFileUnderACompleteRecord(t *testing.T) {
	ts := newTus(t, t.TempDir(), 0)
	data := payload(chunk)
	c := ts.create(t, "alice", "rec-1", sum(data), len(data))
	loc := pathOf(t, c.header.Get("Location"))
	require.Equal(t, 204, ts.patch(t, loc, "alice", 0, data).status)
	_, err := ts.Complete(context.Background(), "alice", idOf(t, loc))
	require.NoError(t, err)
	require.NoError(t, os.Truncate(filepath.Join(ts.dir, "data", idOf(t, loc)), chunk-10))
	_, err = ts.Complete(context.Background(), "alice", idOf(t, loc))
	require.ErrorIs(t, err, upload.ErrCorrupt)
}

// Complete verifies under tusd's lock of the upload, and reads the upload
// again once it has it: a DELETE that held the lock meanwhile wins.
func TestCompleteWaitsForTheUploadsLock(t *testing.T) {
	data := payload(chunk)
	ts, loc := crashBeforeFinish(t, data, data[len(data)-1])
	id := idOf(t, loc)
	unlock, asked, err := upload.LockUpload(ts.Server, id)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = ts.Complete(short, "alice", id)
	require.Error(t, err, "Complete verified without the lock")
	require.NotErrorIs(t, err, upload.ErrUploadIncomplete)

	done := make(chan error, 1)
	go func() {
		_, err := ts.Complete(context.Background(), "alice", id)
		done <- err
	}()
	select {
	case <-asked: // Complete waits in Lock, past its first look
	case <-time.After(10 * time.Second):
		t.Fatal("Complete never asked for the lock")
	}
	// What tusd's DELETE does under the lock.
	require.NoError(t, os.Remove(filepath.Join(ts.dir, "data", id)))
	require.NoError(t, os.Remove(filepath.Join(ts.dir, "data", id+".info")))
	unlock()
	require.ErrorIs(t, <-done, upload.ErrUploadNotFound)
}
