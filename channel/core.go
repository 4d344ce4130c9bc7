package channel

import "sync"

// Message is a delivered envelope.
type Message struct {
	Envelope
	// Gap: messages were missed before this one; reload the resource's
	// state from storage instead of applying this on top of a hole.
	Gap bool
}

// receiver is a channel's receiving side without the browser: decoding's
// verdict, validation, per-resource cursors, the subscribe-before-load
// buffer and the counters. Pure Go, tested natively.
type receiver struct {
	mu         sync.Mutex
	limits     Limits
	cursors    map[string]*Cursor
	stats      Stats
	buffering  bool
	buf        []Envelope
	overflowed bool
}

func newReceiver(l Limits, buffering bool) *receiver {
	return &receiver{limits: l.withDefaults(), cursors: map[string]*Cursor{}, buffering: buffering}
}

// receive takes one decoded envelope (decodeReason != ReasonNone when
// decoding already rejected it) and returns the message to deliver, if any.
// In buffering mode valid envelopes are held for replay: cursor rules apply
// at replay, in arrival order.
func (r *receiver) receive(e Envelope, decodeReason Reason) (Message, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Received++
	if decodeReason != ReasonNone {
		r.stats.Dropped[decodeReason]++
		return Message{}, false
	}
	if why := r.limits.Check(e); why != ReasonNone {
		r.stats.Dropped[why]++
		return Message{}, false
	}
	if r.buffering {
		if len(r.buf) >= r.limits.MaxBuffered {
			// Drop the oldest; Replay reports a gap so the app reloads.
			r.buf = r.buf[1:]
			r.overflowed = true
			r.stats.Dropped[Oversized]++
		}
		r.buf = append(r.buf, e)
		return Message{}, false
	}
	return r.offer(e, false)
}

// offer runs the cursor; caller holds mu.
func (r *receiver) offer(e Envelope, forceGap bool) (Message, bool) {
	c := r.cursors[e.Resource]
	if c == nil {
		if len(r.cursors) >= r.limits.MaxResources {
			r.stats.Dropped[Oversized]++
			return Message{}, false
		}
		c = NewCursor(r.limits.RecentIDs)
		r.cursors[e.Resource] = c
	}
	v := c.Offer(e.Token, e.Seq, e.ID)
	if !v.Accept {
		r.stats.Dropped[v.Reason]++
		return Message{}, false
	}
	m := Message{Envelope: e, Gap: v.Gap || forceGap}
	r.stats.Delivered++
	if m.Gap {
		r.stats.Gaps++
	}
	return m, true
}

// startBuffering holds valid messages until replay.
func (r *receiver) startBuffering() {
	r.mu.Lock()
	r.buffering = true
	r.mu.Unlock()
}

// replay applies the cursor rules to the buffered messages in arrival order,
// returns those to deliver, and goes live.
func (r *receiver) replay() []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	buf, over := r.buf, r.overflowed
	r.buf, r.overflowed, r.buffering = nil, false, false
	var out []Message
	gapped := map[string]bool{}
	for _, e := range buf {
		m, ok := r.offer(e, over && !gapped[e.Resource])
		if ok {
			if over {
				gapped[e.Resource] = true
			}
			out = append(out, m)
		}
	}
	return out
}

func (r *receiver) snapshot() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// seed sets a resource's position from storage.
func (r *receiver) seed(resource string, token, seq uint64) {
	r.mu.Lock()
	c := r.cursors[resource]
	if c == nil {
		c = NewCursor(r.limits.RecentIDs)
		r.cursors[resource] = c
	}
	c.Seed(token, seq)
	r.mu.Unlock()
}
