package realtime

import (
	"time"

	rt "github.com/tabfence/tabfence/wire/realtime"
)

// Outcome settles one mutation: exactly one of Ack and Reject is set, or
// neither (Missed) when a tab learns only that some leader settled it: its
// answer was announced while the tab could not hear it.
type Outcome struct {
	Ack    *rt.Ack
	Reject *rt.Reject
}

// Missed reports an outcome whose answer was not heard.
func (o Outcome) Missed() bool { return o.Ack == nil && o.Reject == nil }

// Pending is a tab's list of mutations not yet settled, in the order they
// were made. Every tab keeps one (the leader sends from its own; a
// follower's waits for the ack or reject some leader announces), so a
// mutation is settled by its id whichever leader's answer arrives: one
// made before a leader change settles on the next leader's ack. It is not
// safe for concurrent use: a Leader's belongs to its driver's goroutine.
type Pending struct {
	order []string
	byID  map[string]*pendingEntry
}

type pendingEntry struct {
	m       rt.Mutation
	added   time.Time
	waiters []chan Outcome
	tries   int       // retryable rejects so far
	retryAt time.Time // when a retryable reject may be resent; zero: with the next ready
}

// NewPending returns an empty list.
func NewPending() *Pending { return &Pending{byID: map[string]*pendingEntry{}} }

// Add records m, made at now, and returns a channel that receives its
// outcome once (buffered: nobody need be waiting). Adding an id already
// pending keeps the first mutation and returns another channel for it.
func (p *Pending) Add(m rt.Mutation, now time.Time) <-chan Outcome {
	ch := make(chan Outcome, 1)
	e := p.byID[m.ID]
	if e == nil {
		e = &pendingEntry{m: m, added: now}
		p.byID[m.ID] = e
		p.order = append(p.order, m.ID)
	}
	e.waiters = append(e.waiters, ch)
	return ch
}

// Has reports whether id is pending.
func (p *Pending) Has(id string) bool { return p.byID[id] != nil }

// Settle ends the mutation id with o and tells its waiters. It reports
// false when id is not pending (settled already, or never made here): an
// ack announced twice settles once.
func (p *Pending) Settle(id string, o Outcome) bool {
	e := p.byID[id]
	if e == nil {
		return false
	}
	delete(p.byID, id)
	for i, x := range p.order {
		if x == id {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
	for _, ch := range e.waiters {
		ch <- o
	}
	return true
}

// List returns the pending mutations, oldest first.
func (p *Pending) List() []rt.Mutation {
	out := make([]rt.Mutation, 0, len(p.order))
	for _, id := range p.order {
		out = append(out, p.byID[id].m)
	}
	return out
}

// Len is the number of pending mutations.
func (p *Pending) Len() int { return len(p.order) }

// OldestAge is how long the oldest pending mutation has waited (0 when
// none is pending), for a status every tab shows.
func (p *Pending) OldestAge(now time.Time) time.Duration {
	if len(p.order) == 0 {
		return 0
	}
	return now.Sub(p.byID[p.order[0]].added)
}
