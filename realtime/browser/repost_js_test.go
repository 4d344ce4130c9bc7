//go:build js && wasm

package browser_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tabfence/tabfence/realtime/browser"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// The leader deletes a settled mutation's pending row, then dies before it
// announces the outcome. The tab that made the mutation still settles: it
// hands it to the next leader (tab0: it becomes that leader; tab1: it stays
// a follower), which resends it, and the server's stored ack (replayed)
// settles it in every tab. The server applied it once.
func TestConnLostSettledResent(t *testing.T) {
	for _, who := range []int{0, 1} {
		t.Run("tab"+strconv.Itoa(who), func(t *testing.T) {
			f := newFixture(t)
			conns := f.open(3)
			waitFor(t, "ready", func() bool { return allReady(conns) })
			lead, rest := leaderOf(conns)
			died := make(chan string, 1)
			browser.SetSettledHook(lead, func(id string) bool {
				select {
				case died <- id:
				default:
				}
				return true
			})
			type result struct {
				ack rt.Ack
				err error
			}
			got := make(chan result, 1)
			id := "lost" + strconv.Itoa(who)
			go func() {
				ack, err := rest[who].Mutate(context.Background(), browser.Mutation{ID: id, Op: "put", Payload: []byte(`{"id":"` + id + `"}`)})
				got <- result{ack, err}
			}()
			select {
			case d := <-died:
				if d != id {
					t.Fatalf("settled %q", d)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the leader never settled the mutation")
			}
			_ = lead.Close(context.Background()) // dies before announcing
			select {
			case r := <-got:
				if r.err != nil || !r.ack.Replayed || r.ack.Status != 201 {
					t.Fatalf("ack %+v, err %v: want a replayed 201", r.ack, r.err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Mutate never settled after the leader died")
			}
			waitFor(t, "nothing pending in any tab", func() bool {
				for _, c := range rest {
					if c.Status().Pending != 0 {
						return false
					}
				}
				return true
			})
			if applied, _, _ := f.counts(); applied != 1 {
				t.Fatalf("server applied it %d times", applied)
			}
		})
	}
}
