package wire

// BatchPath is the Endpoint a batch mutation names for a record whose
// single request goes to endpoint, when the batch goes to batchEndpoint
// (both as the transport sends them, resolved alike): the endpoint itself
// when both are paths (ValidEndpoint: the same origin and base), or the
// path and query of an absolute http(s) URL of batchEndpoint's own origin
// (the fragment dropped), as the receiver sees the single request. ok is
// false for any other endpoint: another origin, a URL beside a batch
// endpoint that is a path, or a path beside an absolute batch endpoint
// (whose origin is not known here to be the path's). Such a record is sent
// alone, where it would go.
func BatchPath(batchEndpoint, endpoint string) (path string, ok bool) {
	bo, _, absolute := splitURL(batchEndpoint)
	if ValidEndpoint(endpoint) {
		if absolute {
			return "", false
		}
		return endpoint, true
	}
	origin, path, ok := splitURL(endpoint)
	if !ok || !absolute || !equalFold(origin, bo) || !ValidEndpoint(path) {
		return "", false
	}
	return path, true
}

// ResolveEndpoint is where a transport with base (a URL or path prefix;
// "" for the page's own origin) sends endpoint: an absolute http(s) URL as
// it is, anything else after base.
func ResolveEndpoint(base, endpoint string) string {
	if _, _, ok := splitURL(endpoint); ok {
		return endpoint
	}
	return base + endpoint
}

// splitURL splits an absolute http(s) URL into its origin (scheme://host)
// and its path with query, without the fragment ("/" for an empty path).
// It is not net/url, whose dependencies the wasm download would carry for
// this one use.
func splitURL(u string) (origin, path string, ok bool) {
	n := 0
	switch {
	case len(u) > 7 && equalFold(u[:7], "http://"):
		n = 7
	case len(u) > 8 && equalFold(u[:8], "https://"):
		n = 8
	default:
		return "", "", false
	}
	end, frag := len(u), len(u)
	for i := len(u) - 1; i >= n; i-- {
		switch u[i] {
		case '#':
			frag, end = i, i
		case '/', '?':
			end = i
		}
	}
	if end == n {
		return "", "", false
	}
	origin, path = u[:end], u[end:frag]
	if path == "" || path[0] == '?' {
		path = "/" + path
	}
	return origin, path, true
}
