// Package outside holds a test that builds the module's public examples and
// the Go snippets of its READMEs in a module of their own, as a user's code
// would: the go command then refuses any import of an internal package, and
// a snippet that no longer compiles fails the test.
package outside
