package harness

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// Event is one entry of window.tabfenceDemo.events, recorded by the demo
// page (cmd/tabfence/server/demo) and the raw Web Locks page alike.
type Event struct {
	Type       string  `json:"type"` // joined, follower, leader, lost, signal-abort, ready, error, waiting
	At         float64 `json:"at"`   // ms since the epoch, page clock
	Reason     string  `json:"reason,omitempty"`
	Error      string  `json:"error,omitempty"`
	Name       string  `json:"name,omitempty"`
	Message    string  `json:"message,omitempty"`
	Token      float64 `json:"token,omitempty"`
	Generation int     `json:"generation,omitempty"`
}

// Events returns the page's events so far.
func (t *Tab) Events() ([]Event, error) {
	raw, err := Eval[json.RawMessage](t, `JSON.stringify(window.tabfenceDemo ? window.tabfenceDemo.events : [])`)
	if err != nil {
		return nil, err
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	var evs []Event
	err = json.Unmarshal([]byte(s), &evs)
	return evs, err
}

// Count returns how many events of type typ the page recorded.
func Count(evs []Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// Last returns the last event of type typ, if any.
func Last(evs []Event, typ string) (Event, bool) {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i], true
		}
	}
	return Event{}, false
}

// WaitEvent waits until the page has recorded at least n events of type typ
// and returns the nth.
func (t *Tab) WaitEvent(typ string, n int, timeout time.Duration) (Event, error) {
	var got Event
	err := Poll(context.Background(), strconv.Itoa(n)+" "+typ+" event(s)", timeout, 20*time.Millisecond, func() (bool, error) {
		evs, err := t.Events()
		if err != nil {
			return false, err
		}
		k := 0
		for _, e := range evs {
			if e.Type == typ {
				k++
				if k == n {
					got = e
					return true, nil
				}
			}
			if e.Type == "error" {
				return false, &pageError{e}
			}
		}
		return false, nil
	})
	return got, err
}

type pageError struct{ e Event }

func (p *pageError) Error() string { return "page error: " + p.e.Name + ": " + p.e.Message }

// IsLeader asks the demo page whether its election leads now.
func (t *Tab) IsLeader() (bool, error) {
	return Eval[bool](t, `!!(window.tabfenceDemo && window.tabfenceDemo.election && window.tabfenceDemo.election.isLeader)`)
}

// LockState is what navigator.locks.query() says about one lock name.
type LockState struct {
	Held    int `json:"held"`
	Pending int `json:"pending"`
}

// Locks queries the browser's lock manager from this tab (it sees every
// tab of the origin).
func (t *Tab) Locks(name string) (LockState, error) {
	q, err := json.Marshal(name)
	if err != nil {
		return LockState{}, err
	}
	return Eval[LockState](t, `navigator.locks.query().then(s => ({
		held: s.held.filter(l => l.name === `+string(q)+`).length,
		pending: s.pending.filter(l => l.name === `+string(q)+`).length }))`)
}
