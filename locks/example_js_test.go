//go:build js && wasm

// The examples run in Chromium (they need navigator.locks); their output is
// checked like any example's.

package locks_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tabfence/tabfence/locks"
)

func ExampleRequest() {
	ctx := context.Background()
	name, _ := locks.Name("settings", 1)
	err := locks.Request(ctx, name, locks.Options{}, func(ctx context.Context) error {
		// The lock is held while this runs, on its own goroutine: it may
		// await IndexedDB, fetch, other locks. Stop when ctx ends (the lock
		// was stolen, or the caller gave up).
		s, _ := locks.Query(ctx)
		fmt.Println("held:", s.Holds(name))
		return nil
	})
	fmt.Println("err:", err)

	// IfAvailable never waits.
	err = locks.Request(ctx, name, locks.Options{IfAvailable: true}, func(ctx context.Context) error {
		return locks.Request(ctx, name, locks.Options{IfAvailable: true}, func(context.Context) error { return nil })
	})
	fmt.Println("nested:", errors.Is(err, locks.ErrNotAcquired))
	// Output:
	// held: true
	// err: <nil>
	// nested: true
}

// memFencer hands out increasing tokens; package idb does this durably.
type memFencer struct {
	mu   sync.Mutex
	last uint64
}

func (f *memFencer) AllocateToken(ctx context.Context, resource, owner string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last++
	return f.last, nil
}

func ExampleElection() {
	fencer := &memFencer{}
	// Each tab reports to its own channel, so the output order below is
	// the order we read them in (callbacks of different elections run
	// concurrently).
	newTab := func(who string) (*locks.Election, chan string) {
		events := make(chan string, 16)
		e, err := locks.NewElection(locks.Config{
			Scope: "workspace-7", Protocol: 3, Fencer: fencer, OwnerID: who,
			OnLeader: func(l *locks.Leadership) {
				events <- fmt.Sprintf("%s leads %s with token %d", who, l.LockName, l.Token)
				// The leader's work runs under l.Ctx and carries l.Token.
				<-l.Ctx.Done()
			},
			OnFollower: func() { events <- who + " follows" },
			OnLost:     func(r locks.Reason, err error) { events <- who + " lost: " + r.String() },
		})
		if err != nil {
			panic(err)
		}
		return e, events
	}
	a, aEvents := newTab("a")
	b, bEvents := newTab("b")
	a.Start()
	fmt.Println(<-aEvents)
	b.Start()
	fmt.Println(<-bEvents)

	// A leader that is alive but useless is stolen from; the fencing
	// token makes its late writes harmless. a does not fight back: it
	// rejoins the queue as a follower.
	if _, err := b.Steal(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(<-bEvents)
	fmt.Println(<-aEvents)
	fmt.Println(<-aEvents)

	b.Close() // hands over to the next waiter
	fmt.Println(<-bEvents)
	fmt.Println(<-aEvents)
	a.Close()
	fmt.Println(<-aEvents)
	<-a.Done()
	<-b.Done()
	// Output:
	// a leads tabfence:workspace-7:v3 with token 1
	// b follows
	// b leads tabfence:workspace-7:v3 with token 2
	// a lost: stolen
	// a follows
	// b lost: closed
	// a leads tabfence:workspace-7:v3 with token 3
	// a lost: closed
}
