//go:build js && wasm

package fetch

import (
	"context"
	"errors"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/wire"
)

// DefaultMaxResponseBytes bounds the response body Transport reads: the
// body is kept in the record on ack, and a runaway answer must not fill the
// queue's storage.
const DefaultMaxResponseBytes = 1 << 20

// ErrResponseTooLarge: the receiver's answer exceeded MaxResponseBytes. It is
// returned as a Send error (no usable answer): the outbox retries a single
// send and halves a batch page (outbox.ErrResponseTooLarge).
var ErrResponseTooLarge = outbox.ErrResponseTooLarge

// Transport is the browser Transport: one fetch per Send.
//
// An error from Send means no HTTP answer arrived: fetch rejected (its
// TypeError is a network failure, CORS refusal or offline; AbortError is the
// context ending) or the body could not be read whole. Every HTTP status,
// even 500, is an answer and is returned as a Response.
type Transport struct {
	// BaseURL is prefixed to a Request.Endpoint that is a path; "" sends to
	// the page's own origin (fetch resolves relative URLs against it).
	BaseURL string
	// Credentials is fetch's credentials mode: "same-origin" (default),
	// "include" (cookies to a cross-origin receiver) or "omit".
	Credentials string
	// ContentType of the body; default "application/json".
	ContentType string
	// MaxResponseBytes bounds the body read; default DefaultMaxResponseBytes.
	MaxResponseBytes int
	// Authorize, when set, adds credentials (e.g. an Authorization header)
	// at send time for the request's user. They are never stored in a
	// record: a token refreshed while the queue waited is used as is. An
	// error fails the send like a network error (retried later).
	Authorize func(ctx context.Context, req outbox.Request, h outbox.Header) error
	// Fetch is the fetch function to call; the zero value is
	// globalThis.fetch, looked up at each send (so a fetch wrapped later by
	// the app, or by a test, is used).
	Fetch js.Value
	// KeepAlive sets fetch's keepalive, so a send started while the page
	// unloads still completes (bodies up to 64 KiB).
	KeepAlive bool
}

var (
	_ outbox.Transport = (*Transport)(nil)
	_ outbox.Resolver  = (*Transport)(nil)
)

// Resolve is the URL a Request.Endpoint is fetched at: BaseURL before a
// path, an absolute URL as it is (outbox.Resolver, wire.ResolveEndpoint).
func (f *Transport) Resolve(endpoint string) string {
	return wire.ResolveEndpoint(f.BaseURL, endpoint)
}

// Send implements Transport.
func (f *Transport) Send(ctx context.Context, req outbox.Request) (outbox.Response, error) {
	if err := ctx.Err(); err != nil {
		return outbox.Response{}, err
	}
	fetch := f.Fetch
	if fetch.Type() != js.TypeFunction {
		fetch = js.Global().Get("fetch")
	}
	if fetch.Type() != js.TypeFunction {
		return outbox.Response{}, jsglue.ErrUnavailable
	}
	headers, err := f.headers(ctx, req)
	if err != nil {
		return outbox.Response{}, err
	}
	method := req.Method
	if method == "" {
		method = "POST"
	}
	cred := f.Credentials
	if cred == "" {
		cred = "same-origin"
	}
	signal, stop := jsglue.Signal(ctx)
	defer stop()
	init := js.Global().Get("Object").New()
	init.Set("method", method)
	init.Set("headers", headers)
	init.Set("credentials", cred)
	init.Set("signal", signal)
	init.Set("redirect", "follow")
	init.Set("cache", "no-store")
	if f.KeepAlive {
		init.Set("keepalive", true)
	}
	if req.Body != nil && method != "GET" && method != "HEAD" {
		init.Set("body", jsglue.Bytes(req.Body))
	}
	p, err := jsglue.Call(fetch, "call", js.Global(), f.Resolve(req.Endpoint), init)
	if err != nil {
		return outbox.Response{}, &fetchError{stage: "fetch", err: err}
	}
	resp, err := jsglue.Await(ctx, p)
	if err != nil {
		return outbox.Response{}, f.sendErr(ctx, "fetch", err)
	}
	out := outbox.Response{Status: resp.Get("status").Int(), Header: responseHeader(resp)}
	if out.Status == 0 {
		// An opaque response (no-cors) or a network error disguised as a
		// response: no HTTP answer the outbox can act on.
		return outbox.Response{}, &fetchError{stage: "response", err: errors.New("status 0 (opaque response)")}
	}
	body, err := f.readBody(ctx, resp)
	if err != nil {
		return outbox.Response{}, f.sendErr(ctx, "body", err)
	}
	out.Body = body
	return out, nil
}

