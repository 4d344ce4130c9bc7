package queue_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox/queue"
)

func lane(entity string, n int) []queue.Record {
	var l []queue.Record
	for i := 0; i < n; i++ {
		l = append(l, queue.Record{ID: entity + strconv.Itoa(i), EntityType: "n", EntityID: entity})
	}
	return l
}

func ids(parts []queue.PagePart) [][]string {
	var out [][]string
	for _, p := range parts {
		var s []string
		for _, r := range p.Records {
			s = append(s, r.ID)
		}
		out = append(out, s)
	}
	return out
}

// Pages take lanes in order, cut the last at the room left, and a lane
// busy in a page is not in the next one until that page is done.
func TestPagerCutsLanesAndKeepsEntitiesExclusive(t *testing.T) {
	p := queue.NewPager([][]queue.Record{lane("a", 3), lane("b", 3), lane("c", 1)})
	first := p.Next(4)
	require.Equal(t, [][]string{{"a0", "a1", "a2"}, {"b0"}}, ids(first))
	second := p.Next(4)
	require.Equal(t, [][]string{{"c0"}}, ids(second), "a and b are busy")
	require.Nil(t, p.Next(4))
	p.Done(first[0], 3)
	p.Done(first[1], 1)
	require.Equal(t, [][]string{{"b1", "b2"}}, ids(p.Next(4)))
	require.Equal(t, 0, p.Unpaged())
}

// A lane whose part was not wholly acked stops: its rest is never paged.
func TestPagerStopsLaneAfterFailure(t *testing.T) {
	p := queue.NewPager([][]queue.Record{lane("a", 5)})
	first := p.Next(2)
	p.Done(first[0], 1)
	require.Nil(t, p.Next(2))
	require.Equal(t, 3, p.Unpaged())
}
