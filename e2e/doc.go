// Package e2e holds tabfence's end-to-end tests: several real browser tabs
// in one browser context (Chromium over CDP, Firefox ESR over WebDriver
// BiDi; each test declares which, see docs/browsers.md), against the
// runtime built by `make build` and the server of cmd/tabfence/server.
//
// They are behind the e2e build tag so `go test ./...` stays fast and
// browser-free:
//
//	make build && go test -tags e2e -count=1 ./e2e/...
package e2e