// headers are the request's headers: req's, the content type unless req
// sets one, then whatever Authorize adds.
func (f *Transport) headers(ctx context.Context, req outbox.Request) (js.Value, error) {
	h := make(outbox.Header, len(req.Header)+2)
	for k, v := range req.Header {
		h[k] = v
	}
	ct := f.ContentType
	if ct == "" {
		ct = "application/json"
	}
	if h.Get("Content-Type") == "" {
		h["Content-Type"] = ct
	}
	if f.Authorize != nil {
		if err := f.Authorize(ctx, req, h); err != nil {
			return js.Undefined(), err
		}
	}
	headers := js.Global().Get("Headers").New()
	for k, v := range h {
		if _, err := jsglue.Call(headers, "set", k, v); err != nil {
			return js.Undefined(), &fetchError{stage: "header " + k, err: err}
		}
	}
	return headers, nil
}

// responseHeader copies the response's headers.
func responseHeader(resp js.Value) outbox.Header {
	h := outbox.Header{}
	entries, err := jsglue.Call(js.Global().Get("Array"), "from", resp.Get("headers").Call("entries"))
	if err == nil {
		for i, n := 0, entries.Length(); i < n; i++ {
			kv := entries.Index(i)
			h[kv.Index(0).String()] = kv.Index(1).String()
		}
	}
	return h
}

func (f *Transport) sendErr(ctx context.Context, stage string, err error) error {
	if ctx.Err() != nil {
		if !errors.Is(err, ctx.Err()) {
			err = errors.Join(ctx.Err(), err)
		}
		return &fetchError{stage: stage, err: err}
	}
	if offline() {
		// navigator.onLine false is reliable (true is not): the device
		// has no network, so this failure is not the request's.
		return errors.Join(outbox.ErrOffline, &fetchError{stage: stage, err: err})
	}
	return &fetchError{stage: stage, err: err}
}

// offline reports whether the browser says it has no network at all.
func offline() bool {
	nav := js.Global().Get("navigator")
	return nav.Type() == js.TypeObject && nav.Get("onLine").Equal(js.ValueOf(false))
}

// readBody reads the body stream, refusing more than MaxResponseBytes (the
// Content-Length is not trusted: it may be absent or wrong).
func (f *Transport) readBody(ctx context.Context, resp js.Value) ([]byte, error) {
	limit := f.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	hs := resp.Get("headers")
	if cl := hs.Call("get", "content-length"); cl.Type() == js.TypeString {
		n, ok := parseLength(cl.String())
		if ok && n > limit {
			_, _ = jsglue.Call(resp.Get("body"), "cancel")
			return nil, ErrResponseTooLarge
		}
		if ok && hs.Call("get", "content-encoding").Type() != js.TypeString {
			// An unencoded body of a known, small enough length (the
			// browser enforces the framing): one read instead of a
			// stream loop, one wake-up of Go instead of two or more. An
			// encoded body's length says nothing of its decoded size.
			return readWhole(ctx, resp, limit)
		}
	}
	stream := resp.Get("body")
	if stream.Type() != js.TypeObject {
		return nil, nil // no body (204, HEAD)
	}
	rd, err := jsglue.Call(stream, "getReader")
	if err != nil {
		return nil, err
	}
	var body []byte
	for {
		p, err := jsglue.Call(rd, "read")
		if err != nil {
			return nil, err
		}
		chunk, err := jsglue.Await(ctx, p)
		if err != nil {
			_, _ = jsglue.Call(rd, "cancel")
			return nil, err
		}
		if chunk.Get("done").Truthy() {
			return body, nil
		}
		v := chunk.Get("value")
		n := v.Get("length").Int()
		if len(body)+n > limit {
			_, _ = jsglue.Call(rd, "cancel")
			return nil, ErrResponseTooLarge
		}
		start := len(body)
		body = append(body, make([]byte, n)...)
		js.CopyBytesToGo(body[start:], v)
	}
}

// readWhole reads a body whose size is known to be within limit with
// arrayBuffer (still checked: nothing is trusted).
func readWhole(ctx context.Context, resp js.Value, limit int) ([]byte, error) {
	p, err := jsglue.Call(resp, "arrayBuffer")
	if err != nil {
		return nil, err
	}
	buf, err := jsglue.Await(ctx, p)
	if err != nil {
		return nil, err
	}
	n := buf.Get("byteLength").Int()
	if n > limit {
		return nil, ErrResponseTooLarge
	}
	if n == 0 {
		return nil, nil
	}
	body := make([]byte, n)
	js.CopyBytesToGo(body, js.Global().Get("Uint8Array").New(buf))
	return body, nil
}

// fetchError is a Send failure: no HTTP answer. errors.Is sees the cause
// (jsglue.ErrType for a network failure, jsglue.ErrAbort or a context
// error for cancellation, ErrResponseTooLarge).
type fetchError struct {
	stage string
	err   error
}

func (e *fetchError) Error() string { return "outbox: fetch " + e.stage + ": " + e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

// parseLength reads a Content-Length value (digits only); a value too long
// to be a sane length counts as huge. Hand-written so strconv's error
// machinery is not linked for one header.
func parseLength(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > 1<<40 {
			return 1 << 40, true
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
