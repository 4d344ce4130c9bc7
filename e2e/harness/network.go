package harness

import (
	"context"
	"strings"
	"sync"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Transfer is one request of a tab as the browser's network stack saw it.
type Transfer struct {
	URL      string
	Status   int64
	Encoding string // the response's Content-Encoding
	// Wire is the bytes received from the network for it (CDP's
	// encodedDataLength at loadingFinished, BiDi's bytesReceived: headers
	// and the body as sent, compressed if it was); 0 for an answer from
	// the browser's cache.
	Wire float64
	// FromCache: answered from the disk or memory cache, no request sent.
	FromCache bool
	Finished  bool
}

// NetLog records a tab's transfers from the browser's network events
// (CDP's Network domain in Chromium, WebDriver BiDi's network module in
// Firefox), keyed by the browser's request id.
type NetLog struct {
	mu    sync.Mutex
	byID  map[string]*Transfer
	order []*Transfer
}

func newNetLog() *NetLog { return &NetLog{byID: map[string]*Transfer{}} }

// begin records a new request; a redirect's next hop reuses its id and
// becomes a transfer of its own.
func (n *NetLog) begin(id, url string) {
	tr := &Transfer{URL: url}
	n.byID[id] = tr
	n.order = append(n.order, tr)
}

// WatchNetwork records the tab's transfers from now on (in Chromium it
// turns the Network domain on, which a Bare tab has off).
func (t *Tab) WatchNetwork() (*NetLog, error) {
	if p, ok := t.p.(*bidiPage); ok {
		var n *NetLog
		err := call(EvalTimeout, func(ctx context.Context) error {
			var err error
			n, err = p.watchNetwork(ctx)
			return err
		})
		return n, err
	}
	tctx, err := t.CDP()
	if err != nil {
		return nil, err
	}
	n := newNetLog()
	if err := chromedp.Listen(tctx, n.on); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(tctx, EvalTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *NetLog) on(ev any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		n.begin(string(e.RequestID), e.Request.URL)
	case *network.EventResponseReceived:
		if tr := n.byID[string(e.RequestID)]; tr != nil && e.Response != nil {
			tr.Status = e.Response.Status
			tr.FromCache = tr.FromCache || e.Response.FromDiskCache
			for k, v := range e.Response.Headers {
				if strings.EqualFold(k, "Content-Encoding") {
					tr.Encoding, _ = v.(string)
				}
			}
		}
	case *network.EventRequestServedFromCache:
		if tr := n.byID[string(e.RequestID)]; tr != nil {
			tr.FromCache = true
		}
	case *network.EventLoadingFinished:
		if tr := n.byID[string(e.RequestID)]; tr != nil {
			tr.Wire, tr.Finished = e.EncodedDataLength, true
		}
	case *network.EventLoadingFailed:
		if tr := n.byID[string(e.RequestID)]; tr != nil {
			tr.Finished = true
		}
	}
}

// Reset forgets the transfers recorded so far.
func (n *NetLog) Reset() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.byID = map[string]*Transfer{}
	n.order = nil
}

// Transfers returns copies of the transfers recorded, in request order.
func (n *NetLog) Transfers() []Transfer {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Transfer, len(n.order))
	for i, tr := range n.order {
		out[i] = *tr
	}
	return out
}

// Finished returns the last finished transfer whose URL's path ends with
// suffix.
func (n *NetLog) Finished(suffix string) (Transfer, bool) {
	all := n.Transfers()
	for i := len(all) - 1; i >= 0; i-- {
		u, _, _ := strings.Cut(all[i].URL, "?")
		if all[i].Finished && strings.HasSuffix(u, suffix) {
			return all[i], true
		}
	}
	return Transfer{}, false
}
