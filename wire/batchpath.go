package wire

// BatchPath is the Endpoint a batch mutation names for a record that would
// be POSTed alone to endpoint, when the batch goes to batchEndpoint: the
// endpoint itself when it is a path (ValidEndpoint), or the path and query
// of an absolute http(s) URL of batchEndpoint's own origin (the fragment
// dropped). ok is false for any other endpoint (another origin, or a URL
// beside a batch endpoint that is a path, whose origin is not known here):
// such a record is sent alone, where it would go.
func BatchPath(batchEndpoint, endpoint string) (path string, ok bool) {
	if ValidEndpoint(endpoint) {
		return endpoint, true
	}
	origin, path, ok := splitURL(endpoint)
	if !ok {
		return "", false
	}
	bo, _, ok := splitURL(batchEndpoint)
	if !ok || !equalFold(origin, bo) || !ValidEndpoint(path) {
		return "", false
	}
	return path, true
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
