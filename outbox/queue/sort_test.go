package queue

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// sortBySeq must order any listing as slices.SortFunc by Seq did: sorted,
// reversed, shuffled, with repeated seqs (foreign data), and tiny inputs.
func TestSortBySeq(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 40; n++ {
		for _, shape := range []string{"sorted", "reversed", "shuffled", "repeats"} {
			recs := make([]Record, n)
			for i := range recs {
				recs[i] = Record{ID: strconv.Itoa(i), Seq: uint64(i + 1)}
				switch shape {
				case "reversed":
					recs[i].Seq = uint64(n - i)
				case "repeats":
					recs[i].Seq = uint64(rng.IntN(5))
				}
			}
			if shape == "shuffled" {
				rng.Shuffle(n, func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
			}
			ids := map[string]uint64{}
			for _, r := range recs {
				ids[r.ID] = r.Seq
			}
			SortBySeq(recs)
			if !slices.IsSortedFunc(recs, func(a, b Record) int { return int(a.Seq) - int(b.Seq) }) {
				t.Fatalf("%s, n=%d: not sorted", shape, n)
			}
			for _, r := range recs {
				if s, ok := ids[r.ID]; !ok || s != r.Seq {
					t.Fatalf("%s, n=%d: record %s lost or changed", shape, n, r.ID)
				}
				delete(ids, r.ID)
			}
		}
	}
}
