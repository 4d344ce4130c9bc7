// Package loader is the Go side of the ES module loader (tabfence.js, which
// `make build` copies to dist/ with its types, tabfence.d.ts): the wasm
// exports' scratch and rules (Entered, Leave, Kick), and the loader's hook
// groups (Lookup), one per package it serves: package channel asks for
// "channel", the outbox runtime for "outbox", the JavaScript API for "api".
// Each group's JavaScript is a module beside the Go it serves
// (channel/fast.js, outbox/browser/append.js, wasm/api.js); core.js here holds
// what they share. It sits above jsglue and below channel, outbox and wasm.
package loader

import _ "embed"

// Module is the source of tabfence.js, the loader pages import.
//
//go:embed tabfence.js
var Module string

// CoreModule is the source of core.js: fastPath(groups) makes the object
// the loader installs (see Lookup) from the hook groups' factories.
//
//go:embed core.js
var CoreModule string

// Names of the hook groups: the keys of fastPath's groups and of the
// object the loader installs.
const (
	GroupChannel = "channel"
	GroupOutbox  = "outbox"
	GroupAPI     = "api"
	GroupIDB     = "idb"
)
