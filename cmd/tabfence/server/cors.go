package server

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// ErrBadOrigin is returned by New for an AllowOrigins entry that is neither
// "*" nor an origin (scheme://host[:port], nothing after it).
var ErrBadOrigin = errors.New("server: allowed origin must be * or scheme://host[:port]")

// corsPrefixes are the routes a page of another origin may call: the API,
// the fence, and the runtime's files (a module script or a fetch from
// another origin needs CORS too).
var corsPrefixes = []string{"/api/", "/fence/", "/dist/"}

// exposed are the response headers the outbox reads (CORS hides the rest).
const exposed = "Idempotent-Replayed, X-Fencing-Highest, Retry-After"

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
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
			return nil, errors.Join(ErrBadOrigin, errors.New("got "+o))
		}
		c.origins[strings.ToLower(o)] = true
	}
	return func(next http.Handler) http.Handler {
		c := c
		c.next = next
		return &c
	}, nil
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
		h.Set("Access-Control-Expose-Headers", exposed)
		c.next.ServeHTTP(w, r)
		return
	}
	h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST")
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
