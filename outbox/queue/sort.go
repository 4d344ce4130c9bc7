package queue

// SortBySeq orders records by enqueue sequence (unique per store), the
// order every Store lists records in. It is a heapsort written out, not
// slices.SortFunc, whose instantiation for Record costs download size (see
// docs/outbox-notes.md). Listings usually arrive in order already, which
// costs one pass.
func SortBySeq(recs []Record) {
	sorted := true
	for i := 1; i < len(recs) && sorted; i++ {
		sorted = recs[i-1].Seq < recs[i].Seq
	}
	if sorted {
		return
	}
	// down sifts recs[i] down the max-heap recs[:n].
	down := func(i, n int) {
		for {
			c := 2*i + 1
			if c >= n {
				return
			}
			if c+1 < n && recs[c+1].Seq > recs[c].Seq {
				c++
			}
			if recs[i].Seq >= recs[c].Seq {
				return
			}
			recs[i], recs[c] = recs[c], recs[i]
			i = c
		}
	}
	for i := len(recs)/2 - 1; i >= 0; i-- {
		down(i, len(recs))
	}
	for n := len(recs) - 1; n > 0; n-- {
		recs[0], recs[n] = recs[n], recs[0]
		down(0, n)
	}
}
