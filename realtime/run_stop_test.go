package realtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tabfence/tabfence/realtime"
)

// fakeSocket records its Close; Recv waits for it.
type fakeSocket struct {
	once   sync.Once
	closed chan struct{}
}

func newFakeSocket() *fakeSocket { return &fakeSocket{closed: make(chan struct{})} }

func (s *fakeSocket) Send(context.Context, []byte) error { return nil }
func (s *fakeSocket) Recv(ctx context.Context) ([]byte, error) {
	select {
	case <-s.closed:
	case <-ctx.Done():
	}
	return nil, errors.New("closed")
}
func (s *fakeSocket) Close(string)        { s.once.Do(func() { close(s.closed) }) }
func (s *fakeSocket) CloseCode(error) int { return 1000 }

// A socket whose dial completes just after the driver stopped is closed,
// not left open with nobody reading it (the server would count a
// connection from a tab that no longer leads).
func TestSocketOpenedAsDriverStopsIsClosed(t *testing.T) {
	dialing, release := make(chan struct{}), make(chan struct{})
	sock := newFakeSocket()
	dial := func(context.Context) (realtime.Socket, error) {
		close(dialing)
		<-release // the browser opens the socket whatever the context says
		return sock, nil
	}
	l := realtime.NewLeader(realtime.Config{PongTimeout: time.Minute}, 0, realtime.NewPending())
	d := realtime.NewDriver(l, dial, nil, func(realtime.Action) {})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); d.Run(ctx) }()
	<-dialing
	cancel()
	<-ran
	close(release)
	select {
	case <-sock.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the socket that opened as the driver stopped was never closed")
	}
}
