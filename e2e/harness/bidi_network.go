package harness

import (
	"context"
	"encoding/json"
	"strings"
)

// bidiNetworkEvents are the events a NetLog records: a request sent, its
// response complete, or its failure.
var bidiNetworkEvents = []string{"network.beforeRequestSent", "network.responseCompleted", "network.fetchError"}

// bidiNetworkEvent is the part of those events' parameters a NetLog uses.
type bidiNetworkEvent struct {
	Context string `json:"context"`
	Request struct {
		Request string `json:"request"` // the request's id
		URL     string `json:"url"`
	} `json:"request"`
	Response *struct {
		Status        int64   `json:"status"`
		FromCache     bool    `json:"fromCache"`
		BytesReceived float64 `json:"bytesReceived"`
		Headers       []struct {
			Name  string `json:"name"`
			Value struct {
				Value string `json:"value"`
			} `json:"value"`
		} `json:"headers"`
	} `json:"response"`
}

// watchNetwork subscribes the session to this context's network events
// and records them. The subscription names the context and the listener
// drops other contexts' events, so two tabs' logs stay apart; close ends
// both.
func (p *bidiPage) watchNetwork(ctx context.Context) (*NetLog, error) {
	n := newNetLog()
	remove := p.conn.listen(bidiNetworkEvents, func(method string, params json.RawMessage) {
		var e bidiNetworkEvent
		if json.Unmarshal(params, &e) != nil || e.Context != p.id {
			return
		}
		n.onBiDi(method, &e)
	})
	var sub struct {
		Subscription string `json:"subscription"`
	}
	params := map[string]any{"events": bidiNetworkEvents, "contexts": []string{p.id}}
	if err := p.conn.call(ctx, "session.subscribe", params, &sub); err != nil {
		remove()
		return nil, err
	}
	p.onClose(func(ctx context.Context) {
		remove()
		if sub.Subscription != "" {
			_ = p.conn.call(ctx, "session.unsubscribe", map[string]any{"subscriptions": []string{sub.Subscription}}, nil)
		}
	})
	return n, nil
}

func (n *NetLog) onBiDi(method string, e *bidiNetworkEvent) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if method == "network.beforeRequestSent" {
		n.begin(e.Request.Request, e.Request.URL)
		return
	}
	tr := n.byID[e.Request.Request]
	if tr == nil {
		return
	}
	tr.Finished = true
	if r := e.Response; method == "network.responseCompleted" && r != nil {
		tr.Status, tr.FromCache, tr.Wire = r.Status, r.FromCache, r.BytesReceived
		for _, h := range r.Headers {
			if strings.EqualFold(h.Name, "Content-Encoding") {
				tr.Encoding = h.Value.Value
			}
		}
	}
}
