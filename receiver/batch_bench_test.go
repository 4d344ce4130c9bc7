package receiver_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/pgstore"
	"github.com/tabfence/tabfence/receiver/pgstore/pgtest"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
	"github.com/tabfence/tabfence/wire"
)

// BenchmarkBatch100 posts batches of 100 new mutations through HandleBatch
// over loopback HTTP; mutations/s is the figure.
func BenchmarkBatch100(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		st, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "b.db"))
		require.NoError(b, err)
		benchBatch(b, st)
	})
	b.Run("postgres", func(b *testing.B) {
		st, err := pgstore.Open(context.Background(), pgtest.SchemaURL(b), 0)
		require.NoError(b, err)
		benchBatch(b, st)
	})
}

func benchBatch(b *testing.B, st receiver.Store) {
	e := newBatchEnv(b, st, receiver.Options{})
	ms := make([]wire.BatchMutation, 100)
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range ms {
			ms[j] = mut(fmt.Sprintf("k%d-%d", i, j), "ok", fmt.Sprintf("e%d", j%10))
		}
		resp, rs, body := e.post(ms)
		if resp.StatusCode != 200 || len(rs) != len(ms) || rs[99].Outcome != wire.BatchApplied {
			b.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	b.ReportMetric(float64(b.N*len(ms))/b.Elapsed().Seconds(), "mutations/s")
	// The process's CPU time (client, receiver and, for SQLite, the
	// database) per mutation: on a loaded machine the wall-clock rate
	// says more about the other processes.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*len(ms)), "cpu-µs/mutation")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
