package server

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// ErrBadOrigin is returned by New for an AllowOrigins entry that is neither
// "*" nor an origin (scheme://host[:port], nothing after it, the host in
// ASCII).
var ErrBadOrigin = errors.New("server: allowed origin must be * or scheme://host[:port]")

// corsPrefixes are the routes a page of another origin may call: the API,
// the fence, the realtime snapshot, and the runtime's files (a module
// script or a fetch from another origin needs CORS too). The WebSocket
// upgrade at /realtime is not CORS: its origin is checked at the upgrade.
var corsPrefixes = []string{"/api/", "/fence/", "/realtime/", "/dist/", UploadsPath}

// exposed are the response headers the outbox reads (CORS hides the rest);
// a tus client also reads the upload's URL, offset and length.
const (
	exposed    = "Idempotent-Replayed, X-Fencing-Highest, Retry-After"
	exposedTus = exposed + ", Location, Upload-Offset, Upload-Length, Upload-Metadata, Tus-Resumable, Tus-Version, Tus-Max-Size, Tus-Extension"
)

// maxRequestHeaders bounds the Access-Control-Request-Headers value echoed.
const maxRequestHeaders = 1024

// cors answers CORS preflights and marks the answers to the allowed origins
// on corsPrefixes. A listed origin may send credentials (the demo's
// cookie); "*" allows every origin without them, as the Fetch standard
// requires. Requests from other origins pass on unmarked: the browser then
// withholds the answer from the page.
type cors struct {
	any     bool
	origins map[string]bool
	next    http.Handler
}

// newCORS checks the allowed origins and returns the middleware.
func newCORS(origins []string) (func(http.Handler) http.Handler, error) {
	if len(origins) == 0 {
		return func(next http.Handler) http.Handler { return next }, nil
	}
	c := cors{origins: map[string]bool{}}
	for _, o := range origins {
		if o == "*" {
			c.any = true
			continue
		}
		norm, err := normalizeOrigin(o)
		if err != nil {
			return nil, err
		}
		c.origins[norm] = true
	}
	return func(next http.Handler) http.Handler {
		c := c
		c.next = next
		return &c
	}, nil
}

// normalizeOrigin is o as a browser serializes it in the Origin header:
// lower case, without the scheme's default port (https://app.example:443 is
// sent as https://app.example, so it would never match). A non-ASCII host
// is refused: browsers send its punycode (xn--...), which is to be listed.
func normalizeOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
		return "", errors.Join(ErrBadOrigin, errors.New("got "+o))
	}
	for i := 0; i < len(o); i++ {
		if o[i] >= utf8.RuneSelf || o[i] == '%' {
			return "", errors.Join(ErrBadOrigin, errors.New("got "+o+": the host must be ASCII, as browsers send it (punycode, xn--...)"))
		}
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if strings.HasSuffix(u.Host, ":") || (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return u.Scheme + "://" + host, nil
}

func (c *cors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !corsRoute(r.URL.Path) {
		c.next.ServeHTTP(w, r)
		return
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	allowed := origin != "" && (c.any || c.origins[strings.ToLower(origin)])
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if !allowed {
		if preflight {
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		c.next.ServeHTTP(w, r)
		return
	}
	if c.origins[strings.ToLower(origin)] {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
	} else {
		h.Set("Access-Control-Allow-Origin", "*")
	}
	if !preflight {
		if strings.HasPrefix(r.URL.Path, UploadsPath) {
			h.Set("Access-Control-Expose-Headers", exposedTus)
		} else {
			h.Set("Access-Control-Expose-Headers", exposed)
		}
		c.next.ServeHTTP(w, r)
		return
	}
	h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, PATCH, DELETE")
	if rh := r.Header.Get("Access-Control-Request-Headers"); rh != "" && headerList(rh) {
		h.Set("Access-Control-Allow-Headers", rh)
	}
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

func corsRoute(p string) bool {
	for _, pre := range corsPrefixes {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

// headerList reports whether s is a short comma-separated list of header
// names (RFC 9110 tokens), safe to echo.
func headerList(s string) bool {
	if len(s) > maxRequestHeaders {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c == ',' || c == ' ' || c == '-' || c == '_' || c == '.' ||
			('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}
