//go:build js && wasm

package idbstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// The flush owner's failure survives IndexedDB (every tab's status reads it
// from there), and clearing it stores none.
func TestIDBMetaFailure(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, "tabfence-outbox:meta-failure-"+time.Now().Format("150405.000000"))
	at := time.UnixMilli(1_700_000_000_000)
	f := outbox.SendFailure{Kind: outbox.FailureUnreachable, Since: at, NextAttemptAt: at.Add(4 * time.Second),
		Error: queue.ErrorInfo{Code: queue.CodeNetwork, Message: "fence: TypeError: Failed to fetch", At: at}}
	if _, err := s.UpdateMeta(ctx, func(m *outbox.Meta) error { m.Failure, m.LastError = f, &f.Error; return nil }); err != nil {
		t.Fatal(err)
	}
	p, err := s.Status(ctx)
	require.NoError(t, err)
	g := p.Failure
	if g.Kind != f.Kind || !g.Since.Equal(f.Since) || !g.NextAttemptAt.Equal(f.NextAttemptAt) || !sameError(&g.Error, &f.Error) || !sameError(p.LastError, &f.Error) {
		t.Fatalf("failure %+v, last error %+v", p.Failure, p.LastError)
	}
	if _, err := s.UpdateMeta(ctx, func(m *outbox.Meta) error { m.Failure, m.LastError = outbox.SendFailure{}, nil; return nil }); err != nil {
		t.Fatal(err)
	}
	m, err := s.UpdateMeta(ctx, func(*outbox.Meta) error { return nil })
	if err != nil || m.Failure.Failing() || m.LastError != nil {
		t.Fatalf("after clearing: %+v %v", m, err)
	}
}

func sameError(a, b *queue.ErrorInfo) bool {
	return a != nil && b != nil && a.Code == b.Code && a.Message == b.Message && a.Status == b.Status && a.At.Equal(b.At)
}
