package browser

import (
	"sync"
	"time"
)

// listeners is a set of callbacks of one kind; call runs them in the order
// they subscribed, outside the lock (a listener may unsubscribe).
type listeners[T any] struct {
	mu   sync.Mutex
	next int
	ids  []int
	fns  map[int]func(T)
}

func (l *listeners[T]) add(fn func(T)) (unsubscribe func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fns == nil {
		l.fns = map[int]func(T){}
	}
	l.next++
	id := l.next
	l.fns[id] = fn
	l.ids = append(l.ids, id)
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.fns, id)
		for i, x := range l.ids {
			if x == id {
				l.ids = append(l.ids[:i:i], l.ids[i+1:]...)
				break
			}
		}
	}
}

// any reports whether a listener is subscribed (so a caller can skip
// building what nobody reads).
func (l *listeners[T]) any() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids) > 0
}

func (l *listeners[T]) call(v T) {
	l.mu.Lock()
	fns := make([]func(T), 0, len(l.ids))
	for _, id := range l.ids {
		fns = append(fns, l.fns[id])
	}
	l.mu.Unlock()
	for _, fn := range fns {
		fn(v)
	}
}

// notifier tells status listeners: at once in a visible tab, and at most
// every `every` in a hidden one (a timer: a hidden tab runs no animation
// frames). A change while a timer waits is folded into it.
type notifier struct {
	mu      sync.Mutex
	every   time.Duration
	hidden  func() bool
	fire    func()
	waiting bool
	stopped bool
}

func (n *notifier) kick() {
	if !n.hidden() {
		n.fire()
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waiting || n.stopped {
		return
	}
	n.waiting = true
	time.AfterFunc(n.every, func() {
		n.mu.Lock()
		n.waiting = false
		stopped := n.stopped
		n.mu.Unlock()
		if !stopped {
			n.fire()
		}
	})
}

func (n *notifier) stop() {
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
}
