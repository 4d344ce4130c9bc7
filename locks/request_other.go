//go:build !(js && wasm)

package locks

import "context"

// Outside a browser there is no navigator.locks: everything that would call
// it reports ErrUnavailable, so the package still builds (and its pure parts
// are tested) natively.

func platformAvailable() error { return ErrUnavailable }

func platformRequest(context.Context, string, Options, func(context.Context) error, func()) error {
	return ErrUnavailable
}

func platformQuery(context.Context) (Snapshot, error) { return Snapshot{}, ErrUnavailable }

func platformBeacon(string, beaconHooks) (beacon, error) { return nil, ErrUnavailable }
