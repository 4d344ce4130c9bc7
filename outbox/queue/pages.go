package queue

// Pager cuts a claim's lanes into the pages of a batch flush, one request
// each. A page takes the free lanes in claim order, each lane's records in
// order up to the room left, the last lane cut there. A lane with records
// in a page is not free until that page is Done, so an entity is never in
// two requests in flight and its records are answered in order; a lane
// whose part was not wholly acked stops, its rest left for a later claim.
type Pager struct{ lanes []pagerLane }

type pagerLane struct {
	recs          []Record
	next          int // recs[next:] are in no page yet
	busy, stopped bool
}

// PagePart is one lane's records in a page, in send order.
type PagePart struct {
	Lane    int
	Records []Record
}

// NewPager pages lanes (Lanes of a claim).
func NewPager(lanes [][]Record) *Pager {
	p := &Pager{lanes: make([]pagerLane, len(lanes))}
	for i, l := range lanes {
		p.lanes[i].recs = l
	}
	return p
}

// Next is the next page of at most room records; nil when no lane is free.
func (p *Pager) Next(room int) []PagePart {
	var parts []PagePart
	for i := range p.lanes {
		l := &p.lanes[i]
		if room <= 0 {
			break
		}
		if l.busy || l.stopped || l.next == len(l.recs) {
			continue
		}
		k := min(room, len(l.recs)-l.next)
		parts = append(parts, PagePart{Lane: i, Records: l.recs[l.next : l.next+k]})
		l.next += k
		l.busy = true
		room -= k
	}
	return parts
}

// Done frees part's lane once its page was answered: acked of its records,
// from the first, were acked; fewer stop the lane.
func (p *Pager) Done(part PagePart, acked int) {
	l := &p.lanes[part.Lane]
	l.busy = false
	if acked < len(part.Records) {
		l.stopped = true
	}
}

// Unpaged is how many records no page took.
func (p *Pager) Unpaged() int {
	n := 0
	for i := range p.lanes {
		n += len(p.lanes[i].recs) - p.lanes[i].next
	}
	return n
}
